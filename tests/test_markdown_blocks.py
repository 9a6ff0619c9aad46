"""A one-shot answer on a terminal is rendered as Markdown block by block, as each block is
complete, and printed once: no repaint, no cursor moves, no padding to the width."""

from __future__ import annotations

import io

from rich.console import Console

from agent_tutorial.core.events import ModelReplied, TextDelta
from agent_tutorial.core.messages import assistant_message
from agent_tutorial.markdown_blocks import MarkdownBlocks
from agent_tutorial.render import TerminalRenderer

ANSWER = (
    "**Found** three files.\n\n"
    "- a list item\n\n"
    "    its second paragraph, indented\n\n"
    "```python\n"
    "x = 1\n\n"
    "y = 2\n"
    "```\n\n"
    "The end."
)


BLOCKS = [
    "**Found** three files.\n\n",
    "- a list item\n\n    its second paragraph, indented\n\n",  # still the item's
    "```python\nx = 1\n\ny = 2\n```\n\n",  # a blank line inside a fence ends nothing
    "The end.",
]


def shown_in(pieces: list[str]) -> list[str]:
    """What `MarkdownBlocks` hands over as the pieces arrive, then at the end."""
    blocks = MarkdownBlocks()
    done = [block for piece in pieces if (block := blocks.feed(piece))]
    return [*done, blocks.flush()]


def test_blocks_end_where_a_new_one_starts_after_a_blank_line() -> None:
    assert "".join(BLOCKS) == ANSWER
    assert shown_in(list(ANSWER)) == BLOCKS  # a character at a time


def test_a_block_is_held_until_the_next_one_starts() -> None:
    blocks = MarkdownBlocks()

    assert blocks.feed("First paragraph.\n\n") == ""  # an indented line may still follow
    assert blocks.feed("Sec") == "First paragraph.\n\n"
    assert blocks.feed("ond.") == ""
    assert blocks.flush() == "Second."


def test_wherever_the_stream_is_cut_blocks_end_only_where_they_end() -> None:
    ends = {len("".join(BLOCKS[: n + 1])) for n in range(len(BLOCKS))}

    for cut in range(1, len(ANSWER)):
        shown = shown_in([ANSWER[:cut], ANSWER[cut:]])
        assert "".join(shown) == ANSWER, cut
        assert {len("".join(shown[: n + 1])) for n in range(len(shown))} <= ends, cut


def test_the_renderer_prints_each_block_once_rendered_without_repaint_or_padding() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(
        Console(file=out, width=40, force_terminal=True, color_system=None),
        Console(file=io.StringIO(), width=40),
        stream_answer=True,
        markdown=True,
        live=False,
    )

    for piece in ("**Found** three", " files.\n\n- one\n", "- two\n\nThe end."):
        renderer.emit(TextDelta(piece))
    renderer.emit(ModelReplied(assistant_message("…"), "stop", None))

    assert out.getvalue() == "Found three files.\n\n • one\n • two\n\nThe end.\n"
