"""grep's line search: the whole-file first pass never loses a line that searching each
line alone would find, and patterns it cannot vouch for skip that pass."""

from __future__ import annotations

import regex
from hypothesis import assume, given
from hypothesis import strategies as st

from agent_tutorial.features.line_search import InvalidPattern, LineSearch

PIECES = [
    "a", "b", "x", " ", ".", "^", "$", r"\b", r"\w", r"\d", r"\.", r"\$", "[ab]", "[a-x]",
    "[ .]", "(", "(?:", ")", "|", "*", "+", "?", "{1,2}", r"\s", "[^a]", r"\A", r"\Z",
    "(?i)", "(?s)", "(?m)", "(?<=a)", "(?<!a)", "(?!b)", "(a)", r"\1", r"\n",
]  # fmt: skip
patterns = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join)
texts = st.text(alphabet="abAB x.$1\n\r", max_size=40)


def search(pattern: str) -> LineSearch:
    return LineSearch.compile(pattern, budget_s=60)


def each_line_alone(pattern: str, text: str) -> list[tuple[int, str]]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    compiled = regex.compile(pattern)
    numbered = [(number, line.removesuffix("\r")) for number, line in enumerate(lines, 1)]
    return [(number, line) for number, line in numbered if compiled.search(line)]


@given(patterns, texts)
def test_the_whole_file_pass_finds_every_line_searching_alone_finds(
    pattern: str, text: str
) -> None:
    try:
        line_search = search(pattern)
    except InvalidPattern:
        assume(False)
        raise

    assert list(line_search.matching_lines(text)) == each_line_alone(pattern, text)


def test_a_line_ending_before_a_carriage_return_still_matches_an_anchor() -> None:
    assert list(search("end$").matching_lines("the end\r\nnot here\r\nend\r")) == [
        (1, "the end"),
        (3, "end"),
    ]


def test_a_word_boundary_at_a_line_start_still_matches() -> None:
    assert list(search(r"\bword").matching_lines("x\nword\n")) == [(2, "word")]


def test_patterns_that_could_see_across_lines_search_each_line_alone() -> None:
    for pattern in (r"a\sb", "a[^x]b", r"\Aa", "(?<=\n)a", "(?s)a.b", r"(a)\1"):
        assert search(pattern).whole_text is None, pattern


def test_plain_patterns_get_the_whole_file_pass() -> None:
    for pattern in ("def [a-z_]+\\(", "(?i)todo", r"^\s*"[:1] + "import", r"\bfoo\b", "x{2,}$"):
        assert search(pattern).whole_text is not None, pattern
