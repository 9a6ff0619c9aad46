"""Edge cases of chapter 8 compaction with durable sessions: the summary state survives
reactive recoveries, restarts and odd event values; the REPL keeps going when a command
fails or is interrupted."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent_tutorial.bootstrap import AgentDeps
from agent_tutorial.config import load_settings
from agent_tutorial.conversation import Conversation, ConversationSetup
from agent_tutorial.core.events import CompactionApplied, MessageAppended
from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    to_wire,
    tool_call,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import ModelClient, ModelRequest, PromptTooLongError
from agent_tutorial.features.compaction import history_utf8_bytes, summary_message
from agent_tutorial.features.sessions import (
    SessionLog,
    SessionMeta,
    list_sessions,
    load_session,
)
from agent_tutorial.profiles import profile_for_chapter
from agent_tutorial.project import Project
from agent_tutorial.render import TerminalRenderer
from agent_tutorial.repl import Repl
from agent_tutorial.run_summary import RunSummary
from agent_tutorial.testing import ScriptedModel, ScriptedReply, text_reply, tool_reply
from tests.conftest import TEST_API_KEY, cli_command, costly_property, run_process
from tests.event_log import EventLog
from tests.loopback import LoopbackServer, reminder_text, text_stream
from tests.strategies import MessageGroup, paired_message_groups
from tests.test_compaction_support import (
    BIG,
    SUMMARY,
    FakeSummarizer,
    Recorder,
    history_with,
    make_manager,
    tool_group,
)

TRANSCRIPT_2 = ".agent_tutorial/artifacts/transcript-id-2.jsonl"  # the reactive one
SUMMARY_JSON = json.dumps(
    {
        "current_goal": "read the three files",
        "key_findings": ["each file repeats one line"],
        "files_read_or_changed": ["f0.txt"],
        "remaining_work": ["report"],
        "user_constraints": [],
    }
)


# --- reactive recovery after a summary -----------------------------------------------------


def test_reactive_recovery_never_brings_back_what_the_summary_covered(workspace: Path) -> None:
    history = history_with(2, BIG)
    recorder = Recorder()
    manager = make_manager(workspace, recorder=recorder)
    manager.prepare(history)  # summarises: the request is the summary alone

    recovered = manager.recover_from_overflow(history)

    assert recovered == (summary_message(SUMMARY, TRANSCRIPT_2),)
    (event,) = recorder.applied("reactive")
    assert event.details["covered_messages"] == len(history)


def test_reactive_recovery_after_a_summary_keeps_the_last_groups_appended_since(
    workspace: Path,
) -> None:
    history = history_with(2, BIG)
    manager = make_manager(workspace)
    manager.prepare(history)
    history.extend(message for number in range(7) for message in tool_group(50 + number))

    recovered = manager.recover_from_overflow(history)

    assert recovered[1:] == tuple(history[-10:])  # the last five tool groups


@st.composite
def growing_histories(draw: st.DrawFn) -> tuple[list[MessageGroup], list[str]]:
    """Paired groups, and what happens after each one arrives."""
    groups = draw(paired_message_groups(min_tool_groups=draw(st.integers(0, 10)), max_groups=24))
    steps = st.sampled_from(["append", "prepare", "overflow", "compact"])
    return groups, draw(st.lists(steps, min_size=len(groups), max_size=len(groups)))


@costly_property
@given(case=growing_histories(), tail=st.integers(0, 6), threshold=st.sampled_from([300, 10**9]))
def test_summaries_only_ever_cover_more_and_a_restart_prepares_the_same_request(
    case: tuple[list[MessageGroup], list[str]], tail: int, threshold: int
) -> None:
    groups, steps = case
    with tempfile.TemporaryDirectory() as directory:
        recorder = Recorder()
        manager = make_manager(
            Path(directory),
            recorder=recorder,
            reactive_tail_groups=tail,
            proactive_threshold_bytes=threshold,
        )
        history: list[ChatMessage] = []
        for group, step in zip(groups, steps, strict=True):
            history.extend(group)
            if step == "prepare":
                manager.prepare(history)
            elif step == "overflow":
                try:
                    validate_tool_pairing(manager.recover_from_overflow(history))
                except ContextOverflowError as error:  # one group: nothing to leave out
                    assert "nothing can be removed" in str(error)
                    assert history == list(group)
            elif step == "compact":
                manager.compact_proactively(history)
        request = manager.prepare(history)

        summaries = [e for e in recorder.applied() if e.layer in ("summary", "reactive")]
        covered = [int(str(e.details["covered_messages"])) for e in summaries]
        never_asked = FakeSummarizer()
        restarted = make_manager(
            Path(directory), never_asked, id_prefix="restart", proactive_threshold_bytes=10**12
        )
        if summaries:
            content = str(summaries[-1].details["summary_content"])
            restarted.restore_summary(content, covered[-1])

        assert covered == sorted(covered)
        assert restarted.prepare(history) == request
        assert never_asked.calls == []


# --- a restored summary that does not fit ---------------------------------------------------


def test_restored_summary_beyond_the_history_is_not_applied_when_the_history_grows(
    workspace: Path,
) -> None:
    manager = make_manager(workspace)
    manager.restore_summary(summary_message(SUMMARY, "t").content, covered_messages=5)
    history: list[ChatMessage] = [user_message("a"), assistant_message("b"), user_message("c")]
    manager.prepare(history)
    history += [assistant_message("d"), user_message("e"), assistant_message("f")]

    assert manager.prepare(history) == tuple(history)


def test_restored_summary_that_fits_still_applies_after_the_history_grows(
    workspace: Path,
) -> None:
    manager = make_manager(workspace)
    content = summary_message(SUMMARY, "t").content
    manager.restore_summary(content, covered_messages=2)
    history: list[ChatMessage] = [user_message("a"), assistant_message("b"), user_message("c")]
    manager.prepare(history)
    history.append(assistant_message("d"))

    request = manager.prepare(history)

    assert [to_wire(message)["content"] for message in request] == [content, "c", "d"]


# --- the session log ------------------------------------------------------------------------


def new_log(workspace: Path) -> SessionLog:
    return SessionLog.create(workspace, SessionMeta.new(8, "test-model", None))


def test_compaction_event_with_values_json_cannot_hold_does_not_stop_the_log(
    workspace: Path,
) -> None:
    log = new_log(workspace)
    odd: dict[Any, object] = {
        "count": 2**70,
        ("a", "b"): "tuple key",
        "where": Path("x/y"),
        "ids": {7},
    }
    log.emit(MessageAppended(user_message("before")))
    log.emit(CompactionApplied("persist", "persisted 1 result", 1, 10, odd))
    log.emit(MessageAppended(assistant_message("after")))
    log.end_turn()
    log.close()

    assert log.failure is None
    assert [message.content for message in load_session(log.path).history] == ["before", "after"]
    lines = [json.loads(line) for line in log.path.read_bytes().splitlines()]
    assert lines[2]["details"] == {
        "count": str(2**70),
        "('a', 'b')": "tuple key",
        "where": "x/y",
        "ids": [7],
    }


# --- sessions through a conversation --------------------------------------------------------


def conversation_setup(
    workspace: Path, model: ModelClient, sinks: list[Any] | None = None
) -> ConversationSetup:
    flags = {"model": "m", "base_url": "http://127.0.0.1:9/v1", "permission_mode": "auto"}
    deps = AgentDeps(model, Project.at(workspace), load_settings(workspace, flags))
    return ConversationSetup(
        profile_for_chapter(8), deps, sinks=sinks if sinks is not None else [EventLog()]
    )


def read_reply(number: int) -> ScriptedReply:
    arguments = json.dumps({"path": f"f{number}.txt"})
    return tool_reply(tool_call(f"read-{number}", "read_file", arguments))


def test_reactive_summary_after_an_automatic_one_is_restored_on_resume(workspace: Path) -> None:
    for number in range(3):  # about 20 KB each once read: three exceed the summary threshold
        (workspace / f"f{number}.txt").write_text(f"line {number}\n" * 1_500)
    for number in (3, 4):
        (workspace / f"f{number}.txt").write_text(f"line {number}\n")
    # 30 KB of the model's notes after the automatic summary: only a summary removes them
    # (a retry after an overflow stating no count holds at most half the refused request).
    notes = "notes on the files so far. " * 1_100
    wordy = tool_reply(tool_call("read-3", "read_file", '{"path": "f3.txt"}'), content=notes)
    model = ScriptedModel(
        [
            read_reply(0),
            read_reply(1),
            read_reply(2),
            text_reply(SUMMARY_JSON),  # the automatic summary
            wordy,
            read_reply(4),
            PromptTooLongError("context window exceeded"),
            text_reply(SUMMARY_JSON),  # the reactive summary
            text_reply("done"),
        ]
    )
    conversation = Conversation.open(conversation_setup(workspace, model))
    conversation.run("read the three files")
    overflowed, retried = model.requests[6], model.requests[8]
    history = [*conversation.agent.runner.history, user_message("next")]
    assert conversation.agent.compaction is not None
    expected = conversation.agent.compaction.prepare(history)
    assert conversation.log is not None
    path = conversation.log.path
    conversation.close()

    resumed = Conversation.open(conversation_setup(workspace, ScriptedModel([])), resume=path)

    assert history_utf8_bytes(retried.messages) <= history_utf8_bytes(overflowed.messages)
    assert resumed.agent.compaction is not None
    assert resumed.agent.compaction.prepare(history) == expected


def contents_after_project_context(request: ModelRequest) -> list[str]:
    """The request's contents after the system prompt and the project context."""
    return [to_wire(m)["content"] for m in request.messages[2:]]


def test_compact_then_more_turns_then_continue_in_a_new_process_keeps_the_summary(
    workspace: Path, loopback: LoopbackServer
) -> None:
    model = ScriptedModel([text_reply("a1"), text_reply(SUMMARY_JSON), text_reply("a2")])
    conversation = Conversation.open(conversation_setup(workspace, model))
    conversation.run("q1")
    conversation.compact()
    conversation.run("q2")
    compaction = conversation.agent.compaction
    assert compaction is not None
    expected = compaction.prepare([*conversation.agent.runner.history, user_message("q3")])
    conversation.close()
    loopback.queue(text_stream("a3"))

    finished = run_in_new_process(workspace, loopback, "--continue", "--prompt", "q3")

    assert finished.returncode == 0, finished.stderr
    assert "summary:" not in finished.stderr  # nothing was summarised again
    # On the wire the restored summary is a reminder after the project context.
    _system, _project, summary_turn, *rest = loopback.requests[0]["messages"]
    summary, *after_summary = [to_wire(message)["content"] for message in expected]
    assert reminder_text(summary_turn) == summary
    assert [message["content"] for message in rest] == after_summary


def run_in_new_process(
    workspace: Path, loopback: LoopbackServer, *args: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "OPENAI_BASE_URL": loopback.base_url,
        "OPENAI_API_KEY": TEST_API_KEY,
        "AGENT_TUTORIAL_MODEL": "loopback-model",
    }
    command = cli_command("run", "--chapter", "8", *args)
    return run_process(command, workspace, environment, timeout_s=60)


# --- the REPL -------------------------------------------------------------------------------


@pytest.fixture
def make_repl(workspace: Path) -> Iterator[Callable[[list[ScriptedReply]], Repl]]:
    with create_pipe_input() as keys:
        opened: list[Conversation] = []

        def make(replies: list[ScriptedReply]) -> Repl:
            summary = RunSummary()
            stdout, stderr = io.StringIO(), io.StringIO()
            renderer = TerminalRenderer(
                Console(file=stdout, width=400),
                Console(file=stderr, width=400),
                stream_answer=False,
                markdown=False,
            )
            setup = conversation_setup(workspace, ScriptedModel(replies), [summary, renderer])
            conversation = Conversation.open(setup)
            opened.append(conversation)
            return Repl(
                conversation, summary, renderer, model_name="m", input=keys, output=DummyOutput()
            )

        yield make
        for conversation in opened:
            conversation.close()


def err_text(repl: Repl) -> str:
    file = repl.err.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def test_sessions_command_with_a_symlinked_sessions_directory_reports_and_goes_on(
    make_repl: Callable[[list[ScriptedReply]], Repl], workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / "sessions").symlink_to(elsewhere)
    repl = make_repl([])

    assert repl.handle("/sessions") is True
    assert "cannot list sessions" in err_text(repl)
    assert "is a symlink" in err_text(repl)


def interrupt(_request: ModelRequest) -> Any:
    raise KeyboardInterrupt


def test_ctrl_c_during_compact_returns_to_the_prompt_with_nothing_changed(
    make_repl: Callable[[list[ScriptedReply]], Repl],
) -> None:
    repl = make_repl([text_reply("a1"), interrupt, text_reply("a2")])
    repl.handle("q1")

    try:
        handled = repl.handle("/compact")
    except KeyboardInterrupt:  # would end the REPL (and this test run) instead
        pytest.fail("Ctrl-C during /compact escaped the REPL")
    repl.handle("q2")

    assert handled is True

    assert "compaction interrupted" in err_text(repl)
    model = repl.conversation.setup.deps.model
    assert isinstance(model, ScriptedModel)
    assert contents_after_project_context(model.requests[2]) == ["q1", "a1", "q2"]


def test_resume_of_the_current_session_keeps_the_conversation_and_its_file(
    make_repl: Callable[[list[ScriptedReply]], Repl],
) -> None:
    repl = make_repl([text_reply("a1"), text_reply("a2")])
    repl.handle("q1")
    log = repl.conversation.log
    assert log is not None

    repl.handle(f"/resume {repl.conversation.session_id}")
    repl.handle("q2")

    assert "already in session" in err_text(repl)
    assert repl.conversation.log is log
    repl.conversation.close()
    contents = [message.content for message in load_session(log.path).history]
    assert contents == ["q1", "a1", "q2", "a2"]


def test_clear_after_a_failed_log_write_records_the_new_session(
    make_repl: Callable[[list[ScriptedReply]], Repl], workspace: Path
) -> None:
    repl = make_repl([text_reply("a1"), text_reply("a2"), text_reply("a3")])
    repl.handle("q1")
    failed = repl.conversation.log
    assert failed is not None
    failed.close()  # the next write fails: the log stops and says so once
    repl.handle("q2")

    repl.handle("/clear")
    repl.handle("q3")

    assert err_text(repl).count("session log stopped") == 1
    fresh = repl.conversation.log
    assert fresh is not None and fresh.failure is None and fresh.path != failed.path
    repl.conversation.close()
    assert [m.content for m in load_session(failed.path).history] == ["q1", "a1"]
    assert [m.content for m in load_session(fresh.path).history] == ["q3", "a3"]
    assert {info.path for info in list_sessions(workspace)} == {failed.path, fresh.path}
