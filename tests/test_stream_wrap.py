"""Streamed answer text placed between words (`stream_wrap.WordWrap`): pure tests of what
reaches the terminal. The run on a real pseudo-terminal is in test_terminal_output.py."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from agent_tutorial.stream_wrap import WordWrap


def shown(text: str, width: int, cuts: Sequence[int] = ()) -> str:
    """What is printed for `text` streamed in pieces cut at `cuts`, then ended."""
    wrap = WordWrap(width)
    bounds = [0, *sorted(cut % (len(text) + 1) for cut in cuts), len(text)]
    printed = "".join(wrap.feed(text[start:end]) for start, end in itertools.pairwise(bounds))
    return printed + wrap.flush()


def test_a_word_that_would_cross_the_edge_starts_the_next_line() -> None:
    assert shown("count the Python files", 16) == "count the Python\nfiles"
    assert shown("count the Python files", 15) == "count the \nPython files"


def test_a_word_that_ends_exactly_at_the_edge_stays_and_the_space_after_it_goes() -> None:
    assert shown("abcd efgh", 4) == "abcd\nefgh"
    assert shown("abc efgh", 4) == "abc \nefgh"


def test_line_breaks_in_the_text_start_the_count_again() -> None:
    assert shown("abc\nabcd ef", 4) == "abc\nabcd\nef"


def test_a_word_wider_than_the_terminal_is_left_whole() -> None:
    assert shown("a abcdefghij b", 4) == "a \nabcdefghij\nb"
    assert shown("abcdefghij", 4) == "abcdefghij"  # no empty line before it


def test_a_word_wider_than_the_terminal_is_shown_before_it_ends() -> None:
    """A long URL or hash streams on; only a line's worth is ever held back."""
    wrap = WordWrap(4)

    assert WordWrap(4).feed("abcd") == ""  # as wide as a line: held, it may end there
    assert wrap.feed("a abc") == "a "
    assert wrap.feed("de") == "\nabcde"
    assert wrap.feed("fgh") == "fgh"
    assert wrap.feed(" b") == ""  # the space at the full line's edge goes; b is held
    assert wrap.flush() == "\nb"


def test_a_terminal_one_column_wide_still_gets_every_word() -> None:
    assert shown("a b", 1) == "a\nb"
    assert shown("a b", 0) == "a\nb"  # an unknown width counts as one column
    assert shown("a b", 2) == "a \nb"


def test_wide_characters_count_two_columns() -> None:
    assert shown("ab 漢字", 5) == "ab \n漢字"
    assert shown("ab 漢", 5) == "ab 漢"


def test_a_word_is_held_until_it_ends() -> None:
    wrap = WordWrap(10)

    assert wrap.feed("hel") == ""
    assert wrap.feed("lo wor") == "hello "
    assert wrap.flush() == "wor"


def test_tabs_move_to_the_next_tab_stop() -> None:
    assert shown("a\tbcdefgh", 12) == "a\t\nbcdefgh"
    assert shown("a\tbcd", 12) == "a\tbcd"
    assert shown("abc\tdefg", 12) == "abc\tdefg"  # the stop is column 8, whatever came before
    assert shown("abc\tdefgh", 12) == "abc\t\ndefgh"


@given(
    st.text(alphabet=st.sampled_from("ab \n漢"), max_size=60),
    st.integers(min_value=1, max_value=20),
    st.lists(st.integers(min_value=0, max_value=60), max_size=6),
)
def test_only_line_breaks_are_added_and_no_line_crosses_the_edge_that_need_not(
    text: str, width: int, cuts: list[int]
) -> None:
    printed = shown(text, width, cuts)

    assert printed.split() == text.split()  # the same words, in order, none cut
    assert_only_spaces_dropped(text, printed.replace("\n", ""))
    for line in printed.split("\n"):
        words = line.split()
        if len(words) > 1:  # a line of one word wider than the terminal is left to it
            assert sum(2 if c == "漢" else 1 for c in line.rstrip()) <= width


def assert_only_spaces_dropped(text: str, printed: str) -> None:
    """Line breaks aside, `printed` is `text` less some spaces (those at a full line's
    edge): every other character is kept, in order."""
    rest = iter(printed)
    pending = next(rest, None)
    for char in text.replace("\n", ""):
        if char == pending:
            pending = next(rest, None)
        else:
            assert char == " ", f"only spaces are dropped, not {char!r}"
    assert pending is None
