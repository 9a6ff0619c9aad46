"""Issue 29, item 7: artifact rows say what made each artifact (`read_file logs/big1.log`,
`summary of 12 messages`), read back from the session files, and keep to the width: beside
the row where it fits, under it where it does not, never in place of the whole id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from agent_tutorial.artifact_view import ArtifactTable, artifact_table, origin_text
from agent_tutorial.features.artifact_catalog import ArtifactInfo
from agent_tutorial.features.artifact_origins import (
    PersistedCall,
    SummarisedHistory,
    artifact_origins,
)
from agent_tutorial.features.compaction.persist import PERSISTED_BLOCK_START
from tests.test_layout import STARTED, shown

RESULT = "tool-result-0123456789abcdef0123456789abcdef.txt"
TRANSCRIPT = "transcript-fedcba9876543210fedcba9876543210.jsonl"


def call_line(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": orjson.dumps(arguments).decode()}
    call = {"id": call_id, "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"type": "message", "message": message}


def tool_line(call_id: str, content: str) -> dict[str, Any]:
    message = {"role": "tool", "tool_call_id": call_id, "content": content}
    return {"type": "message", "message": message}


def persisted(name: str) -> str:
    return f"{PERSISTED_BLOCK_START}path: .agent_tutorial/artifacts/{name}\noriginal_bytes: 9\n"


def write_session(root: Path, *records: dict[str, Any], name: str = "a1b2c3d4") -> None:
    folder = root / ".agent_tutorial" / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [orjson.dumps({"type": "session_meta"}), *map(orjson.dumps, records)]
    (folder / f"20261201T120000Z-{name}.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def test_a_persisted_result_is_traced_to_its_call_and_a_transcript_to_its_summary(
    tmp_path: Path,
) -> None:
    summary = {"summary_content": "{}", "covered_messages": 12, "trigger": "manual"}
    summary["transcript_path"] = f".agent_tutorial/artifacts/{TRANSCRIPT}"
    write_session(
        tmp_path,
        call_line("c1", "read_file", {"path": "logs/big1.log"}),
        tool_line("c1", persisted(RESULT)),
        {"type": "compaction", "layer": "summary", "details": summary},
    )

    assert artifact_origins(tmp_path) == {
        RESULT: PersistedCall("read_file", '{"path":"logs/big1.log"}'),
        TRANSCRIPT: SummarisedHistory("manual", 12),
    }


def test_a_result_that_only_mentions_an_artifact_did_not_make_it(tmp_path: Path) -> None:
    write_session(
        tmp_path,
        call_line("c1", "glob", {"pattern": ".agent_tutorial/artifacts/*"}),
        tool_line("c1", f".agent_tutorial/artifacts/{RESULT}"),
        call_line("c2", "read_file", {"path": f".agent_tutorial/artifacts/{RESULT}"}),
        tool_line("c2", f"1\tsome output naming {RESULT}"),
    )

    assert artifact_origins(tmp_path) == {}


def test_damaged_lines_and_sessions_without_artifacts_are_passed_over(tmp_path: Path) -> None:
    write_session(tmp_path, tool_line("c9", persisted(RESULT)), name="00000001")  # no call
    write_session(tmp_path, call_line("c1", "bash", {"command": "ls"}), name="00000002")
    folder = tmp_path / ".agent_tutorial" / "sessions"
    (folder / "20261201T120000Z-00000003.jsonl").write_bytes(b'{"type": "mess' + RESULT.encode())

    assert artifact_origins(tmp_path) == {}
    assert artifact_origins(tmp_path / "no-such-project") == {}


def test_origins_read_as_the_call_or_the_summary() -> None:
    assert origin_text(PersistedCall("read_file", '{"path": "logs/big1.log"}')) == (
        "read_file logs/big1.log"
    )
    assert origin_text(PersistedCall("bash", '{"command": "cat\\n\\u001b[2J x"}')) == (
        "bash cat \\x1b[2J x"
    )
    assert origin_text(PersistedCall("todo_write", "not json")) == "todo_write"
    assert origin_text(SummarisedHistory("automatic", 1200)) == "summary of 1,200 messages"
    assert origin_text(SummarisedHistory("manual", 3)) == "/compact of 3 messages"
    assert origin_text(SummarisedHistory("overflow", 3)) == (
        "summary of 3 messages (prompt too long)"
    )


def info(name: str) -> ArtifactInfo:
    kind, _, rest = name.partition("-")
    return ArtifactInfo(
        kind="transcript" if kind == "transcript" else "tool-result",
        id=rest.split("-", 1)[-1].split(".")[0],
        path=Path(name),
        relative_path=f".agent_tutorial/artifacts/{name}",
        size=45_932,
        modified=STARTED.timestamp(),
    )


TABLE = ArtifactTable([info(RESULT)], {RESULT: "read_file logs/a rather long/path/big1.log"})
ROW = 77  # kind, id, size and time with their gaps


BESIDE = ROW + 2 + len("read_file logs/a rather long/path/big1.log")


def test_the_origin_goes_beside_the_row_where_it_fits_whole() -> None:
    lines = shown(TABLE, BESIDE)

    assert lines[0].endswith("time                 made by")
    assert lines[1].endswith("  read_file logs/a rather long/path/big1.log")
    assert len(lines) == 2 and max(map(len, lines)) == BESIDE


def test_one_column_less_and_the_origin_goes_under_the_row() -> None:
    lines = shown(TABLE, BESIDE - 1)

    assert lines[0].endswith("  time")
    assert lines[2] == "  read_file logs/a rather long/path/big1.log"


def test_at_40_columns_the_id_and_the_origin_take_a_line_each_within_the_width() -> None:
    lines = shown(TABLE, 40)

    assert lines[1] == "  0123456789abcdef0123456789abcdef"
    assert lines[2].startswith("  read_file logs/a rather long/") and lines[2].endswith("…")
    assert max(map(len, lines)) <= 40


def test_in_a_pipe_each_artifact_is_one_whole_line() -> None:
    lines = shown(TABLE, 40, pipe=True)

    assert len(lines) == 2 and lines[1].endswith("  read_file logs/a rather long/path/big1.log")


def test_without_sessions_the_rows_are_as_before(tmp_path: Path) -> None:
    lines = shown(artifact_table([info(RESULT)], tmp_path), 80)

    assert lines[0].endswith("  time") and len(lines) == 2
