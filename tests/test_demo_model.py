"""The offline demo model, driven through a real `AgentRunner` with the real builtin tools."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from agent_tutorial.core.events import (
    CompactionApplied,
    EventBus,
    ModelReplied,
    TextDelta,
    ToolFinished,
)
from agent_tutorial.core.loop import AgentRunner
from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    ToolCall,
    ToolMessage,
    system_message,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import ModelReply, ModelRequest, make_request
from agent_tutorial.core.tools import ToolRegistry
from agent_tutorial.demo import DEMO_BANNER, SUBAGENT_MARKER, DemoModel
from agent_tutorial.features.builtin_tools import bash_tool, file_tools, search_tools
from agent_tutorial.features.compaction import (
    SUMMARY_SYSTEM_PROMPT,
    CompactionManager,
    ModelHistorySummarizer,
)
from agent_tutorial.features.skills import SkillRegistry, load_skill_tool
from agent_tutorial.features.subagents import subagent_tools, task_tool
from agent_tutorial.features.todos import TodoTracker, todo_write_tool
from tests.event_log import EventLog

SUMMARY_FIELDS = {
    "current_goal",
    "key_findings",
    "files_read_or_changed",
    "remaining_work",
    "user_constraints",
}


# --- workspaces and runners ----------------------------------------------------------


def small_project(root: Path) -> Path:
    """Three Python files and two Markdown files, all small."""
    (root / "app").mkdir()
    (root / "docs").mkdir()
    (root / "README.md").write_text("# Demo project\n\nA tiny project for the tour.\n")
    (root / "docs" / "guide.md").write_text("# Guide\n\nRead the code.\n")
    (root / "app" / "__init__.py").write_text('"""The app package."""\n')
    (root / "app" / "core.py").write_text(
        '"""Core logic."""\n\n\nclass Engine:\n    pass\n\n\ndef start() -> None:\n    pass\n'
    )
    (root / "app" / "util.py").write_text(
        '"""Helpers."""\n\n\ndef helper() -> int:\n    return 1\n'
    )
    return root


def large_project(root: Path) -> Path:
    """The small project plus thirty modules and one 80 KB file: enough for the long tour."""
    small_project(root)
    for number in range(30):
        (root / "app" / f"mod_{number:02}.py").write_text(
            f'"""Module {number}."""\n\n\ndef run_{number}() -> int:\n    return {number}\n'
        )
    lines = [f"VALUE_{number:05} = {number}  # padding to 40 bytes" for number in range(2_000)]
    (root / "app" / "big.py").write_text("\n".join(lines) + "\n")
    return root


def tools_for(chapter: int, workspace: Path, model: DemoModel) -> ToolRegistry:
    """The tools a chapter offers (without permissions and hooks, which change nothing here)."""
    tools = ToolRegistry([bash_tool(workspace)])
    if chapter >= 2:
        for tool in [*file_tools(workspace), *search_tools(workspace)]:
            tools.register(tool)
    if chapter >= 5:
        tools.register(todo_write_tool(TodoTracker()))
    if chapter >= 6:
        tools.register(task_tool(lambda _: AgentRunner(model, subagent_tools(tools), max_turns=5)))
    if chapter >= 7:
        tools.register(load_skill_tool(SkillRegistry.discover(workspace)))
    return tools


def run_demo(
    workspace: Path, chapter: int, *, events: EventBus | None = None
) -> tuple[AgentRunner, str]:
    model = DemoModel(workspace, long_session=chapter == 8)
    runner = AgentRunner(model, tools_for(chapter, workspace, model), max_turns=100, events=events)
    return runner, runner.run("Give me a tour of this repository.").final_text


def tool_calls(history: Sequence[ChatMessage]) -> list[ToolCall]:
    return [
        call
        for message in history
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    ]


def result_sizes(history: Sequence[ChatMessage]) -> list[int]:
    return [len(m.content.encode()) for m in history if isinstance(m, ToolMessage)]


# --- what it says and which tools it calls -------------------------------------------


def test_chapter_one_tour_calls_only_bash(workspace: Path) -> None:
    runner, _ = run_demo(small_project(workspace), chapter=1)

    names = {call.name for call in tool_calls(runner.history)}

    assert names == {"bash"}


def test_chapter_two_tour_calls_only_the_offered_tools(workspace: Path) -> None:
    runner, _ = run_demo(small_project(workspace), chapter=2)

    names = {call.name for call in tool_calls(runner.history)}

    assert names == {"glob", "read_file", "grep", "bash"}
    assert names <= set(runner.tools.names())


def test_tour_ends_with_a_final_report_that_says_it_is_scripted(workspace: Path) -> None:
    runner, final_text = run_demo(small_project(workspace), chapter=2)

    assert final_text.startswith(DEMO_BANNER)
    assert runner.history[-1] == AssistantMessage(final_text)
    validate_tool_pairing(runner.history)


def test_first_streamed_text_says_it_is_scripted_and_comes_in_pieces(workspace: Path) -> None:
    log = EventLog()
    run_demo(small_project(workspace), chapter=2, events=EventBus([log]))

    deltas = [event.text for event in log.events if isinstance(event, TextDelta)]
    first_reply = next(e for e in log.events if isinstance(e, ModelReplied)).message.content

    assert deltas[0].startswith(DEMO_BANNER)
    assert first_reply is not None and len(first_reply) > len(deltas[0]) > 0
    assert "".join(deltas).startswith(first_reply)


def test_report_counts_what_the_tools_returned(workspace: Path) -> None:
    _, final_text = run_demo(small_project(workspace), chapter=2)

    assert "**Found** 5 source files: 3 Python, 2 Markdown." in final_text
    assert "**Matched** 3 top-level `class`/`def` lines with grep." in final_text


def test_chapter_one_report_uses_the_shell_output(workspace: Path) -> None:
    _, final_text = run_demo(small_project(workspace), chapter=1)

    assert "**Found** 5 source files: 3 Python, 2 Markdown." in final_text
    assert "(`wc -l`)" in final_text


def test_report_of_a_one_file_workspace_speaks_in_the_singular(workspace: Path) -> None:
    (workspace / "notes.md").write_text("# Notes\n\nOne file only.\n")

    _, final_text = run_demo(workspace, chapter=1)

    assert "**Found** 1 source file: 0 Python, 1 Markdown." in final_text
    assert "**Measured** 3 lines in the largest file (`wc -l`)." in final_text


def test_every_reply_reports_deterministic_usage(workspace: Path) -> None:
    small_project(workspace)
    logs = [EventLog(), EventLog()]
    for log in logs:
        run_demo(workspace, chapter=2, events=EventBus([log]))

    usages = [[e.usage for e in log.events if isinstance(e, ModelReplied)] for log in logs]

    assert usages[0] == usages[1]
    assert all(u is not None and u.prompt_tokens > 0 and u.completion_tokens > 0 for u in usages[0])


# --- determinism and a second prompt -------------------------------------------------


def test_two_runs_make_identical_tool_calls(workspace: Path) -> None:
    large_project(workspace)

    first, _ = run_demo(workspace, chapter=6)
    second, _ = run_demo(workspace, chapter=6)

    assert tool_calls(first.history) == tool_calls(second.history)


def test_call_ids_count_up_from_one(workspace: Path) -> None:
    runner, _ = run_demo(small_project(workspace), chapter=2)

    ids = [call.id for call in tool_calls(runner.history)]

    assert ids == [f"demo-call-{number}" for number in range(1, len(ids) + 1)]


def test_a_second_prompt_starts_a_fresh_tour_with_new_call_ids(workspace: Path) -> None:
    runner, _ = run_demo(small_project(workspace), chapter=2)
    calls_after_first = len(tool_calls(runner.history))

    final_text = runner.run("Again, please.").final_text

    assert final_text.startswith(DEMO_BANNER)
    assert len(tool_calls(runner.history)) == 2 * calls_after_first
    validate_tool_pairing(runner.history)  # ids stay unique across both runs


# --- subagents -----------------------------------------------------------------------


def test_subagent_reads_once_and_its_answer_reaches_the_parent(workspace: Path) -> None:
    runner, _ = run_demo(small_project(workspace), chapter=6)

    task = next(call for call in tool_calls(runner.history) if call.name == "task")
    answer = next(
        m.content
        for m in runner.history
        if isinstance(m, ToolMessage) and m.tool_call_id == task.id
    )

    assert orjson.loads(task.arguments)["prompt"].startswith(SUBAGENT_MARKER)
    assert answer.startswith(f"{DEMO_BANNER} Read ")
    assert "opens with:" in answer


# --- skills ---------------------------------------------------------------------------


def test_tour_loads_a_skill_from_the_catalog(workspace: Path) -> None:
    skill = small_project(workspace) / "skills" / "tour-guide"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: tour-guide\ndescription: How to tour a project.\n---\nStart with README.\n"
    )

    runner, final_text = run_demo(workspace, chapter=7)

    loads = [call for call in tool_calls(runner.history) if call.name == "load_skill"]
    assert [orjson.loads(call.arguments) for call in loads] == [{"name": "tour-guide"}]
    assert "**Skill** `tour-guide` loaded" in final_text


# --- the long chapter-8 tour ---------------------------------------------------------


@pytest.fixture(scope="module")
def long_history(tmp_path_factory: pytest.TempPathFactory) -> list[ChatMessage]:
    """One long tour over a large project, with chapter 8's tools but no compaction, so the
    history holds every result at full size."""
    workspace = large_project(tmp_path_factory.mktemp("long"))
    runner, final_text = run_demo(workspace, chapter=8)
    assert final_text.startswith(DEMO_BANNER)
    return runner.history


def test_long_tour_makes_more_than_fifty_tool_rounds_before_its_large_results(
    long_history: list[ChatMessage],
) -> None:
    sizes = result_sizes(long_history)
    first_large = next(index for index, size in enumerate(sizes) if size >= 15_000)

    assert first_large > 50


def test_long_tour_produces_one_result_over_30000_bytes(
    long_history: list[ChatMessage],
) -> None:
    assert [size for size in result_sizes(long_history) if size > 30_000] != []


def test_long_tour_reads_about_20_kb_in_three_consecutive_rounds(
    long_history: list[ChatMessage],
) -> None:
    sizes = result_sizes(long_history)
    runs = [sizes[index : index + 3] for index in range(len(sizes) - 2)]

    assert any(all(15_000 <= size <= 25_000 for size in run) and sum(run) > 50_000 for run in runs)


def test_long_tour_reads_through_bash_when_no_file_is_large_enough(workspace: Path) -> None:
    for number in range(30):
        lines = [f"value_{number}_{index} = {index}  # a line of filler" for index in range(300)]
        (workspace / f"mod_{number:02}.py").write_text("\n".join(lines) + "\n")

    runner, _ = run_demo(workspace, chapter=8)

    calls, sizes = tool_calls(runner.history), result_sizes(runner.history)
    bulk = next(index for index, size in enumerate(sizes) if size > 30_000)
    large = [index for index, size in enumerate(sizes) if 15_000 <= size <= 25_000]
    assert calls[bulk].name == "bash"
    assert len(large) == 3
    assert [calls[index].name for index in large] == ["bash"] * 3


def test_without_tools_it_answers_at_once(workspace: Path) -> None:
    reply = DemoModel(workspace).complete(make_request([user_message("Hello?")]))

    assert reply.finish_reason == "stop"
    assert (reply.message.content or "").startswith(DEMO_BANNER)


def test_long_tour_still_finishes_in_a_tiny_workspace(workspace: Path) -> None:
    (workspace / "main.py").write_text("def main() -> None:\n    print('hi')\n")

    runner, final_text = run_demo(workspace, chapter=8)

    assert final_text.startswith(DEMO_BANNER)
    assert 3 < len(tool_calls(runner.history)) < 20


def test_long_tour_makes_every_compaction_layer_fire(workspace: Path) -> None:
    large_project(workspace)
    log = EventLog()
    events = EventBus([log])
    model = DemoModel(workspace, long_session=True)
    manager = CompactionManager(workspace, ModelHistorySummarizer(model), on_event=events.emit)
    runner = AgentRunner(
        model,
        tools_for(8, workspace, model),
        max_turns=100,
        context=manager,
        events=events,
    )

    final_text = runner.run("Give me a tour of this repository.").final_text

    layers = [e.layer for e in log.events if isinstance(e, CompactionApplied)]
    assert {"persist", "snip", "micro", "summary"} <= set(layers)
    assert layers.count("summary") == 1
    summary_at = next(
        i
        for i, e in enumerate(log.events)
        if isinstance(e, CompactionApplied) and e.layer == "summary"
    )
    rounds_before = sum(isinstance(e, ToolFinished) for e in log.events[:summary_at])
    assert rounds_before > 50
    assert "was persisted to `.agent_tutorial/artifacts/tool-result-" in final_text
    assert "summarized once" in final_text


# --- summary requests ----------------------------------------------------------------


class RecordingModel:
    """Passes requests to the demo model and keeps its replies."""

    def __init__(self, model: DemoModel) -> None:
        self.model = model
        self.replies: list[ModelReply] = []

    def complete(self, request: ModelRequest) -> ModelReply:
        self.replies.append(self.model.complete(request))
        return self.replies[-1]


def test_summary_request_gets_the_five_field_json(workspace: Path) -> None:
    runner, _ = run_demo(small_project(workspace), chapter=2)
    recording = RecordingModel(DemoModel(workspace))

    summary = ModelHistorySummarizer(recording).summarize(runner.history)

    [reply] = recording.replies
    assert reply.finish_reason == "stop"
    assert reply.message.tool_calls == ()
    assert set(orjson.loads(reply.message.content or "")) == SUMMARY_FIELDS
    assert summary.current_goal == "Give me a tour of this repository."


def test_summary_request_does_not_move_the_script_on(workspace: Path) -> None:
    small_project(workspace)
    tools = tools_for(2, workspace, DemoModel(workspace)).specs()
    history: list[ChatMessage] = [user_message("Tour, please.")]
    plain, interrupted = DemoModel(workspace), DemoModel(workspace)

    first = plain.complete(make_request(history, tools)).message
    interrupted.complete(make_request(history, tools))
    interrupted.complete(make_request([system_message(SUMMARY_SYSTEM_PROMPT), *history]))
    history += [first, ToolMessage("app/core.py", first.tool_calls[0].id)]

    assert (
        interrupted.complete(make_request(history, tools)).message
        == plain.complete(make_request(history, tools)).message
    )
