"""Chapter 5: the todo_write tool, the plan tracker and the request-only reminder."""

from __future__ import annotations

import orjson
import pytest
from pydantic import BaseModel

from agent_tutorial.core.loop import AgentRunner
from agent_tutorial.core.messages import (
    ChatMessage,
    SystemMessage,
    assistant_message,
    system_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.tools import ToolDefinition, ToolRegistry, ToolResult, tool_success
from agent_tutorial.features.todos import (
    MAX_TODO_ITEMS,
    TodoItem,
    TodoReminder,
    TodoTracker,
    latest_plan_in,
    render_plan,
    todo_write_tool,
)
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply

PLAN = [
    {"content": "Read the failing test", "status": "completed"},
    {"content": "Fix the parser", "status": "in_progress"},
    {"content": "Run the suite", "status": "pending"},
]


def write_call(todos: object, call_id: str = "w1") -> tuple[str, str, str]:
    return (call_id, "todo_write", orjson.dumps({"todos": todos}).decode())


def run_todo_write(tracker: TodoTracker, todos: object) -> ToolResult:
    return ToolRegistry([todo_write_tool(tracker)]).run(tool_call(*write_call(todos)))


def tracker_with_plan() -> TodoTracker:
    tracker = TodoTracker()
    assert not run_todo_write(tracker, PLAN).is_error
    return tracker


# --- todo_write validation -------------------------------------------------------------


def test_valid_snapshot_becomes_the_plan() -> None:
    tracker = tracker_with_plan()
    assert tracker.items == tuple(TodoItem.model_validate(item) for item in PLAN)


def test_result_shows_the_plan_compactly() -> None:
    result = run_todo_write(TodoTracker(), PLAN)
    assert result.content == (
        "Plan updated (1/3 completed):\n"
        "[x] Read the failing test\n"
        "[~] Fix the parser\n"
        "[ ] Run the suite"
    )


def test_new_snapshot_replaces_the_whole_plan() -> None:
    tracker = tracker_with_plan()
    run_todo_write(tracker, [{"content": "Only step", "status": "pending"}])
    assert [item.content for item in tracker.items] == ["Only step"]


def test_empty_snapshot_clears_the_plan() -> None:
    tracker = tracker_with_plan()
    result = run_todo_write(tracker, [])
    assert tracker.items == ()
    assert result.content == "Plan cleared."


@pytest.mark.parametrize(
    ("todos", "expected"),
    [
        ([{"content": "", "status": "pending"}], "todos.0.content"),
        ([{"content": "   ", "status": "pending"}], "todos.0.content"),
        ([{"content": "x" * 501, "status": "pending"}], "at most 500 characters"),
        ([{"content": "Step", "status": "done"}], "todos.0.status"),
        ([{"status": "pending"}], "todos.0.content: Field required"),
        ([{"content": f"step {n}", "status": "pending"} for n in range(51)], "at most 50"),
        (
            [{"content": "A", "status": "in_progress"}, {"content": "B", "status": "in_progress"}],
            "at most one item may be in_progress",
        ),
        ("not a list", "todos"),
    ],
    ids=["empty", "blank", "too-long", "bad-status", "no-content", "51-items", "two-active", "str"],
)
def test_invalid_snapshot_is_rejected_whole_and_keeps_the_plan(
    todos: object, expected: str
) -> None:
    tracker = tracker_with_plan()
    before = tracker.items
    result = run_todo_write(tracker, todos)
    assert result.is_error
    assert result.error_code == "invalid_arguments"
    assert expected in result.content
    assert tracker.items == before


def test_fifty_items_are_allowed() -> None:
    tracker = TodoTracker()
    todos = [{"content": f"step {n}", "status": "pending"} for n in range(MAX_TODO_ITEMS)]
    assert not run_todo_write(tracker, todos).is_error
    assert len(tracker.items) == MAX_TODO_ITEMS


def test_todo_write_has_read_effect() -> None:
    assert todo_write_tool(TodoTracker()).effect == "read"


def test_todo_items_are_frozen() -> None:
    item = TodoItem(content="Step", status="pending")
    with pytest.raises(ValueError, match="frozen"):
        item.status = "completed"


def test_tracker_replace_rejects_an_invalid_plan() -> None:
    tracker = tracker_with_plan()
    before = tracker.items
    two_active = [TodoItem(content=name, status="in_progress") for name in ("A", "B")]
    with pytest.raises(ValueError, match="in_progress"):
        tracker.replace(two_active)
    assert tracker.items == before


# --- change notification and rendering -------------------------------------------------


def test_on_change_hears_each_new_plan() -> None:
    heard: list[tuple[TodoItem, ...]] = []
    tracker = TodoTracker(on_change=heard.append)
    run_todo_write(tracker, PLAN)
    assert heard == [tracker.items]


def test_on_change_is_quiet_when_the_plan_is_unchanged() -> None:
    heard: list[tuple[TodoItem, ...]] = []
    tracker = TodoTracker(on_change=heard.append)
    run_todo_write(tracker, PLAN)
    run_todo_write(tracker, PLAN)
    assert len(heard) == 1


def test_render_plan_marks_each_status() -> None:
    items = [
        TodoItem(content="done", status="completed"),
        TodoItem(content="doing", status="in_progress"),
        TodoItem(content="todo", status="pending"),
    ]
    assert render_plan(items) == "[x] done\n[~] doing\n[ ] todo"


# --- the reminder counter --------------------------------------------------------------


def tool_round(call_id: str, name: str = "noop", arguments: str = "{}") -> list[ChatMessage]:
    return [
        assistant_message(None, [tool_call(call_id, name, arguments)]),
        tool_message("ok", call_id),
    ]


def rounds(count: int, prefix: str = "r") -> list[ChatMessage]:
    history: list[ChatMessage] = []
    for n in range(count):
        history += tool_round(f"{prefix}{n}")
    return history


def guidance_for(history: list[ChatMessage], tracker: TodoTracker | None = None) -> list[str]:
    reminder = TodoReminder(tracker or TodoTracker())
    return [message.content or "" for message in reminder.guidance(history, history)]


def test_no_reminder_after_two_tool_rounds() -> None:
    assert guidance_for([user_message("go"), *rounds(2)]) == []


def test_reminder_after_exactly_three_tool_rounds_names_todo_write() -> None:
    notes = guidance_for([user_message("go"), *rounds(3)])
    assert len(notes) == 1
    assert "3 tool rounds" in notes[0]
    assert "todo_write" in notes[0]


def test_reminder_is_a_system_message() -> None:
    history = [user_message("go"), *rounds(3)]
    messages = TodoReminder(TodoTracker()).guidance(history, history)
    assert [type(message) for message in messages] == [SystemMessage]


def test_reminder_counts_every_round_past_three() -> None:
    notes = guidance_for([user_message("go"), *rounds(5)])
    assert "5 tool rounds" in notes[0]


def test_todo_write_resets_the_count() -> None:
    plan_round = tool_round("w", "todo_write", orjson.dumps({"todos": PLAN}).decode())
    history = [user_message("go"), *rounds(4, "a"), *plan_round, *rounds(2, "b")]
    assert guidance_for(history) == []


def test_todo_write_inside_a_parallel_batch_resets_the_count() -> None:
    batch = assistant_message(
        None, [tool_call("x", "noop", "{}"), tool_call("w", "todo_write", '{"todos": []}')]
    )
    history = [
        user_message("go"),
        *rounds(3),
        batch,
        tool_message("ok", "x"),
        tool_message("Plan cleared.", "w"),
    ]
    assert guidance_for(history) == []


def test_a_new_user_prompt_resets_the_count() -> None:
    history = [user_message("go"), *rounds(3, "a"), assistant_message("done")]
    history += [user_message("next"), *rounds(2, "b")]
    assert guidance_for(history) == []


def test_reminder_for_an_existing_plan_asks_to_update_it() -> None:
    notes = guidance_for([user_message("go"), *rounds(3)], tracker_with_plan())
    assert "mark finished items completed" in notes[0]


class NoInput(BaseModel):
    pass


def noop_tool() -> ToolDefinition:
    return ToolDefinition("noop", "Does nothing.", NoInput, lambda _: tool_success("ok"))


def test_reminder_reaches_only_the_fourth_request_and_never_canonical_history() -> None:
    tracker = TodoTracker()
    plan_call = tool_call(*write_call(PLAN, "w1"))
    model = ScriptedModel(
        [
            tool_reply(tool_call("c1", "noop", "{}")),
            tool_reply(tool_call("c2", "noop", "{}")),
            tool_reply(tool_call("c3", "noop", "{}")),
            tool_reply(plan_call),
            text_reply("done"),
        ]
    )
    tools = ToolRegistry([noop_tool(), todo_write_tool(tracker)])
    runner = AgentRunner(model, tools, guidance=[TodoReminder(tracker)])

    runner.run("work")

    reminders = [
        [m for m in request.messages if isinstance(m, SystemMessage)] for request in model.requests
    ]
    assert [len(found) for found in reminders] == [0, 0, 0, 1, 0]
    assert "todo_write" in reminders[3][0].content
    assert model.requests[3].messages[-1] == reminders[3][0]
    assert not any(isinstance(message, SystemMessage) for message in runner.history)


# --- the plan after a compacted summary ------------------------------------------------


def compacted_summary() -> SystemMessage:
    payload = {
        "kind": "compacted_history",
        "transcript_path": ".agent_tutorial/artifacts/transcript-1.jsonl",
        "current_goal": "fix the parser",
        "key_findings": [],
        "files_read_or_changed": [],
        "remaining_work": [],
        "user_constraints": [],
    }
    return system_message(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode())


def test_plan_is_added_after_a_compacted_summary() -> None:
    tracker = tracker_with_plan()
    request: list[ChatMessage] = [compacted_summary(), user_message("go on")]
    messages = TodoReminder(tracker).guidance(request, request)
    assert len(messages) == 1
    assert render_plan(tracker.items) in (messages[0].content or "")


def test_no_plan_message_without_a_summary() -> None:
    request: list[ChatMessage] = [user_message("go on")]
    assert TodoReminder(tracker_with_plan()).guidance(request, request) == []


def test_no_plan_message_when_there_is_no_plan() -> None:
    request: list[ChatMessage] = [compacted_summary(), user_message("go on")]
    assert TodoReminder(TodoTracker()).guidance(request, request) == []


def test_other_json_system_messages_are_not_summaries() -> None:
    request: list[ChatMessage] = [
        system_message('{"kind": "something_else"}'),
        user_message("go on"),
    ]
    assert TodoReminder(tracker_with_plan()).guidance(request, request) == []


# --- restoring a plan from history -----------------------------------------------------


def test_latest_successful_todo_write_is_the_restored_plan() -> None:
    first = [{"content": "Old", "status": "pending"}]
    history = [
        user_message("go"),
        *tool_round("w1", "todo_write", orjson.dumps({"todos": first}).decode()),
        assistant_message(None, [tool_call(*write_call(PLAN, "w2"))]),
        tool_message("Plan updated", "w2"),
        assistant_message(None, [tool_call(*write_call([], "w3"))]),
        tool_message("Error [permission_denied]: no", "w3"),
    ]
    assert latest_plan_in(history) == tuple(TodoItem.model_validate(item) for item in PLAN)


def test_history_without_todo_write_has_no_plan() -> None:
    assert latest_plan_in([user_message("go"), *rounds(2)]) is None
