"""The REPL driven through prompt-toolkit's pipe input, against the loopback server with
the real openai SDK: turns, slash commands, leaving, and the bottom toolbar."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent_tutorial.adapters.checkpoint_store import CheckpointStore
from agent_tutorial.conversation import Conversation
from agent_tutorial.core.messages import ChatMessage, assistant_message, user_message
from agent_tutorial.features.compaction import history_utf8_bytes
from agent_tutorial.features.sessions import find_session, list_sessions, load_session
from agent_tutorial.pastes import (
    COLLAPSE_CHARS,
    COLLAPSE_LINES,
    CollapsedPastes,
    SentPromptHistory,
)
from agent_tutorial.render import TerminalRenderer, format_bytes
from agent_tutorial.repl import (
    SLASH_COMMANDS,
    Repl,
    RunningHistorySize,
    SlashCompleter,
    ToolbarPart,
    fit_toolbar,
)
from agent_tutorial.run_summary import RunSummary
from tests.conftest import LOOPBACK_MODEL, open_loopback_conversation, write_state
from tests.contracts import wire_summary
from tests.loopback import (
    LoopbackServer,
    Reply,
    conversation,
    error_reply,
    exchanged,
    text_stream,
    tool_stream,
)

ENTER, ALT_ENTER, CTRL_C, CTRL_D = "\r", "\x1b\r", "\x03", "\x04"


@dataclass
class ReplHarness:
    repl: Repl
    conversation: Conversation
    keys: PipeInput
    stdout: io.StringIO
    stderr: io.StringIO

    def drive(self, *lines: str, then: str = "/exit" + ENTER) -> int:
        """Type each line followed by Enter, then `then`, and run the REPL until it ends;
        the exit code it ends with."""
        self.keys.send_text("".join(line + ENTER for line in lines) + then)
        return self.repl.loop()

    def err_text(self) -> str:
        return self.stderr.getvalue()


MakeRepl = Callable[..., ReplHarness]


@pytest.fixture
def make_repl(workspace: Path, loopback: LoopbackServer) -> Iterator[MakeRepl]:
    with ExitStack() as cleanup:

        def make(chapter: int = 8, start: Path | None = None) -> ReplHarness:
            """A REPL at `chapter`, started in `start` below the workspace if given."""
            stdout, stderr = io.StringIO(), io.StringIO()
            summary = RunSummary()
            renderer = TerminalRenderer(
                Console(file=stdout, width=100),
                Console(file=stderr, width=100),
                stream_answer=True,
                markdown=True,
            )
            opened = open_loopback_conversation(
                cleanup,
                start or workspace,
                loopback,
                chapter,
                [summary, renderer],
                project_root=None if start is None else workspace,
            )
            keys = cleanup.enter_context(create_pipe_input())
            repl = Repl(
                opened,
                summary,
                renderer,
                model_name=LOOPBACK_MODEL,
                input=keys,
                output=DummyOutput(),
            )
            return ReplHarness(repl, opened, keys, stdout, stderr)

        yield make


def user_contents(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in exchanged(body) if m["role"] == "user"]


def toolbar_text(repl: Repl) -> str:
    return "".join(fragment[1] for fragment in repl.toolbar())


def test_second_turn_request_carries_the_first_turn(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("first answer"), text_stream("second answer"))
    harness = make_repl()

    harness.drive("first question", "second question")

    assert len(loopback.requests) == 2
    assert exchanged(loopback.requests[1]) == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]


def test_answers_are_rendered_as_markdown(make_repl: MakeRepl, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("# Plan\n\nShip **chapter two** today.\n", pieces=5))
    harness = make_repl()

    harness.drive("plan?")

    shown = harness.stdout.getvalue()
    assert "Ship chapter two today." in shown
    assert "**" not in shown
    assert "# Plan" not in shown
    assert "Plan" in shown


def test_answers_of_two_turns_stay_on_separate_lines(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("alpha"), text_stream("beta"))
    harness = make_repl()

    harness.drive("one", "two")

    lines = [line.strip() for line in harness.stdout.getvalue().splitlines()]
    assert "alpha" in lines
    assert "beta" in lines


def test_context_shows_canonical_and_next_request_sizes_and_usage(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("an answer", usage=(1234, 56)))
    harness = make_repl()

    harness.drive("a question", "/context")

    shown = harness.stdout.getvalue()
    canonical = history_utf8_bytes([user_message("a question"), assistant_message("an answer")])
    assert re.search(rf"canonical history\s+2 messages, {format_bytes(canonical)}", shown)
    assert re.search(rf"next request\s+{format_bytes(canonical)} of history", shown)
    assert re.search(r"summary threshold\s+48\.8 KB \(0% used\)", shown)
    assert re.search(r"compaction\s+nothing compacted yet", shown)
    assert re.search(r"artifacts\s+0 file\(s\), 0 B", shown)
    assert re.search(r"checkpoints\s+0 B stored \(agent-tutorial undo\)", shown)
    assert re.search(r"last usage\s+1,234 prompt \+ 56 completion tokens", shown)


def test_context_shows_the_checkpoint_stores_size(make_repl: MakeRepl, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x" * 5000)
    store = CheckpointStore.in_state_folder(workspace, max_file_bytes=10_000)
    store.snapshot(workspace)
    harness = make_repl()

    harness.drive("/context")

    assert store.size_bytes() > 0
    stored = re.escape(format_bytes(store.size_bytes()))
    assert re.search(rf"checkpoints\s+{stored} stored", harness.stdout.getvalue())


def test_context_names_the_workspace_and_the_project_root_above_it(
    make_repl: MakeRepl, workspace: Path
) -> None:
    (workspace / "src").mkdir()
    harness = make_repl(start=workspace / "src")

    harness.drive("/context")

    # A long temporary path folds onto a second row of the table: compare without spaces.
    shown = "".join(harness.stdout.getvalue().split())
    assert f"workspace{workspace / 'src'}projectroot{workspace}" in shown


def test_context_says_the_project_root_is_the_workspace_when_it_is(make_repl: MakeRepl) -> None:
    harness = make_repl()

    harness.drive("/context")

    assert re.search(r"project root\s+the workspace *\n", harness.stdout.getvalue())


def test_context_shows_the_project_instructions_in_the_system_prompt(
    make_repl: MakeRepl, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text("Run make check before finishing.\n")
    harness = make_repl(chapter=7)

    harness.drive("/context")

    assert re.search(
        r"project instructions\s+AGENTS\.md, 33 B \(always sent to the model\)",
        harness.stdout.getvalue(),
    )


def test_context_says_unknown_for_tokens_no_call_reported(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    chunks = text_stream("an answer").sse_events
    assert chunks is not None
    loopback.queue(Reply(sse_events=chunks[:-1]))  # no usage chunk, as some servers send
    harness = make_repl()

    harness.drive("a question", "/context")

    assert re.search(
        r"tokens so far\s+unknown prompt \+ unknown completion", harness.stdout.getvalue()
    )


def test_context_before_any_turn_reports_an_empty_history(make_repl: MakeRepl) -> None:
    harness = make_repl(chapter=2)

    harness.drive("/context")

    shown = harness.stdout.getvalue()
    assert re.search(r"canonical history\s+0 messages, 0 B", shown)
    assert re.search(r"last usage\s+none reported yet", shown)
    assert "summary threshold" not in shown


def test_help_lists_every_command(make_repl: MakeRepl) -> None:
    harness = make_repl()

    harness.drive("/help")

    shown = harness.stdout.getvalue()
    for command in SLASH_COMMANDS:
        assert re.search(rf"{re.escape(command.usage)}\s+{re.escape(command.help)}", shown)


def test_unknown_command_says_so_and_sends_nothing(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    harness = make_repl()

    harness.drive("/frobnicate now")

    assert "unknown command /frobnicate; try /help" in harness.stderr.getvalue()
    assert loopback.requests == []


def test_clear_starts_a_new_empty_session(make_repl: MakeRepl, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("old answer"), text_stream("new answer"))
    harness = make_repl()
    first_id = harness.conversation.session_id

    harness.drive("old question", "/clear", "new question")

    second_id = harness.conversation.session_id
    assert second_id != first_id
    assert f"new session {second_id}" in harness.stderr.getvalue()
    assert exchanged(loopback.requests[1]) == [{"role": "user", "content": "new question"}]
    saved = list_sessions(harness.conversation.setup.project.root)
    turns = {info.session_id: load_session(info.path, repair=False).turns for info in saved}
    assert turns == {first_id: 1, second_id: 1}


def test_clear_leaves_no_empty_session_files(make_repl: MakeRepl) -> None:
    harness = make_repl()
    workspace = harness.conversation.setup.project.root

    harness.drive("/clear", "/clear", "/clear")
    assert [info.session_id for info in list_sessions(workspace)] == [
        harness.conversation.session_id
    ]
    harness.conversation.close()  # leaving the REPL before a prompt

    assert list_sessions(workspace) == []


def test_clear_forgets_the_previous_usage(make_repl: MakeRepl, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("answer", usage=(777, 7)))
    harness = make_repl()

    harness.drive("question", "/clear", "/context")

    shown = harness.stdout.getvalue()
    assert re.search(r"canonical history\s+0 messages", shown)
    assert re.search(r"last usage\s+none reported yet", shown)


def test_exit_leaves_before_later_input_is_sent(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    harness = make_repl()

    harness.drive("/exit", then="never sent" + ENTER)

    assert loopback.requests == []


def test_ctrl_d_leaves(make_repl: MakeRepl, loopback: LoopbackServer) -> None:
    harness = make_repl()

    exit_code = harness.drive(then=CTRL_D + "never sent" + ENTER)

    assert exit_code == 0
    assert loopback.requests == []


def test_ctrl_c_twice_at_an_empty_prompt_leaves_as_interrupted(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    harness = make_repl()

    exit_code = harness.drive(then=CTRL_C + CTRL_C + "never sent" + ENTER)

    assert exit_code == 130
    assert "press Ctrl-C again" in harness.stderr.getvalue()
    assert loopback.requests == []


def test_ctrl_c_then_a_prompt_then_ctrl_c_does_not_leave(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl()

    exit_code = harness.drive(then=CTRL_C + "hello" + ENTER + CTRL_C + "/exit" + ENTER)

    assert exit_code == 0
    assert [user_contents(body) for body in loopback.requests] == [["hello"]]


def test_ctrl_c_on_a_draft_discards_only_the_draft(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl()

    harness.drive(then="half a thought" + CTRL_C + "the real question" + ENTER + "/exit" + ENTER)

    assert [user_contents(body) for body in loopback.requests] == [["the real question"]]
    assert "press Ctrl-C again" not in harness.stderr.getvalue()


def test_alt_enter_inserts_a_newline_instead_of_sending(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl()

    harness.drive("first line" + ALT_ENTER + "second line")

    assert user_contents(loopback.requests[0]) == ["first line\nsecond line"]


def test_session_file_holds_both_turns(make_repl: MakeRepl, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("answer one"), text_stream("answer two"))
    harness = make_repl()

    harness.drive("question one", "question two")

    [info] = list_sessions(harness.conversation.setup.project.root)
    assert info.session_id == harness.conversation.session_id
    assert load_session(info.path, repair=False).turns == 2
    history = load_session(info.path, repair=False).history
    assert history == (
        user_message("question one"),
        assistant_message("answer one"),
        user_message("question two"),
        assistant_message("answer two"),
    )


def test_prompts_are_remembered_in_the_workspace_history_file(
    make_repl: MakeRepl, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl()

    harness.drive("remember this prompt")

    assert "+remember this prompt" in (workspace / ".agent_tutorial" / "history").read_text()


def test_toolbar_at_chapter_8_shows_chapter_session_and_percentage(make_repl: MakeRepl) -> None:
    harness = make_repl(chapter=8)

    text = toolbar_text(harness.repl)

    # At 80 columns the modes take the model's place (the greeting names it).
    session_id = harness.conversation.session_id
    assert text == f" ch8 · ask · sandbox off · {session_id} · 0 B ≈0 tok · 0% of summary"


def test_with_a_known_window_context_and_toolbar_show_the_share_of_it(
    make_repl: MakeRepl, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_CONTEXT_WINDOW", "8000")
    answer = text_stream("an answer", usage=(2_000, 5))
    assert answer.sse_events is not None
    answer.sse_events[-1]["usage"]["prompt_tokens_details"] = {"cached_tokens": 1_024}
    loopback.queue(answer)
    harness = make_repl(chapter=8)

    harness.drive("a question", "/context")

    shown = harness.stdout.getvalue()
    assert re.search(r"context window\s+8,000 tokens, 2,000 kept for the reply", shown)
    assert re.search(
        r"last usage\s+2,000 prompt \+ 5 completion tokens, 25% of the window, 1,024 cached", shown
    )
    assert re.search(r"≈\d+ tok, \d+% of window", toolbar_text(harness.repl))


def test_toolbar_before_chapter_8_has_no_threshold(make_repl: MakeRepl) -> None:
    harness = make_repl(chapter=2)

    text = toolbar_text(harness.repl)

    assert " ch2 · " in text
    assert "%" not in text


SUMMARY = {
    "current_goal": "ship the REPL",
    "key_findings": ["the REPL works"],
    "files_read_or_changed": [],
    "remaining_work": ["write docs"],
    "user_constraints": [],
}


def test_compact_summarises_with_the_focus_and_the_next_request_starts_from_it(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(
        text_stream("earlier answer"), text_stream(json.dumps(SUMMARY)), text_stream("ok")
    )
    harness = make_repl(chapter=8)

    harness.drive("earlier question", "/compact the docs", "next question")

    summary_request = loopback.requests[1]
    assert summary_request["messages"][-2]["content"].endswith("the docs")
    assert "transcript .agent_tutorial/artifacts/transcript-" in " ".join(
        harness.err_text().split()
    )
    assert conversation(loopback.requests[2]) == [{"role": "user", "content": "next question"}]
    assert wire_summary(loopback.requests[2])["current_goal"] == "ship the REPL"
    # At 80 columns the modes leave the counts no room; they are what the toolbar counts.
    assert harness.repl.summary.compaction["summary"]["events"] == 1


def test_context_lists_each_compaction_layer_that_acted(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("earlier answer"), text_stream(json.dumps(SUMMARY)))
    harness = make_repl(chapter=8)

    harness.drive("earlier question", "/compact", "/context")

    shown = harness.stdout.getvalue()
    assert re.search(r"^\s+summary\s+1 summary in 1 step, [\d.]+ K?B saved", shown, re.MULTILINE)
    assert "nothing compacted yet" not in shown
    assert re.search(r"artifacts\s+1 file\(s\), [\d.]+ K?B", shown)


def test_a_resumed_session_starts_from_its_summary_instead_of_summarising_again(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(
        text_stream("earlier answer"), text_stream(json.dumps(SUMMARY)), text_stream("ok")
    )
    harness = make_repl(chapter=8)
    summarised_id = harness.conversation.session_id

    harness.drive("earlier question", "/compact", "/clear", f"/resume {summarised_id}", "next")

    assert len(loopback.requests) == 3
    assert wire_summary(loopback.requests[2])["current_goal"] == "ship the REPL"
    assert conversation(loopback.requests[2]) == [{"role": "user", "content": "next"}]


def test_compact_before_chapter_8_explains_and_sends_nothing(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)

    harness.drive("hello", "/compact")

    assert "compaction arrives in chapter 8" in harness.stderr.getvalue()
    assert len(loopback.requests) == 1


def test_resume_command_continues_a_saved_session(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("saved answer"), text_stream("resumed answer"))
    earlier = make_repl()
    earlier.drive("saved question")
    earlier.conversation.close()
    saved_id = earlier.conversation.session_id
    harness = make_repl()

    harness.drive("/sessions", f"/resume {saved_id[:4]}", "follow-up")

    assert saved_id in harness.stdout.getvalue()
    assert f"resumed {saved_id}: 2 messages" in harness.stderr.getvalue()
    assert user_contents(loopback.requests[1]) == ["saved question", "follow-up"]
    assert harness.conversation.session_id == saved_id


def test_model_error_is_one_line_and_the_repl_goes_on(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(
        error_reply(401, {"error": {"message": "bad key"}}), text_stream("second try works")
    )
    harness = make_repl()

    harness.drive("first", "second")

    errors = [line for line in harness.stderr.getvalue().splitlines() if "error:" in line]
    assert len(errors) == 1
    assert "Traceback" not in harness.stderr.getvalue()
    assert "second try works" in harness.stdout.getvalue()


def test_after_a_failed_request_the_prompt_stays_and_no_reply_is_made_up(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(error_reply(500, {"error": {"message": "upstream down"}}), text_stream("ok"))
    harness = make_repl(chapter=2)

    harness.drive("first", "second")

    # As in Claude Code: the unanswered prompt goes with the next one, and the model is
    # never shown a reply it did not give (strict servers get the two joined: chat_wire).
    assert exchanged(loopback.requests[-1]) == [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ]


def test_slash_completion_offers_the_matching_commands() -> None:
    completions = SlashCompleter().get_completions(Document("/c"), CompleteEvent())

    assert [completion.text for completion in completions] == ["/context", "/compact", "/clear"]


def test_todos_shows_the_status_marks_and_the_items_as_written(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    plan = {
        "todos": [
            {"content": "read [bold]notes[/bold]", "status": "completed"},
            {"content": "fix [/x] the parser", "status": "in_progress"},
            {"content": "write tests", "status": "pending"},
        ]
    }
    loopback.queue(tool_stream([("t1", "todo_write", plan)]), text_stream("Planned."))
    harness = make_repl(chapter=5)

    harness.drive("plan it", "/todos")

    lines = harness.stdout.getvalue().splitlines()
    assert "[x] read [bold]notes[/bold]" in lines
    assert "[~] fix [/x] the parser" in lines
    assert "[ ] write tests" in lines


def test_todos_shows_escape_sequences_in_an_item_as_text(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    plan = {"todos": [{"content": "tidy \x1b]0;pwned\x07\x1b[2J up", "status": "pending"}]}
    loopback.queue(tool_stream([("t1", "todo_write", plan)]), text_stream("Planned."))
    harness = make_repl(chapter=5)

    harness.drive("plan it", "/todos")

    shown = harness.stdout.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown
    assert r"[ ] tidy \x1b]0;pwned\x07\x1b[2J up" in shown.splitlines()


def test_unknown_command_is_echoed_as_typed_not_as_markup(make_repl: MakeRepl) -> None:
    harness = make_repl()

    harness.drive("/[red]oops[/]")

    assert "unknown command /[red]oops[/]; try /help" in harness.err_text()


def test_after_a_resume_context_and_toolbar_show_the_summarised_request(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(
        text_stream("earlier answer " * 200),
        text_stream(json.dumps(SUMMARY)),
        text_stream("ok"),
    )
    harness = make_repl(chapter=8)
    summarised_id = harness.conversation.session_id
    harness.drive("earlier question", "/compact", "/clear", f"/resume {summarised_id}")
    history = harness.conversation.agent.runner.history
    toolbar = toolbar_text(harness.repl)

    harness.drive("/context", "next")

    compaction = harness.conversation.agent.compaction
    assert compaction is not None
    sent = format_bytes(compaction.last_request_bytes - history_utf8_bytes([user_message("next")]))
    assert f" {sent} ≈" in toolbar
    assert re.search(rf"next request\s+{sent} of history", harness.stdout.getvalue())
    assert format_bytes(history_utf8_bytes(history)) != sent  # not the whole history


def test_toolbar_fits_80_columns_with_a_long_model_name_and_every_layer(
    make_repl: MakeRepl,
) -> None:
    harness = make_repl(chapter=8)
    harness.repl.model_name = "Qwen/Qwen2.5-Coder-32B-Instruct-AWQ-long-name"
    for layer in ("micro", "persist", "reactive", "snip", "summary"):
        harness.repl.summary.compaction[layer] = {"events": 12, "count": 40, "bytes_saved": 9_000}

    text = toolbar_text(harness.repl)

    session_id = harness.conversation.session_id
    # The modes come before the model's name, which the greeting shows.
    assert text == f" ch8 · ask · sandbox off · {session_id} · 0 B ≈0 tok · 0% of summary"


def test_a_narrow_toolbar_keeps_the_chapter_and_the_context_size() -> None:
    parts = [
        ToolbarPart("ch8", keep=9),
        ToolbarPart("some-model", keep=2),
        ToolbarPart("1a2b3c4d", keep=3),
        ToolbarPart("12.3 KB ≈3,150 tok", keep=8),
        ToolbarPart("25% of summary", keep=7),
        ToolbarPart("micro 3 snip 1", keep=1),
    ]

    text = "".join(fragment[1] for fragment in fit_toolbar(parts, 40))

    assert text == " ch8 · 1a2b3c4d · 12.3 KB ≈3,150 tok"


def test_a_part_dropped_early_comes_back_when_a_longer_one_left_room() -> None:
    parts = [
        ToolbarPart("ch8", keep=9),
        ToolbarPart("a-rather-long-model-name", keep=2),
        ToolbarPart("micro 3", keep=1),
    ]

    def shown(columns: int) -> str:
        return "".join(fragment[1] for fragment in fit_toolbar(parts, columns))

    assert shown(len(" ch8 · micro 3") + 1) == " ch8 · micro 3"
    assert shown(len(" ch8 · micro 3")) == " ch8"


def test_running_history_size_matches_the_whole_history_as_it_grows_and_is_replaced() -> None:
    size = RunningHistorySize()
    history: list[ChatMessage] = [user_message("one")]
    assert size.of(history) == history_utf8_bytes(history)
    history += [assistant_message("two " * 50), user_message("three")]
    assert size.of(history) == history_utf8_bytes(history)

    replaced = [user_message("another session")]

    assert size.of(replaced) == history_utf8_bytes(replaced)


def test_exit_prints_the_command_that_resumes_this_session(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=5)

    harness.drive("hello")

    session_id = harness.conversation.session_id
    last_line = harness.err_text().splitlines()[-1]
    assert last_line == f"resume with: agent-tutorial run -c 5 --resume {session_id}"


def test_the_farewell_repeats_the_command_it_was_given(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)
    harness.repl.resume_command = ".venv/bin/agent-tutorial run --model demo"

    harness.drive("hello")

    last_line = harness.err_text().splitlines()[-1]
    resume = (
        f".venv/bin/agent-tutorial run --model demo -c 2 --resume {harness.conversation.session_id}"
    )
    assert last_line == f"resume with: {resume}"


def test_ctrl_d_prints_the_command_that_resumes_this_session(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl()

    harness.drive("hello", then=CTRL_D)

    assert f"--resume {harness.conversation.session_id}" in harness.err_text().splitlines()[-1]


def test_leaving_before_any_turn_says_nothing_was_saved(make_repl: MakeRepl) -> None:
    harness = make_repl()

    harness.drive()

    assert harness.err_text().splitlines()[-1] == "nothing saved in this session"


PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
LARGE_PASTE = "log line with some detail\n" * 2_400  # 62,400 B, over the 50,000 B threshold


def test_a_paste_over_the_summary_threshold_is_not_sent_without_a_yes(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    harness = make_repl(chapter=8)

    harness.drive(then=PASTE_START + LARGE_PASTE + PASTE_END + ENTER + "n" + ENTER + "/exit\r")

    assert loopback.requests == []
    err = " ".join(harness.err_text().split())
    assert "warning: this message is 60.9 KB, over the 48.8 KB summary threshold;" in err
    assert "not sent" in err


def test_a_paste_over_the_summary_threshold_is_sent_after_a_yes(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("read it"))
    harness = make_repl(chapter=2)

    harness.drive(then=PASTE_START + LARGE_PASTE + PASTE_END + ENTER + "y" + ENTER + "/exit\r")

    assert "every request from now on carries it whole" in " ".join(harness.err_text().split())
    assert user_contents(loopback.requests[0]) == [LARGE_PASTE.strip()]


def test_compact_prints_one_line_and_no_totals_before_or_after_the_next_turn(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(
        text_stream("earlier answer"), text_stream(json.dumps(SUMMARY)), text_stream("ok")
    )
    harness = make_repl(chapter=8)

    harness.drive("earlier question", "/compact", "next question")

    shown = " ".join(harness.err_text().split())  # the line wraps at the console's width
    assert shown.count("transcript") == 2  # the word and the file name, once
    assert re.search(r"compaction · loopback-model Enter sends.*Ctrl-D leaves. ⚙ summary: ", shown)
    assert re.search(r" → [\d,]+ B, transcript \S+/transcript-\w+\.jsonl resume with: ", shown)
    assert "compaction this run" not in shown  # neither after /compact nor after the turn


def test_a_window_too_small_for_the_system_prompt_shows_a_full_context_not_a_crash(
    make_repl: MakeRepl, workspace: Path
) -> None:
    write_state(workspace, "config.toml", "context_window_tokens = 2000\n")
    harness = make_repl(chapter=8)
    compaction = harness.conversation.agent.compaction
    assert compaction is not None and compaction.summary_threshold_bytes == 0

    harness.drive("/context")

    assert "100% of summary" in toolbar_text(harness.repl)
    assert "(100% used)" in harness.stdout.getvalue()


def test_with_a_small_window_a_smaller_paste_gets_the_warning(
    make_repl: MakeRepl, loopback: LoopbackServer, workspace: Path
) -> None:
    write_state(workspace, "config.toml", "context_window_tokens = 6000\n")
    harness = make_repl(chapter=8)
    compaction = harness.conversation.agent.compaction
    assert compaction is not None
    threshold = compaction.summary_threshold_bytes
    assert threshold < 20_000  # the window's budget, not the 50,000 B default
    paste = "x" * (threshold + 1)

    harness.drive(then=PASTE_START + paste + PASTE_END + ENTER + "n" + ENTER + "/exit\r")

    assert loopback.requests == []
    assert f"over the {format_bytes(threshold)} summary threshold" in harness.err_text()


BACKSPACE, DELETE, LEFT, HOME = "\x7f", "\x1b[3~", "\x1b[D", "\x01"


def pasted(text: str) -> str:
    return PASTE_START + text + PASTE_END


def lines_of(count: int, word: str = "row") -> str:
    return "".join(f"{word} {n}\n" for n in range(count))


@pytest.mark.parametrize(
    ("paste", "placeholder"),
    [
        (lines_of(11), "[pasted 11 lines, 67 B]"),
        ("x" * (COLLAPSE_CHARS + 1), "[pasted 1 line, 1001 B]"),
        (lines_of(800, "line of a long log") + "tail", "[pasted 801 lines, 17.9 KB]"),
    ],
)
def test_a_paste_over_the_limits_shows_as_a_placeholder(paste: str, placeholder: str) -> None:
    assert CollapsedPastes().paste(paste) == placeholder


@pytest.mark.parametrize("paste", [lines_of(COLLAPSE_LINES), "x" * COLLAPSE_CHARS, "one\r\ntwo"])
def test_a_paste_within_the_limits_stays_in_the_editor_as_it_is(paste: str) -> None:
    assert CollapsedPastes().paste(paste) == paste.replace("\r\n", "\n")


def test_the_same_paste_twice_shares_a_placeholder_and_a_different_one_is_numbered() -> None:
    pastes = CollapsedPastes()
    first, again = pastes.paste(lines_of(11)), pastes.paste(lines_of(11))

    other = pastes.paste(lines_of(11, "cow"))

    assert first == again == "[pasted 11 lines, 67 B]"
    assert other == "[pasted 11 lines, 67 B #2]"
    assert pastes.send(f"{first} vs {other}") == f"{lines_of(11)} vs {lines_of(11, 'cow')}"


def test_a_collapsed_paste_is_sent_whole_with_the_text_around_it(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)
    paste = lines_of(800, "log line")

    harness.drive("summarise " + pasted(paste) + " please")

    assert user_contents(loopback.requests[0]) == [f"summarise {paste} please"]


def test_two_pastes_in_one_prompt_are_both_sent_in_place(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)
    before, after = lines_of(20, "old"), lines_of(20, "new")

    harness.drive("compare " + pasted(before) + " with " + pasted(after))

    assert user_contents(loopback.requests[0]) == [f"compare {before} with {after}".strip()]


def test_backspace_after_a_placeholder_removes_the_whole_paste(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)

    harness.drive("look " + pasted(lines_of(50)) + BACKSPACE + "again")

    assert user_contents(loopback.requests[0]) == ["look again"]


def test_delete_before_a_placeholder_removes_the_whole_paste(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)

    harness.drive(pasted(lines_of(50)) + " end" + HOME + DELETE)

    assert user_contents(loopback.requests[0]) == ["end"]


def test_a_placeholder_typed_into_is_sent_as_typed(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)

    harness.drive(pasted(lines_of(50)) + LEFT + "!")

    assert user_contents(loopback.requests[0]) == ["[pasted 50 lines, 340 B!]"]


def test_ctrl_c_on_a_collapsed_paste_discards_it_and_the_repl_stays(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)

    harness.drive(then=pasted(lines_of(50)) + CTRL_C + "next" + ENTER + "/exit" + ENTER)

    assert user_contents(loopback.requests[0]) == ["next"]
    assert "press Ctrl-C again" not in harness.err_text()


def test_history_remembers_a_paste_collapsed_and_stores_it_whole(tmp_path: Path) -> None:
    pastes = CollapsedPastes()
    placeholder = pastes.paste(lines_of(30))
    prompt = f"see {placeholder}"
    history = SentPromptHistory(FileHistory(str(tmp_path / "history")), pastes.expand)

    history.append_string(prompt)
    sent = pastes.send(prompt)

    assert history.get_strings() == [prompt]  # what Up brings back this session
    assert sent == f"see {lines_of(30)}"
    assert list(FileHistory(str(tmp_path / "history")).load_history_strings()) == [sent]


DOWN = "\x1b[B"


def saved_session(
    make_repl: MakeRepl, loopback: LoopbackServer, prompt: str, *replies: Reply
) -> str:
    """A session with one turn, closed; its id."""
    loopback.queue(*replies)
    earlier = make_repl(chapter=2)
    earlier.drive(prompt)
    earlier.conversation.close()
    return earlier.conversation.session_id


def test_resume_without_an_id_picks_from_the_recent_sessions(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    older = saved_session(make_repl, loopback, "older question", text_stream("older answer"))
    newer = saved_session(make_repl, loopback, "newer question", text_stream("newer answer"))
    loopback.queue(text_stream("ok"))
    harness = make_repl(chapter=2)

    harness.drive("/resume" + ENTER + DOWN, "follow-up")  # the second: the older one

    assert harness.conversation.session_id == older != newer
    assert f"resumed {older}: 2 messages" in harness.err_text()
    assert user_contents(loopback.requests[-1]) == ["older question", "follow-up"]


def test_the_picker_offers_only_other_sessions_that_can_be_resumed(make_repl: MakeRepl) -> None:
    harness = make_repl(chapter=2)

    harness.drive("/resume")  # only this session, which has no prompt yet

    assert "no other saved session to resume" in harness.err_text()


def test_ctrl_c_in_the_picker_resumes_nothing_and_the_repl_goes_on(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    saved_session(make_repl, loopback, "old question", text_stream("old answer"))
    loopback.queue(text_stream("fresh answer"))
    harness = make_repl(chapter=2)
    current = harness.conversation.session_id

    harness.drive("/resume" + ENTER + CTRL_C, "fresh question")

    assert "not resumed" in harness.err_text()
    assert harness.conversation.session_id == current
    assert user_contents(loopback.requests[-1]) == ["fresh question"]


def test_a_resumed_repl_shows_the_last_turns_before_its_prompt(
    make_repl: MakeRepl, loopback: LoopbackServer
) -> None:
    read = tool_stream([("c1", "read_file", {"path": "nowhere.txt"})])
    answer = text_stream("\n".join(f"- item {n} of the answer" for n in range(1, 11)))
    prompt = "read the notes" + ALT_ENTER + "all of them"
    saved_id = saved_session(make_repl, loopback, prompt, read, answer)
    harness = make_repl(chapter=2)
    harness.conversation.resume(find_session(harness.conversation.setup.project.root, saved_id))

    harness.drive()

    shown = harness.stdout.getvalue().splitlines()
    assert shown[:3] == [
        "earlier in this session:",
        "› read the notes (+1 line)",
        "• 1 tool call (1 failed): read_file",
    ]
    items = [line for line in shown if "item" in line]
    assert items == [f" • item {n} of the answer" for n in range(1, 7)]  # Markdown, trimmed
    assert shown[shown.index(items[-1]) + 1] == "… 4 more lines"


def test_context_says_which_summary_threshold_applies_and_what_every_request_carries(
    make_repl: MakeRepl,
) -> None:
    harness = make_repl()

    harness.drive("/context")

    shown = " ".join(harness.stdout.getvalue().split())
    assert "applies seed, 50,000 B; raise it with [compaction] proactive_threshold_bytes" in shown
    fixed = re.search(
        r"fixed part (\d+\.\d) KB, ≈([\d,]+) tok, per request \(system prompt, tool schemas,",
        shown,
    )
    assert fixed is not None
    assert float(fixed.group(1)) > 6_000 / 1024  # the full form, no window known
    kb, tokens = float(fixed.group(1)), int(fixed.group(2).replace(",", ""))
    assert abs(tokens - kb * 1024 / 3.5) < 20  # at the 3.5 B a token of no count yet


def test_context_in_a_small_window_shows_the_compact_fixed_part(
    make_repl: MakeRepl, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_CONTEXT_WINDOW", "8192")
    harness = make_repl()

    harness.drive("/context")

    shown = " ".join(harness.stdout.getvalue().split())
    fixed = re.search(r"fixed part (\d+\.\d) KB, ≈([\d,]+) tok, per request", shown)
    assert fixed is not None
    assert float(fixed.group(1)) <= 5.9  # at most 6,000 B, as 1,024-byte KB with one decimal
    assert int(fixed.group(2).replace(",", "")) <= 1_715  # 6,000 B at 3.5 B a token
