"""The layer-4 summary: the model summarizer's request and its validation, the summary
message, and the model-free extractive summarizer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    system_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.model import ModelReply, ProviderError
from agent_tutorial.features.bench.replay import RecordingSummarizer
from agent_tutorial.features.compaction import (
    COMPACTED_TOOL_RESULT,
    SUMMARY_SYSTEM_PROMPT,
    CompactionError,
    CompactionSettings,
    CompactionSummary,
    ExtractiveSummarizer,
    ModelHistorySummarizer,
    history_utf8_bytes,
    is_compacted_summary,
    summary_message,
)
from agent_tutorial.features.compaction.summary import (
    history_to_summarize,
    summary_request_bytes,
)
from agent_tutorial.testing import ScriptedModel, text_reply
from tests.test_compaction_support import SUMMARY

VALID = {
    "current_goal": "Tour the repository",
    "key_findings": ["the loop lives in core/loop.py"],
    "files_read_or_changed": ["core/loop.py"],
    "remaining_work": ["describe the tools"],
    "user_constraints": ["read only"],
}
HISTORY: list[ChatMessage] = [
    user_message("Give me a tour"),
    assistant_message(None, [tool_call("c1", "read_file", '{"path": "core/loop.py"}')]),
    tool_message("loop source", "c1"),
]


def summarize_reply(reply: ModelReply) -> CompactionSummary:
    return ModelHistorySummarizer(ScriptedModel([reply])).summarize(HISTORY)


def with_changes(**changes: Any) -> str:
    data: dict[str, Any] = {**VALID, **changes}
    return json.dumps({key: value for key, value in data.items() if value is not ...})


def test_model_summarizer_sends_one_tool_free_request_opening_with_the_prompt() -> None:
    model = ScriptedModel([text_reply(json.dumps(VALID))])

    ModelHistorySummarizer(model).summarize(HISTORY)

    (request,) = model.requests
    assert request.tools == ()
    assert request.messages[0] == system_message(SUMMARY_SYSTEM_PROMPT)
    assert request.messages[1:4] == tuple(HISTORY)


def test_summary_prompt_names_the_five_fields() -> None:
    for name in VALID:
        assert f'"{name}"' in SUMMARY_SYSTEM_PROMPT


def test_model_summarizer_accepts_exactly_the_five_fields() -> None:
    assert summarize_reply(text_reply(json.dumps(VALID))) == SUMMARY


@pytest.mark.parametrize(
    "fenced",
    [
        "```json\n{}\n```",
        "```\n{}\n```",
        "\n  ```JSON\n{}\n```  \n",
        "```json\n{}\n  ```",
    ],
    ids=["json", "untagged", "padded", "indented-close"],
)
def test_model_summarizer_accepts_the_object_in_one_code_fence(fenced: str) -> None:
    """Small models fence the JSON despite the prompt; the fields stay as strict."""
    reply = text_reply(fenced.replace("{}", json.dumps(VALID, indent=2)))

    assert summarize_reply(reply) == SUMMARY


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (ModelReply(assistant_message(json.dumps(VALID)), "length"), "'length', not 'stop'"),
        (
            ModelReply(
                assistant_message(json.dumps(VALID), [tool_call("c9", "bash", "{}")]), "stop"
            ),
            "called tools",
        ),
        (text_reply(""), "empty"),
        (text_reply("  \n"), "empty"),
        (text_reply("Here is the summary: {}"), "not JSON"),
        (text_reply("Summary:\n```json\n" + json.dumps(VALID) + "\n```"), "not JSON"),
        (text_reply("```json\n" + json.dumps(VALID) + "\n```\nDone."), "not JSON"),
        (text_reply("```python\n" + json.dumps(VALID) + "\n```"), "not JSON"),
        (text_reply("```json\n" + json.dumps(VALID) + "\n"), "not JSON"),
        (text_reply("```json\n{}\n```\n```json\n" + json.dumps(VALID) + "\n```"), "not JSON"),
        (text_reply("```json\n" + json.dumps([VALID]) + "\n```"), "not an object"),
        (text_reply(json.dumps([VALID])), "not an object"),
        (text_reply(with_changes(user_constraints=...)), "missing \\['user_constraints'\\]"),
        (text_reply(with_changes(notes=["extra"])), "unexpected \\['notes'\\]"),
        (text_reply(with_changes(current_goal="")), "current_goal"),
        (text_reply(with_changes(current_goal="   ")), "current_goal"),
        (text_reply(with_changes(current_goal=["a list"])), "current_goal"),
        (text_reply(with_changes(key_findings="one string")), "key_findings must be an array"),
        (text_reply(with_changes(remaining_work=["ok", ""])), "remaining_work must contain"),
        (text_reply(with_changes(files_read_or_changed=[3])), "files_read_or_changed"),
        (text_reply(with_changes(user_constraints=None)), "user_constraints"),
    ],
)
def test_model_summarizer_rejects_every_other_reply(reply: ModelReply, reason: str) -> None:
    with pytest.raises(CompactionError, match=reason):
        summarize_reply(reply)


def test_model_error_during_the_summary_becomes_a_compaction_error() -> None:
    model = ScriptedModel([ProviderError("502 from the provider")])

    with pytest.raises(CompactionError, match="502 from the provider"):
        ModelHistorySummarizer(model).summarize(HISTORY)


def test_summary_message_is_sorted_key_json_with_the_transcript_path() -> None:
    message = summary_message(SUMMARY, ".agent_tutorial/artifacts/transcript-t1.jsonl")

    assert message == system_message(
        '{"current_goal":"Tour the repository",'
        '"files_read_or_changed":["core/loop.py"],'
        '"key_findings":["the loop lives in core/loop.py"],'
        '"kind":"compacted_history",'
        '"remaining_work":["describe the tools"],'
        '"transcript_path":".agent_tutorial/artifacts/transcript-t1.jsonl",'
        '"user_constraints":["read only"]}'
    )


def test_is_compacted_summary_recognises_only_the_summary_message() -> None:
    assert is_compacted_summary(summary_message(SUMMARY, "t.jsonl"))
    assert not is_compacted_summary(user_message(summary_message(SUMMARY, "t.jsonl").content))
    assert not is_compacted_summary(system_message('{"kind": "other"}'))
    assert not is_compacted_summary(system_message("{not json"))
    assert not is_compacted_summary(system_message("[Compacted: 3 message groups omitted]"))


@pytest.mark.parametrize(
    "fields",
    [
        {"current_goal": ""},
        {"current_goal": "goal", "key_findings": ("",)},
        {"current_goal": "goal", "remaining_work": "not a list"},
    ],
)
def test_invalid_summary_cannot_be_built(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"current_goal|key_findings|remaining_work"):
        CompactionSummary(**fields)


# --- the extractive summarizer -------------------------------------------------------------


def todo_call(call_id: str, *todos: tuple[str, str]) -> ChatMessage:
    items = [{"content": content, "status": status} for content, status in todos]
    return assistant_message(None, [tool_call(call_id, "todo_write", json.dumps({"todos": items}))])


def session() -> list[ChatMessage]:
    return [
        user_message("Use only the standard library."),
        user_message("Refactor the parser\nand keep the API."),
        assistant_message(
            None,
            [
                tool_call("r1", "read_file", '{"path": "src/parser.py"}'),
                tool_call("g1", "grep", '{"pattern": "def parse"}'),
            ],
        ),
        tool_message("\n\nimport re\nclass Parser: ...", "r1"),
        tool_message("src/parser.py:10:def parse(text):", "g1"),
        todo_call("t1", ("read the parser", "completed"), ("split tokenize()", "pending")),
        tool_message("plan updated", "t1"),
        assistant_message(None, [tool_call("e1", "edit_file", '{"path": "src/lexer.py"}')]),
        tool_message("Error [no_match]: old text not found", "e1"),
    ]


def test_extractive_goal_is_the_latest_user_prompt_on_one_line() -> None:
    summary = ExtractiveSummarizer().summarize(session())

    assert summary.current_goal == "Refactor the parser and keep the API."


def test_extractive_files_come_from_file_tool_arguments() -> None:
    summary = ExtractiveSummarizer().summarize(session())

    assert summary.files_read_or_changed == ("src/parser.py", "src/lexer.py")


def test_extractive_findings_are_first_lines_of_the_latest_results() -> None:
    summary = ExtractiveSummarizer().summarize(session())

    assert summary.key_findings == (
        "read_file src/parser.py: import re",
        "grep def parse: src/parser.py:10:def parse(text):",
        "todo_write: plan updated",
        "edit_file src/lexer.py: Error [no_match]: old text not found",
    )


def test_extractive_findings_are_bounded_in_number_and_length() -> None:
    history: list[ChatMessage] = [user_message("go")]
    for number in range(20):
        history.append(assistant_message(None, [tool_call(f"c{number}", "bash", "{}")]))
        history.append(tool_message(f"{number} " + "x" * 500, f"c{number}"))

    findings = ExtractiveSummarizer().summarize(history).key_findings

    assert 0 < len(findings) <= 8
    assert findings[-1].startswith("bash: 19 ")
    assert all(len(finding) <= 200 for finding in findings)


def test_extractive_findings_skip_cleared_results_and_point_at_persisted_ones() -> None:
    history: list[ChatMessage] = [
        user_message("go"),
        assistant_message(None, [tool_call("c1", "bash", '{"command": "ls"}')]),
        tool_message(COMPACTED_TOOL_RESULT, "c1"),
        assistant_message(None, [tool_call("c2", "bash", '{"command": "cat big"}')]),
        tool_message(
            "<persisted-tool-result>\npath: .agent_tutorial/artifacts/tool-result-a.txt\n", "c2"
        ),
    ]

    findings = ExtractiveSummarizer().summarize(history).key_findings

    assert findings == ("bash cat big: full output in .agent_tutorial/artifacts/tool-result-a.txt",)


def test_extractive_remaining_work_is_the_latest_unfinished_todos() -> None:
    history: list[ChatMessage] = [
        *session(),
        todo_call(
            "t2", ("split tokenize()", "in_progress"), ("add tests", "pending"), ("x", "completed")
        ),
        tool_message("plan updated", "t2"),
    ]

    summary = ExtractiveSummarizer().summarize(history)

    assert summary.remaining_work == ("split tokenize()", "add tests")


def test_extractive_remaining_work_has_a_generic_item_without_a_plan() -> None:
    summary = ExtractiveSummarizer().summarize([user_message("go")])

    assert summary.remaining_work == ("Continue from the latest user request.",)


def test_extractive_constraints_are_the_earlier_user_messages_bounded() -> None:
    history = [user_message(f"rule {number}: " + "y" * 300) for number in range(10)]

    constraints = ExtractiveSummarizer().summarize(history).user_constraints

    assert 0 < len(constraints) <= 8
    assert constraints[-1].startswith("rule 8: ")
    assert all(len(item) <= 200 for item in constraints)


def test_extractive_summary_takes_a_focus_as_a_constraint_not_as_the_goal() -> None:
    history = [*session(), user_message("Focus the summary on: the lexer")]

    summary = ExtractiveSummarizer().summarize(history)

    assert summary.current_goal == "Refactor the parser and keep the API."
    assert "Focus the summary on: the lexer" in summary.user_constraints


def test_extractive_summary_carries_an_earlier_summary_forward() -> None:
    history: list[ChatMessage] = [
        summary_message(SUMMARY, ".agent_tutorial/artifacts/transcript-t1.jsonl"),
        assistant_message(None, [tool_call("c1", "read_file", '{"path": "README.md"}')]),
        tool_message("# Title", "c1"),
    ]

    summary = ExtractiveSummarizer().summarize(history)

    assert summary.current_goal == SUMMARY.current_goal
    assert summary.files_read_or_changed == ("core/loop.py", "README.md")
    assert summary.key_findings == (*SUMMARY.key_findings, "read_file README.md: # Title")
    assert summary.remaining_work == SUMMARY.remaining_work
    assert summary.user_constraints == SUMMARY.user_constraints


@pytest.mark.parametrize(
    "arguments", ["not json", "[1, 2]", '{"todos": "none"}', '{"todos": [3, {"status": "x"}]}']
)
def test_extractive_summary_never_fails_on_odd_arguments(arguments: str) -> None:
    history: list[ChatMessage] = [
        assistant_message(None, [tool_call("c1", "todo_write", arguments)]),
        tool_message("", "c1"),
        assistant_message("   "),
    ]

    summary = ExtractiveSummarizer().summarize(history)

    assert summary.current_goal
    assert summary.remaining_work == ("Continue from the latest user request.",)
    assert summary.key_findings == ()


def test_model_summary_request_ends_with_an_instruction_the_extractive_one_ignores() -> None:
    model = ScriptedModel([text_reply(json.dumps(VALID))])
    ModelHistorySummarizer(model).summarize(HISTORY)
    request = model.requests[0]

    summary = ExtractiveSummarizer().summarize(request.messages[1:])

    assert request.messages[-1].role == "user"
    assert summary.current_goal == "Give me a tour"


# --- the summary request's size ----------------------------------------------------------------


def test_summary_request_bytes_are_the_bytes_the_model_summarizer_sends() -> None:
    model = ScriptedModel([text_reply(json.dumps(VALID))])

    ModelHistorySummarizer(model).summarize(HISTORY)

    assert summary_request_bytes(HISTORY) == history_utf8_bytes(model.requests[0].messages)


def test_the_bench_bills_a_summary_at_the_size_the_manager_counts() -> None:
    summarizer = RecordingSummarizer()

    summarizer.summarize(HISTORY)

    assert summarizer.request_bytes == [summary_request_bytes(HISTORY)]


def groups_of_100_bytes(count: int) -> list[ChatMessage]:
    return [user_message("u" * (100 - len('{"content":"","role":"user"}\n')))] * count


def test_history_to_summarize_without_a_budget_is_the_whole_history() -> None:
    history = groups_of_100_bytes(50)

    assert history_to_summarize(history, None) == tuple(history)


@pytest.mark.parametrize(("room", "kept"), [(1_000, 10), (999, 9), (900, 9), (899, 8), (100, 1)])
def test_history_to_summarize_drops_the_oldest_groups_until_the_request_fits(
    room: int, kept: int
) -> None:
    history = [user_message("first"), *groups_of_100_bytes(10)]
    budget = summary_request_bytes(()) + room

    chosen = history_to_summarize(history, budget)

    assert chosen == tuple(history[-kept:])
    assert summary_request_bytes(chosen) <= budget


def test_history_to_summarize_keeps_the_latest_group_even_when_it_alone_is_too_large() -> None:
    history = groups_of_100_bytes(3)

    assert history_to_summarize(history, 10) == tuple(history[-1:])


# --- the extractive summary's limits ---------------------------------------------------------


def bash_results(count: int, text: str = "") -> list[ChatMessage]:
    history: list[ChatMessage] = [user_message("go")]
    for number in range(count):
        history.append(assistant_message(None, [tool_call(f"c{number}", "bash", "{}")]))
        history.append(tool_message(f"{number}{text}", f"c{number}"))
    return history


def test_extractive_findings_are_the_latest_six_or_as_many_as_set() -> None:
    history = bash_results(20)

    assert ExtractiveSummarizer().summarize(history).key_findings == tuple(
        f"bash: {number}" for number in range(14, 20)
    )
    limited = ExtractiveSummarizer(CompactionSettings(extractive_max_findings=2))
    assert limited.summarize(history).key_findings == ("bash: 18", "bash: 19")


@pytest.mark.parametrize(("length", "clipped"), [(200, False), (201, True)])
def test_an_extractive_item_is_cut_at_two_hundred_characters(length: int, clipped: bool) -> None:
    text = "x" * (length - len("bash: 0"))

    (finding,) = ExtractiveSummarizer().summarize(bash_results(1, text)).key_findings

    assert len(finding) == 200
    assert finding.endswith("…") == clipped


@pytest.mark.parametrize(("length", "clipped"), [(1_000, False), (1_001, True)])
def test_the_extractive_goal_is_cut_at_a_thousand_characters(length: int, clipped: bool) -> None:
    goal = ExtractiveSummarizer().summarize([user_message("g" * length)]).current_goal

    assert len(goal) == 1_000
    assert goal.endswith("…") == clipped


def test_configured_extractive_lengths_apply() -> None:
    summarizer = ExtractiveSummarizer(
        CompactionSettings(extractive_goal_chars=5, extractive_item_chars=8)
    )

    assert summarizer.summarize(bash_results(1, "x" * 50)).key_findings == ("bash: 0…",)
    assert summarizer.summarize([user_message("goals")]).current_goal == "goals"
    assert summarizer.summarize([user_message("goal!!")]).current_goal == "goal…"


def file_reads(count: int) -> list[ChatMessage]:
    history: list[ChatMessage] = [user_message("go")]
    for number in range(count):
        call = tool_call(f"r{number}", "read_file", f'{{"path": "f{number}.py"}}')
        history += [assistant_message(None, [call]), tool_message("text", f"r{number}")]
    return history


def test_extractive_files_are_the_latest_twenty_or_as_many_as_set() -> None:
    files = ExtractiveSummarizer().summarize(file_reads(25)).files_read_or_changed

    assert files == tuple(f"f{number}.py" for number in range(5, 25))
    limited = ExtractiveSummarizer(CompactionSettings(extractive_max_files=1))
    assert limited.summarize(file_reads(3)).files_read_or_changed == ("f2.py",)


def test_extractive_remaining_work_is_the_first_ten_open_todos_or_as_many_as_set() -> None:
    steps = [(f"step {number}", "pending") for number in range(12)]
    history = [user_message("go"), todo_call("t1", *steps), tool_message("ok", "t1")]

    remaining = ExtractiveSummarizer().summarize(history).remaining_work

    assert remaining == tuple(f"step {number}" for number in range(10))
    limited = ExtractiveSummarizer(CompactionSettings(extractive_max_remaining=1))
    assert limited.summarize(history).remaining_work == ("step 0",)


def test_extractive_constraints_are_the_latest_six_earlier_requests_or_as_many_as_set() -> None:
    history = [user_message(f"rule {number}") for number in range(10)]

    constraints = ExtractiveSummarizer().summarize(history).user_constraints

    assert constraints == tuple(f"rule {number}" for number in range(3, 9))
    limited = ExtractiveSummarizer(CompactionSettings(extractive_max_constraints=1))
    assert limited.summarize(history).user_constraints == ("rule 8",)
