"""Durable sessions: the JSONL log, resuming after a crash, and finding sessions again."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_tutorial.core.events import (
    CompactionApplied,
    EventBus,
    MessageAppended,
    ModelReplied,
    Notice,
    PermissionDecided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStarted,
)
from agent_tutorial.core.loop import AgentRunner
from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import Usage
from agent_tutorial.core.tools import ToolRegistry, tool_success
from agent_tutorial.features.session_index import HEADER_BYTES
from agent_tutorial.features.sessions import (
    INTERRUPTED_RESULT,
    DamagedLine,
    SessionInUseError,
    SessionLoadError,
    SessionLog,
    SessionLogError,
    SessionLookupError,
    SessionMeta,
    SessionPathError,
    check_session,
    continue_candidates,
    endpoint_host,
    find_session,
    list_sessions,
    load_session,
    salvage_session,
    sessions_older_than,
)
from agent_tutorial.resuming import NothingToContinue, choose_session
from agent_tutorial.testing import ScriptedModel, text_reply

STARTED = datetime(2026, 11, 29, 22, 13, 37, tzinfo=UTC)

READ_A = tool_call("call_a", "read_file", '{"path": "a.py"}')
READ_B = tool_call("call_b", "read_file", '{"path": "b.py"}')
GREP = tool_call("call_c", "grep", '{"pattern": "TODO"}')

HISTORY: tuple[ChatMessage, ...] = (
    user_message("Read a.py and b.py"),
    assistant_message("Reading both.", [READ_A, READ_B]),
    tool_message("print('a')\n", "call_a"),
    tool_message("print('b')\n", "call_b"),
    assistant_message("Both print a letter."),
    user_message("Any TODOs?"),
    assistant_message(None, [GREP]),
    tool_message("Error [no_match]: nothing matched", "call_c"),
    assistant_message("None: ünïcödé ✓"),
)


def continued_session(workspace: Path) -> Path:
    """The session `--continue` resumes."""
    choice = choose_session(workspace, True, None)
    assert choice is not None
    return choice.path


def meta(session_id: str = "0123abcd", started: datetime = STARTED) -> SessionMeta:
    return SessionMeta.new(
        chapter=8,
        model="test-model",
        base_url="http://127.0.0.1:8080/v1",
        started=started,
        session_id=session_id,
    )


def write_session(
    workspace: Path, history: Sequence[ChatMessage], session_meta: SessionMeta | None = None
) -> Path:
    with SessionLog.create(workspace, session_meta or meta()) as log:
        for message in history:
            log.emit(MessageAppended(message))
        log.end_turn()
        return log.path


def records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


# --- writing ---------------------------------------------------------------------------


def test_session_file_is_named_by_utc_start_and_id(workspace: Path) -> None:
    path = write_session(workspace, [])
    assert path == workspace / ".agent_tutorial/sessions/20261129T221337Z-0123abcd.jsonl"


def test_first_line_is_session_meta(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    assert records(path)[0] == {
        "type": "session_meta",
        "format_version": 1,
        "session_id": "0123abcd",
        "started": "2026-11-29T22:13:37+00:00",
        "chapter": 8,
        "model": "test-model",
        "endpoint_host": "127.0.0.1:8080",
    }


def test_meta_keeps_the_endpoint_host_and_no_credentials(workspace: Path) -> None:
    secret_meta = SessionMeta.new(
        8,
        "gpt-x",
        "https://alice:s3cret-pw@api.example.com/v1?api_key=sk-live-123",
        started=STARTED,
    )
    path = write_session(workspace, [], secret_meta)
    assert records(path)[0]["endpoint_host"] == "api.example.com"
    raw = path.read_bytes()
    for secret in (b"alice", b"s3cret-pw", b"sk-live-123", b"/v1"):
        assert secret not in raw


@pytest.mark.parametrize(
    ("base_url", "host"),
    [
        (None, None),
        ("", None),
        ("https://api.openai.com/v1", "api.openai.com"),
        ("http://localhost:11434/v1", "localhost:11434"),
        ("http://[::1]:8080/v1", "[::1]:8080"),
        ("http://user:pw@host.example:99/v1", "host.example:99"),
        ("http://host:notaport/v1", None),
    ],
)
def test_endpoint_host_drops_everything_but_host_and_port(
    base_url: str | None, host: str | None
) -> None:
    assert endpoint_host(base_url) == host


def test_session_file_is_private_to_its_owner(workspace: Path) -> None:
    path = write_session(workspace, [])
    assert path.stat().st_mode & 0o077 == 0


def test_one_message_record_per_canonical_message(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    assert [record["type"] for record in records(path)] == ["session_meta"] + ["message"] * len(
        HISTORY
    )
    assert records(path)[2]["message"]["tool_calls"][1]["id"] == "call_b"


def test_streamed_text_and_tool_activity_are_not_recorded(workspace: Path) -> None:
    with SessionLog.create(workspace, meta()) as log:
        log.emit(TurnStarted(1))
        log.emit(TextDelta("partial"))
        log.emit(ToolStarted(READ_A, "a.py"))
        log.emit(ToolFinished(READ_A, tool_success("x"), 0.1))
        log.emit(ModelReplied(assistant_message("hi"), "stop", None))
        log.end_turn()
    assert [record["type"] for record in records(log.path)] == ["session_meta"]


def test_usage_compaction_notice_permission_and_cli_records_are_kept(workspace: Path) -> None:
    details = {"transcript": Path(".agent_tutorial/artifacts/transcript-x.jsonl")}
    with SessionLog.create(workspace, meta()) as log:
        log.emit(ModelReplied(assistant_message("hi"), "stop", Usage(10, 2, 12)))
        log.emit(CompactionApplied("micro", "micro: 4 results cleared", 4, 900, details))
        log.emit(Notice("warning", "summary failed"))
        log.emit(PermissionDecided("bash", "rm -rf build", "deny", "denied by rule", "settings"))
        log.record("error", {"code": "rate_limit"})
        log.end_turn()
    assert records(log.path)[1:] == [
        {"type": "usage", "prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        {
            "type": "compaction",
            "layer": "micro",
            "text": "micro: 4 results cleared",
            "count": 4,
            "bytes_saved": 900,
            "details": {"transcript": ".agent_tutorial/artifacts/transcript-x.jsonl"},
        },
        {"type": "notice", "level": "warning", "text": "summary failed"},
        {
            "type": "permission",
            "tool": "bash",
            "subject": "rm -rf build",
            "decision": "deny",
            "reason": "denied by rule",
            "source": "settings",
        },
        {"type": "error", "code": "rate_limit"},
    ]


@pytest.mark.parametrize("kind", ["", "message", "session_meta", "compaction"])
def test_record_refuses_kinds_the_loader_rebuilds_from(workspace: Path, kind: str) -> None:
    with SessionLog.create(workspace, meta()) as log, pytest.raises(ValueError, match="reserved"):
        log.record(kind, {})


def test_create_never_overwrites_an_existing_session(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    before = path.read_bytes()
    with pytest.raises(SessionLogError, match="cannot create"):
        SessionLog.create(workspace, meta())
    assert path.read_bytes() == before


def test_a_byte_that_is_not_utf8_is_recorded_escaped(workspace: Path) -> None:
    path = write_session(workspace, [user_message("bytes: \udcff end")])
    assert load_session(path).history == (user_message("bytes: \\xff end"),)


# --- refusing unsafe directories --------------------------------------------------------


def test_symlinked_sessions_directory_is_refused(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / "sessions").symlink_to(elsewhere)
    with pytest.raises(SessionPathError, match="is a symlink;"):
        SessionLog.create(workspace, meta())
    assert list(elsewhere.iterdir()) == []


def test_symlinked_agent_tutorial_directory_is_refused(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".agent_tutorial").symlink_to(elsewhere)
    with pytest.raises(SessionPathError, match="is a symlink;"):
        SessionLog.create(workspace, meta())
    with pytest.raises(SessionPathError, match="is a symlink;"):
        list_sessions(workspace)
    assert list(elsewhere.iterdir()) == []


def test_sessions_path_that_is_a_file_is_refused(workspace: Path) -> None:
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / "sessions").write_text("not a directory")
    with pytest.raises(SessionPathError, match="not a directory"):
        SessionLog.create(workspace, meta())


# --- failures while writing ---------------------------------------------------------------


def dev_full_log() -> SessionLog:
    try:
        fd = os.open("/dev/full", os.O_WRONLY | os.O_APPEND)
    except OSError:
        pytest.skip("/dev/full is not available")
    return SessionLog(Path("/dev/full"), fd)


def test_full_disk_is_reported_once_and_the_run_goes_on(workspace: Path) -> None:
    log = dev_full_log()
    runner = AgentRunner(
        ScriptedModel([text_reply("done", Usage(5, 1, 6))]), ToolRegistry(), events=EventBus([log])
    )
    assert runner.run("hello").final_text == "done"
    assert log.failure is not None
    with pytest.raises(SessionLogError, match="No space left on device"):
        log.end_turn()
    runner.events.emit(MessageAppended(user_message("more")))  # still silent
    log.end_turn()  # and never raised twice


def test_writing_to_a_closed_log_stops_it_without_raising_from_emit(workspace: Path) -> None:
    log = SessionLog.create(workspace, meta())
    log.close()
    log.emit(MessageAppended(user_message("lost")))
    log.record("permission", {"decision": "allow"})
    with pytest.raises(SessionLogError, match="closed"):
        log.end_turn()
    log.end_turn()


def test_a_log_that_failed_never_writes_again(workspace: Path) -> None:
    log = SessionLog.create(workspace, meta())
    log.record("error", {"code": 2**70})  # orjson cannot encode it: the log stops here
    log.emit(MessageAppended(user_message("after the failure")))
    with pytest.raises(SessionLogError, match="cannot write"):
        log.end_turn()
    assert [record["type"] for record in records(log.path)] == ["session_meta"]


# --- loading and repairing --------------------------------------------------------------


def test_round_trip_rebuilds_history_with_multi_call_tool_groups(workspace: Path) -> None:
    loaded = load_session(write_session(workspace, HISTORY))
    assert loaded.history == HISTORY
    assert loaded.meta == meta()
    assert (loaded.turns, loaded.first_prompt) == (2, "Read a.py and b.py")
    assert loaded.summary is None
    assert loaded.repaired == []


def test_torn_last_line_is_cut_before_appending(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    whole = path.read_bytes()
    with path.open("ab") as file:
        file.write(b'{"type": "message", "message": {"role": "user", "cont')
    loaded = load_session(path)
    assert loaded.history == HISTORY
    assert loaded.repaired == ["cut a torn last line (53 bytes without a newline)"]
    assert path.read_bytes() == whole
    with SessionLog.open_existing(path) as log:
        log.emit(MessageAppended(user_message("next")))
        log.end_turn()
    assert load_session(path).history == (*HISTORY, user_message("next"))


def test_open_existing_cuts_a_torn_last_line_itself(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"type": "mess')
    with SessionLog.open_existing(path) as log:
        log.emit(MessageAppended(user_message("next")))
    assert load_session(path).history == (*HISTORY, user_message("next"))


def test_unparsable_whole_last_line_is_cut(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"type": "message", \x00\x00\x00\n')
    assert load_session(path).history == HISTORY
    assert path.read_bytes() == whole


def test_trailing_nul_bytes_are_cut(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    whole = path.read_bytes()
    path.write_bytes(whole + b"\x00" * 4096)
    loaded = load_session(path)
    assert loaded.history == HISTORY
    assert loaded.repaired == ["removed 4096 NUL bytes left by a crash"]
    assert path.read_bytes() == whole


def test_torn_line_followed_by_nul_bytes_is_cut(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"type": "message", "mess' + b"\x00" * 100)
    assert load_session(path).history == HISTORY
    assert path.read_bytes() == whole


def test_crash_between_tool_call_and_result_resumes_with_paired_interrupted_result(
    workspace: Path,
) -> None:
    crashed = HISTORY[:3]  # both reads requested, only call_a answered
    path = write_session(workspace, crashed)
    loaded = load_session(path)
    interrupted = tool_message(INTERRUPTED_RESULT, "call_b")
    assert loaded.history == (*crashed, interrupted)
    validate_tool_pairing(loaded.history)
    assert loaded.repaired == ["added an interrupted result for tool call 'call_b'"]
    assert records(path)[-1] == {
        "type": "message",
        "message": {"role": "tool", "content": INTERRUPTED_RESULT, "tool_call_id": "call_b"},
    }


def test_loading_a_repaired_session_again_adds_nothing(workspace: Path) -> None:
    path = write_session(workspace, HISTORY[:2])
    first = load_session(path)
    after_first = path.read_bytes()
    second = load_session(path)
    assert second.history == first.history
    assert second.repaired == []
    assert path.read_bytes() == after_first
    assert after_first.count(INTERRUPTED_RESULT.encode()) == 2  # call_a and call_b, once each


def test_a_file_whose_only_line_is_torn_is_not_called_empty(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    torn = path.read_bytes()[:100]  # a crash inside the meta line's first write
    path.write_bytes(torn)

    with pytest.raises(SessionLoadError, match="no whole session_meta line") as raised:
        load_session(path)

    assert "empty" not in str(raised.value)
    assert path.read_bytes() == torn


def test_an_empty_file_is_called_empty(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    path.write_bytes(b"")

    with pytest.raises(SessionLoadError, match="is empty"):
        load_session(path)


def test_corrupt_middle_line_raises_and_leaves_the_file_alone(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b"{not json\n"
    damaged = b"".join(lines) + b'{"type": "mess'  # a torn tail must not be cut either
    path.write_bytes(damaged)
    with pytest.raises(SessionLoadError, match=":4: line is not JSON"):
        load_session(path)
    assert path.read_bytes() == damaged


def test_unpaired_calls_before_the_end_raise_instead_of_guessing(workspace: Path) -> None:
    path = write_session(workspace, [*HISTORY[:2], user_message("where are the results?")])
    with pytest.raises(SessionLoadError, match="do not pair"):
        load_session(path)


def test_message_record_with_a_bad_shape_raises(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    with path.open("ab") as file:
        file.write(b'{"type": "message", "message": {"role": "tool", "content": 3}}\n')
    with pytest.raises(SessionLoadError, match="bad message"):
        load_session(path)


def test_file_from_a_newer_format_is_refused(workspace: Path) -> None:
    path = write_session(workspace, HISTORY)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"format_version":1', b'"format_version":99')
    path.write_bytes(b"".join(lines))
    with pytest.raises(SessionLoadError, match="format version 99"):
        load_session(path)


def test_session_open_for_writing_cannot_be_resumed_elsewhere(workspace: Path) -> None:
    with SessionLog.create(workspace, meta()) as log:
        with pytest.raises(SessionInUseError, match="already open"):
            load_session(log.path)
        with pytest.raises(SessionInUseError):
            SessionLog.open_existing(log.path)
    assert load_session(log.path).history == ()


def summary_event(layer: str, content: str, covered: int) -> CompactionApplied:
    details = {"summary_content": content, "covered_messages": covered, "transcript_path": "t"}
    return CompactionApplied(layer, f"{layer}: done", 1, 100, details)


def test_latest_summary_state_is_restored(workspace: Path) -> None:
    with SessionLog.create(workspace, meta()) as log:
        for message in HISTORY[:5]:
            log.emit(MessageAppended(message))
        log.emit(summary_event("summary", "first summary", 4))
        log.emit(MessageAppended(HISTORY[5]))
        log.emit(summary_event("reactive", "second summary", 5))
        log.emit(CompactionApplied("micro", "micro: 1 result cleared", 1, 10))
        log.emit(CompactionApplied("summary", "summary without state"))
        log.end_turn()
    summary = load_session(log.path).summary
    assert summary is not None
    assert (summary.layer, summary.summary_content, summary.covered_messages) == (
        "reactive",
        "second summary",
        5,
    )


def test_a_summary_covering_more_messages_than_exist_is_ignored_and_reported(
    workspace: Path,
) -> None:
    with SessionLog.create(workspace, meta()) as log:
        log.emit(MessageAppended(HISTORY[0]))
        log.emit(summary_event("summary", "impossible", 7))
        log.end_turn()

    loaded = load_session(log.path)

    assert loaded.summary is None
    assert loaded.history == (HISTORY[0],)
    assert any("covers 7 of 1 messages" in note for note in loaded.repaired)


# --- listing and finding ------------------------------------------------------------------


def test_list_sessions_is_newest_first_with_the_first_prompt(workspace: Path) -> None:
    write_session(workspace, HISTORY, meta("aaaa0001", STARTED))
    write_session(
        workspace,
        [user_message("later\n" + "x" * 200)],
        meta("bbbb0002", STARTED + timedelta(hours=1)),
    )
    write_session(workspace, [], meta("cccc0003", STARTED - timedelta(days=1)))
    listed = list_sessions(workspace)
    assert [info.session_id for info in listed] == ["bbbb0002", "aaaa0001", "cccc0003"]
    assert [info.has_prompt for info in listed] == [True, True, False]
    assert [info.size_bytes for info in listed] == [info.path.stat().st_size for info in listed]
    assert listed[1].first_prompt == "Read a.py and b.py"
    prompt = listed[0].first_prompt
    assert prompt is not None and len(prompt) == 80 and prompt.startswith("later xxx")
    assert prompt.endswith("…")
    assert listed[2].first_prompt is None


def test_list_sessions_shows_damaged_files_with_the_reason_without_touching_them(
    workspace: Path,
) -> None:
    good = write_session(workspace, HISTORY, meta("aaaa0001"))
    directory = good.parent
    (directory / "20261130T000000Z-dddd0004.jsonl").write_bytes(b"\x00garbage\n{}\n")
    (directory / "20261130T000001Z-eeee0005.jsonl").mkdir()
    torn = write_session(workspace, HISTORY, meta("ffff0006", STARTED + timedelta(minutes=1)))
    torn.write_bytes(torn.read_bytes() + b'{"ty')

    listed = {info.session_id: info for info in list_sessions(workspace)}

    assert set(listed) == {"aaaa0001", "dddd0004", "eeee0005", "ffff0006"}
    assert listed["aaaa0001"].problem is None and listed["ffff0006"].problem is None
    assert "the meta line is not JSON" in str(listed["dddd0004"].problem)
    assert "is not a regular file" in str(listed["eeee0005"].problem)
    assert torn.read_bytes().endswith(b'{"ty')


def test_list_sessions_lists_a_file_whose_name_stamp_is_not_a_date(workspace: Path) -> None:
    # The name matches the pattern (14 digits) but second 99 is no time: listed, not a crash.
    good = write_session(workspace, HISTORY, meta("aaaa0001"))
    (good.parent / "20261130T151099Z-dddd0004.jsonl").write_bytes(b"")

    listed = {info.session_id: info for info in list_sessions(workspace)}

    assert set(listed) == {"aaaa0001", "dddd0004"}
    assert listed["aaaa0001"].problem is None


def test_a_damaged_header_names_its_file_without_the_directory(workspace: Path) -> None:
    # The problem fills the listing's prompt column: a full path wraps it at 80 columns.
    good = write_session(workspace, HISTORY, meta("aaaa0001"))
    (good.parent / "20261130T000000Z-dddd0004.jsonl").write_bytes(b"{")

    [damaged] = [info for info in list_sessions(workspace) if info.problem]

    assert str(damaged.problem).startswith("20261130T000000Z-dddd0004.jsonl:1: ")
    assert str(good.parent) not in str(damaged.problem)


def test_an_age_older_than_any_date_selects_nothing_instead_of_overflowing(
    workspace: Path,
) -> None:
    path = write_session(workspace, HISTORY, meta("aaaa0001"))
    os.utime(path, (0, 0))

    assert sessions_older_than(workspace, 1_000_000 * 86_400) == []  # `--older-than 1000000d`
    assert [info.path for info in sessions_older_than(workspace, 86_400)] == [path]


def test_list_sessions_reads_only_the_header_lines(workspace: Path) -> None:
    path = write_session(workspace, HISTORY, meta("aaaa0001"))
    # Damage far past the header: listing cannot see it, `check_session` can.
    path.write_bytes(path.read_bytes() + b"x" * HEADER_BYTES + b"\n{}\n")

    [info] = list_sessions(workspace)

    assert (info.problem, info.first_prompt) == (None, "Read a.py and b.py")
    assert "line is not JSON" in str(check_session(info).problem)


def test_a_bad_line_before_the_first_prompt_lists_the_session_as_damaged(
    workspace: Path,
) -> None:
    path = write_session(workspace, HISTORY, meta("aaaa0001"))
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][:30]  # the prompt's own line, cut: --continue must not pass over it
    path.write_bytes(b"\n".join(lines))

    [info] = list_sessions(workspace)

    assert str(info.problem).startswith(f"{path.name}:2: line is not JSON")
    assert (info.chapter, info.first_prompt) == (8, None)
    assert continue_candidates(workspace) == [info]


def test_a_torn_line_before_the_first_prompt_ending_the_file_is_no_damage(
    workspace: Path,
) -> None:
    # A crash while the first prompt was written: resuming cuts the line, so it is no damage.
    path = write_session(workspace, [], meta("aaaa0001"))
    path.write_bytes(path.read_bytes() + b'{"type":"message","mess\n')

    [info] = list_sessions(workspace)

    assert (info.problem, info.has_prompt) == (None, False)
    assert continue_candidates(workspace) == []


def test_salvage_keeps_every_message_that_reads_and_marks_the_lines_that_do_not(
    workspace: Path,
) -> None:
    path = write_session(workspace, HISTORY[:3], meta("aaaa0001"))
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"{not json"  # the assistant's reply, whose call the next line answers
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionLoadError):
        load_session(path, repair=False)

    shown = salvage_session(path)

    assert shown[0] == HISTORY[0]
    assert isinstance(shown[1], DamagedLine) and shown[1].number == 3
    assert shown[1].problem.startswith(f"{path.name}:3: line is not JSON")
    assert shown[2:] == [HISTORY[2]]


def test_check_session_names_the_first_bad_line(workspace: Path) -> None:
    path = write_session(workspace, HISTORY, meta("aaaa0001"))
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"{not json"
    path.write_bytes(b"\n".join(lines))

    [info] = list_sessions(workspace)

    assert f"{path.name}:3: line is not JSON" in str(check_session(info).problem)


def test_a_first_prompt_longer_than_the_header_is_known_but_not_shown(workspace: Path) -> None:
    write_session(workspace, [user_message("x" * (2 * HEADER_BYTES))], meta("aaaa0001"))

    [info] = list_sessions(workspace)

    assert (info.has_prompt, info.first_prompt) == (True, None)
    assert continued_session(workspace) == info.path


def test_list_sessions_without_a_sessions_directory_is_empty(workspace: Path) -> None:
    assert list_sessions(workspace) == []
    with pytest.raises(NothingToContinue):
        choose_session(workspace, True, None)


def test_find_session_by_unique_prefix(workspace: Path) -> None:
    first = write_session(workspace, HISTORY, meta("abc12345"))
    second = write_session(workspace, HISTORY, meta("abd12345", STARTED + timedelta(seconds=1)))
    assert find_session(workspace, "abc") == first
    assert find_session(workspace, "ABD12345") == second


def test_find_session_with_an_ambiguous_prefix_names_the_candidates(workspace: Path) -> None:
    write_session(workspace, HISTORY, meta("abc12345"))
    write_session(workspace, HISTORY, meta("abd12345", STARTED + timedelta(seconds=1)))
    with pytest.raises(SessionLookupError, match="matches 2 sessions") as error:
        find_session(workspace, "ab")
    assert "abc12345" in str(error.value) and "abd12345" in str(error.value)


@pytest.mark.parametrize("query", ["ffff", "not-hex", "", "abc123456"])
def test_find_session_without_a_match_says_so(workspace: Path, query: str) -> None:
    write_session(workspace, HISTORY, meta("abc12345"))
    with pytest.raises(SessionLookupError):
        find_session(workspace, query)


def test_continue_skips_sessions_without_a_prompt(workspace: Path) -> None:
    with_prompt = write_session(workspace, HISTORY, meta("aaaa0001"))
    write_session(workspace, [], meta("bbbb0002", STARTED + timedelta(hours=1)))
    assert continued_session(workspace) == with_prompt
