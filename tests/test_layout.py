"""Text laid out for narrow terminals: a number kept with its unit, no trailing spaces,
prompts shortened at a word, and the session, artifact and tool lines that use them."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from agent_tutorial.artifact_view import artifact_table
from agent_tutorial.core.tools import tool_success
from agent_tutorial.features.artifact_catalog import ArtifactInfo
from agent_tutorial.features.sessions import SessionInfo
from agent_tutorial.layout import KeepUnits, Trimmed, pack_cells, shorten_at_word
from agent_tutorial.render import session_table, tool_line

SIZES = "history 126 messages, 137.5 KB and 46×, 46 item(s), 41.9 KB saved"


def shown(renderable: RenderableType, width: int, *, pipe: bool = False) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, soft_wrap=pipe)
    console.print(renderable)
    return out.getvalue().splitlines()


def test_rich_alone_parts_a_number_from_its_unit_at_this_width() -> None:
    assert shown(Text(SIZES), 27)[0].endswith("137.5")  # what KeepUnits is for


def test_keep_units_wraps_at_spaces_but_never_after_a_number() -> None:
    lines = shown(KeepUnits(SIZES), 27)

    assert lines == ["history 126 messages,", "137.5 KB and 46×,", "46 item(s), 41.9 KB saved"]


def test_keep_units_cuts_a_run_wider_than_the_line_as_a_terminal_would() -> None:
    assert shown(KeepUnits("see " + "x" * 25), 10) == ["see", "x" * 10, "x" * 10, "x" * 5]


def test_keep_units_in_a_pipe_prints_each_line_whole() -> None:
    assert shown(KeepUnits(SIZES + "\nsecond"), 25, pipe=True) == [SIZES, "second"]


def test_keep_units_in_a_table_column_keeps_its_numbers_whole() -> None:
    table = Table(box=None, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column()
    table.add_row("canonical history", KeepUnits(SIZES))

    lines = shown(Trimmed(table), 40)

    assert [line.strip() for line in lines[1:]] == [
        "126 messages,",
        "137.5 KB and 46×,",
        "46 item(s), 41.9 KB",
        "saved",
    ]


def test_trimmed_leaves_no_line_ending_in_spaces() -> None:
    table = Table("kind", "size", box=None)
    table.add_row("transcript", "1.2 KB")
    table.add_row("tool-result", "12.0 KB")

    padded, trimmed = shown(table, 80), shown(Trimmed(table), 80)

    assert any(line.endswith(" ") for line in padded)
    assert [line.rstrip() for line in padded] == trimmed


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (34, "Give me a tour of this repository."),  # exactly fits
        (33, "Give me a tour of this…"),  # one short: cut at the last word
        (12, "Give me a…"),
        (1, "…"),
    ],
)
def test_shorten_at_word_cuts_between_words(width: int, expected: str) -> None:
    assert shorten_at_word("Give me a tour of this repository.", width) == expected


def test_shorten_at_word_cuts_a_long_word_when_no_space_is_near() -> None:
    assert shorten_at_word("see supercalifragilistic", 12) == "see superca…"


def test_pack_cells_fills_lines_and_never_splits_a_cell() -> None:
    cells = ["sent 1.9 MB", "cache hit 52%", "OpenAI $ 0.31"]

    assert pack_cells(cells, 30, " · ") == ["sent 1.9 MB · cache hit 52%", "OpenAI $ 0.31"]
    assert pack_cells(cells, 27, " · ") == ["sent 1.9 MB · cache hit 52%", "OpenAI $ 0.31"]
    assert pack_cells(cells, 26, " · ") == ["sent 1.9 MB", "cache hit 52%", "OpenAI $ 0.31"]
    assert pack_cells(cells, 5, " · ") == cells  # wider than the line: each alone


def test_a_narrow_tool_line_gives_up_its_time_before_its_subject() -> None:
    subject = "packages/example/app/big.py"
    result = tool_success("x" * 925)

    roomy = tool_line("read_file", subject, result, 0.01, width=40)
    narrow = tool_line("read_file", subject, result, 0.01, width=36)  # a subagent's, at 40
    tiny = tool_line("read_file", subject, result, 0.01, width=24)

    assert roomy.plain == "• read_file packages/exam…  925 B  0.01s"
    assert narrow.plain == "• read_file packages/example…  925 B"
    assert tiny.plain == "• read_file  925 B"


STARTED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)


def session(session_id: str, prompt: str | None, problem: str | None = None) -> SessionInfo:
    return SessionInfo(
        session_id=session_id,
        path=Path(f"20261130T091500Z-{session_id}.jsonl"),
        started=STARTED,
        chapter=8,
        model="m",
        first_prompt=prompt,
        has_prompt=prompt is not None,
        size_bytes=170_000,
        modified=STARTED,
        problem=problem,
    )


PROMPT = "fix the failing test in the repository and explain what you changed."


def test_sessions_at_80_columns_take_a_line_each_the_prompt_cut_at_a_word() -> None:
    lines = shown(session_table([session("aaaa0001", PROMPT)]), 80)

    assert len(lines) == 2
    assert lines[1].endswith("166.0 KB   fix the failing test in the…")
    assert max(len(line) for line in lines) <= 80


def test_sessions_at_40_columns_take_two_lines_each() -> None:
    lines = shown(session_table([session("aaaa0001", PROMPT)]), 40)

    assert lines[0].startswith("aaaa0001  2026-11-30 ")
    assert lines[0].endswith("  166.0 KB")
    assert lines[1] == "  ch8 · fix the failing test in the…"


def test_sessions_in_a_pipe_show_the_whole_prompt() -> None:
    lines = shown(session_table([session("aaaa0001", PROMPT)]), 40, pipe=True)

    assert lines[0].split() == ["id", "started", "chapter", "size", "first", "prompt"]
    assert lines[1].endswith(f"166.0 KB   {PROMPT}")


def test_a_damaged_session_wraps_its_problem_under_the_prompt_column() -> None:
    problem = "line 3 is not JSON: unexpected character at byte 12 of 4,096 bytes"

    lines = shown(session_table([session("aaaa0002", None, problem)]), 80)

    indent = " " * 48  # under the prompt column: 80 - 48 leaves it 32
    assert lines[1].endswith("166.0 KB   damaged: line 3 is not JSON:")
    assert lines[2:] == [indent + "unexpected character at byte", indent + "12 of 4,096 bytes"]


def test_sessions_with_a_check_column_mark_each_one() -> None:
    table = session_table([session("aaaa0001", "hello"), session("aaaa0002", "x")], [None, "bad"])

    wide, narrow = shown(table, 80), shown(table, 40)

    assert wide[0].split()[4] == "check"
    assert [line.split()[6] for line in wide[1:]] == ["ok", "damaged"]
    assert [line for line in narrow if line.startswith("  ch8")] == [
        "  ch8 · ok · hello",
        "  ch8 · damaged · x",
    ]


def artifact(kind: str, artifact_id: str, size: int) -> ArtifactInfo:
    return ArtifactInfo(
        kind="transcript" if kind == "transcript" else "tool-result",
        id=artifact_id,
        path=Path(f"{kind}-{artifact_id}.txt"),
        relative_path=f".agent_tutorial/artifacts/{kind}-{artifact_id}.txt",
        size=size,
        modified=STARTED.timestamp(),
    )


ARTIFACTS = [
    artifact("transcript", "10ac413acaa1497ba0911498664f8332", 117_555),
    artifact("tool-result", "call-1", 45_932),
]


def test_artifacts_take_a_line_each_where_one_fits() -> None:
    lines = shown(artifact_table(ARTIFACTS), 77)  # the widest line's width

    assert len(lines) == 3
    assert lines[2].startswith("tool-result  call-1  ")
    assert max(len(line) for line in lines) == 77
    assert [line for line in lines if line.endswith(" ")] == []


def test_artifacts_narrower_than_a_line_take_two_with_the_id_whole() -> None:
    lines = shown(artifact_table(ARTIFACTS), 76)

    assert lines[0].startswith("transcript  114.8 KB  2026-11-30 ")
    assert lines[1] == "  10ac413acaa1497ba0911498664f8332"
    assert max(len(line) for line in lines) <= 40
