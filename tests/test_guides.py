"""The chapter guides teach their lessons and cannot drift from them.

A rewritten guide `chapters/chNN.md` reads top to bottom:

    # Chapter N — Title
    the problem, in prose; then a ```text diagram (at most 20 lines of at most 80 ASCII columns)
    the walkthrough: at least three ```python excerpts of chNN.py, each after a sentence that
        names its lines: "Lines 96–111 of `ch01.py`: …" (or "Line 22 of `ch01.py`")
    ## What changed from chapter N-1   (not in chapter 1) with `make lesson-diff A=N-1` and
        "X changed lines (Y added, Z removed)", counted as `lesson_support.changed_lines` counts
    ## Try it                          `make lesson N=N`, `chapters/chNN.py --prompt`, `--trace`
    ## Exercises                       two to four numbered items
    ## Going further: the package

An excerpt is a run of consecutive lines of the lesson copied exactly (both sides dedented): to
skip lines, end the block and start another. `guide_problems` says in words what is wrong with
a guide; the unit tests show it on a made-up guide, and every rewritten guide must have none.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.lesson_support import LESSONS, changed_lines, lesson_path

# The guides rewritten to start from their lesson: add a chapter here when its guide lands.
REWRITTEN_GUIDES: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9)

MIN_EXCERPTS = 3
MIN_EXERCISES, MAX_EXERCISES = 2, 4
DIAGRAM_MAX_LINES, DIAGRAM_MAX_COLUMNS = 20, 80

FENCE = re.compile(r"^\s*(`{3,})\s*([\w-]*)")
LINE_REFERENCE = re.compile(r"\b[Ll]ines? (\d+)(?:\s*[–-]\s*(\d+))? of `(ch\d\d\.py)`")
DIFF_SIZE = re.compile(r"([\d,]+) changed lines \(([\d,]+) added, ([\d,]+) removed\)")
NUMBERED_ITEM = re.compile(r"^\d+\. ")
GUIDE_LINK = re.compile(r"\]\((ch\d\d\.md)?#([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """A fenced block: its language and body, and where its fences are (0-based guide lines)."""

    language: str
    body: tuple[str, ...]
    opening: int
    closing: int


Sections = list[tuple[int, str]]  # (guide line, title) of each level-2 heading


def fenced_blocks(lines: list[str]) -> list[Block]:
    blocks: list[Block] = []
    opening: tuple[int, str, str] | None = None  # line, backticks, language
    for number, line in enumerate(lines):
        fence = FENCE.match(line)
        if opening is None and fence:
            opening = (number, fence.group(1), fence.group(2))
        elif opening is not None and line.strip() == opening[1]:
            start, _, language = opening
            blocks.append(Block(language, tuple(lines[start + 1 : number]), start, number))
            opening = None
    return blocks


def headings(lines: list[str], blocks: list[Block], level: int) -> list[tuple[int, str]]:
    """(line, title) of each heading of exactly `level` outside the fenced blocks."""
    fenced = {n for block in blocks for n in range(block.opening, block.closing + 1)}
    marker = "#" * level + " "
    return [
        (number, line[len(marker) :].strip())
        for number, line in enumerate(lines)
        if number not in fenced and line.startswith(marker)
    ]


def required_sections(chapter: int) -> list[str]:
    changed = [f"What changed from chapter {chapter - 1}"] if chapter > 1 else []
    return [*changed, "Try it", "Exercises", "Going further: the package"]


def dedented(lines: list[str] | tuple[str, ...]) -> list[str]:
    # split, not splitlines: a trailing blank line is a line of the excerpt too
    return [line.rstrip() for line in textwrap.dedent("\n".join(lines)).split("\n")]


def where_excerpt_is(excerpt: list[str], lesson: list[str]) -> list[tuple[int, int]]:
    """The 1-based line ranges of `lesson` that, dedented, are the dedented `excerpt`."""
    size = len(excerpt)
    return [
        (start + 1, start + size)
        for start in range(len(lesson) - size + 1)
        if dedented(lesson[start : start + size]) == excerpt
    ]


def sentence_before(lines: list[str], number: int) -> str:
    """The paragraph that ends just above line `number` (blank lines between are skipped)."""
    end = number
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    start = end
    while start > 0 and lines[start - 1].strip() and not FENCE.match(lines[start - 1]):
        start -= 1
    return " ".join(lines[start:end])


def excerpt_problems(chapter: int, lines: list[str], block: Block, lesson: list[str]) -> list[str]:
    place = f"the excerpt at guide line {block.opening + 1}"
    name = f"ch{chapter:02d}.py"
    references = LINE_REFERENCE.findall(sentence_before(lines, block.opening))
    if not references:
        return [f"{place}: the sentence before it names no lines ('Lines A–B of `{name}`')"]
    first, last, file_name = references[-1]
    start, end = int(first), int(last or first)
    if file_name != name:
        return [f"{place}: it names `{file_name}`, but this guide's lesson is `{name}`"]
    excerpt = dedented(block.body)
    if not block.body:
        return [f"{place}: it is empty"]
    if not (block.body[0].strip() and block.body[-1].strip()):
        return [f"{place}: it starts or ends with a blank line (ruff would drop it)"]
    if 1 <= start <= end and dedented(lesson[start - 1 : end]) == excerpt:
        return []
    found = where_excerpt_is(excerpt, lesson)
    if found:
        at = ", ".join(f"{a}–{b}" for a, b in found)
        return [f"{place}: it says lines {start}–{end} of {name}, but it is lines {at}"]
    return [f"{place}: it is not a run of consecutive lines of {name} (changed or elided?)"]


def section_text(lines: list[str], sections: Sections, title: str) -> list[str]:
    """The lines under the `## title` heading, up to the next level-2 heading."""
    starts = [number for number, found in sections if found == title]
    if not starts:
        return []
    later = [number for number, _ in sections if number > starts[0]]
    return lines[starts[0] + 1 : min(later, default=len(lines))]


def structure_problems(
    chapter: int, lines: list[str], sections: list[tuple[int, str]]
) -> list[str]:
    problems = []
    if not lines or not lines[0].startswith(f"# Chapter {chapter} — "):
        problems.append(f"the first line is not '# Chapter {chapter} — Title'")
    titles = [title for _, title in sections]
    required = required_sections(chapter)
    for title in required:
        if titles.count(title) != 1:
            problems.append(f"the section '## {title}' appears {titles.count(title)} times")
    present = [title for title in titles if title in required]
    if len(present) == len(required) and present != required:
        problems.append(f"the sections are out of order: {present}, not {required}")
    return problems


def diagram_problems(lines: list[str], walkthrough: list[Block]) -> list[str]:
    diagrams = [block for block in walkthrough if block.language == "text"]
    excerpts = [block for block in walkthrough if block.language == "python"]
    if not diagrams or (excerpts and diagrams[0].opening > excerpts[0].opening):
        return ["no ```text diagram before the first excerpt"]
    diagram = diagrams[0]
    prose = [line for line in lines[1 : diagram.opening] if line.strip()]
    problems = [] if prose else ["no paragraph stating the problem before the diagram"]
    if len(diagram.body) > DIAGRAM_MAX_LINES:
        problems.append(f"the diagram has {len(diagram.body)} lines (at most {DIAGRAM_MAX_LINES})")
    for line in diagram.body:
        if len(line) > DIAGRAM_MAX_COLUMNS or not line.isascii():
            problems.append(f"a diagram line is not {DIAGRAM_MAX_COLUMNS} ASCII columns: {line!r}")
    return problems


def diff_problems(chapter: int, section: list[str], previous: str, lesson: str) -> list[str]:
    text = "\n".join(section)
    problems = []
    if f"make lesson-diff A={chapter - 1}" not in text:
        problems.append(f"'What changed' does not show `make lesson-diff A={chapter - 1}`")
    changed = changed_lines(previous, lesson)
    added = sum(line.startswith("+") for line in changed)
    real = (len(changed), added, len(changed) - added)
    stated = [tuple(int(n.replace(",", "")) for n in found) for found in DIFF_SIZE.findall(text)]
    if not stated:
        problems.append("'What changed' states no 'X changed lines (Y added, Z removed)'")
    for size in stated:
        if size != real:
            problems.append(f"'What changed' states {size} changed/added/removed; it is {real}")
    return problems


def try_it_problems(chapter: int, section: list[str]) -> list[str]:
    """The offline run, and the lesson run by hand with a prompt (options in any order)."""
    lesson = f"chapters/ch{chapter:02d}.py"
    wanted = {  # what is shown: how it is found on one line
        f"make lesson N={chapter}": rf"make lesson N={chapter}\b",
        f"{lesson} … --prompt": rf"{re.escape(lesson)}\b.* --prompt\b",
        "--trace": r"--trace\b",
    }
    return [
        f"'Try it' does not show {shown!r}"
        for shown, pattern in wanted.items()
        if not any(re.search(pattern, line) for line in section)
    ]


def exercise_problems(section: list[str]) -> list[str]:
    blocks = fenced_blocks(section)
    fenced = {n for block in blocks for n in range(block.opening, block.closing + 1)}
    items = [n for n, line in enumerate(section) if n not in fenced and NUMBERED_ITEM.match(line)]
    if MIN_EXERCISES <= len(items) <= MAX_EXERCISES:
        return []
    return [f"'Exercises' has {len(items)} numbered items ({MIN_EXERCISES}–{MAX_EXERCISES})"]


def guide_problems(chapter: int, guide: str, lesson: str, previous: str | None) -> list[str]:
    """What is wrong with `guide` as the guide of lesson `chapter` (text `lesson`; `previous`
    is the text of the lesson before it, None for chapter 1), in words; [] when nothing."""
    lines = guide.splitlines()
    blocks = fenced_blocks(lines)
    sections = headings(lines, blocks, level=2)
    problems = structure_problems(chapter, lines, sections)
    required = set(required_sections(chapter))
    end = min((number for number, title in sections if title in required), default=len(lines))
    walkthrough = [block for block in blocks if block.closing < end]
    problems += diagram_problems(lines, walkthrough)
    excerpts = [block for block in walkthrough if block.language == "python"]
    if len(excerpts) < MIN_EXCERPTS:
        problems.append(f"the walkthrough has {len(excerpts)} ```python excerpts (at least 3)")
    for block in excerpts:
        problems += excerpt_problems(chapter, lines, block, lesson.splitlines())
    if previous is not None:
        changed = section_text(lines, sections, f"What changed from chapter {chapter - 1}")
        problems += diff_problems(chapter, changed, previous, lesson)
    problems += try_it_problems(chapter, section_text(lines, sections, "Try it"))
    problems += exercise_problems(section_text(lines, sections, "Exercises"))
    return problems


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def broken_links(documents: dict[str, str]) -> list[str]:
    """Links `chNN.md#anchor` (or `#anchor` within a document) with no such heading there."""
    anchors = {}
    for name, text in documents.items():
        lines = text.splitlines()
        blocks = fenced_blocks(lines)
        titles = [title for level in range(1, 7) for _, title in headings(lines, blocks, level)]
        anchors[name] = {anchor(title) for title in titles}
    return [
        f"{name}: {target or ''}#{fragment}"
        for name, text in documents.items()
        for target, fragment in GUIDE_LINK.findall(text)
        if fragment not in anchors.get(target or name, set())
    ]


# --- the real guides -----------------------------------------------------------------------------


def guide_path(chapter: int) -> Path:
    return LESSONS / f"ch{chapter:02d}.md"


@pytest.mark.parametrize("chapter", REWRITTEN_GUIDES)
def test_a_rewritten_guide_walks_through_its_lesson_exactly(chapter: int) -> None:
    previous = lesson_path(chapter - 1).read_text() if chapter > 1 else None
    lesson = lesson_path(chapter).read_text()

    assert guide_problems(chapter, guide_path(chapter).read_text(), lesson, previous) == []


def test_every_link_to_a_guide_section_lands_on_a_heading() -> None:
    paths = [*sorted(LESSONS.glob("ch*.md")), LESSONS.parent / "README.md"]

    assert broken_links({path.name: path.read_text() for path in paths}) == []


# --- the checker, on a made-up lesson and guide --------------------------------------------------

PREVIOUS = '''\
"""A made-up lesson."""

CHAPTER = 1


def double(number: int) -> int:
    return 2 * number
'''

LESSON = '''\
"""A made-up lesson, one idea later."""

CHAPTER = 2
LIMIT = 3


def double(number: int) -> int:
    return 2 * number


def main() -> int:
    for value in range(LIMIT):
        print(double(value))
    return 0
'''

GUIDE = """\
# Chapter 2 — Counting

Counting by hand is slow.

```text
main --> double
```

Lines 3–4 of `ch02.py`: the constants.

```python
CHAPTER = 2
LIMIT = 3
```

Line 7 of `ch02.py` names the function, and the sentence may go on after it:

```python
def double(number: int) -> int:
```

Lines 12–13 of `ch02.py`, the loop's body, dedented:

```python
for value in range(LIMIT):
    print(double(value))
```

## What changed from chapter 1

`make lesson-diff A=1` shows 11 changed lines (9 added, 2 removed).

## Try it

`make lesson N=2`, then `.venv/bin/python chapters/ch02.py --prompt "go" --trace`.

## Exercises

1. Set `LIMIT = 4`: four lines.
2. Double twice:

   ```python
   print(double(double(value)))
   ```

## Going further: the package

The package counts faster.
"""


def problems_of(guide: str) -> list[str]:
    return guide_problems(2, guide, LESSON, PREVIOUS)


def changed(old: str, new: str, guide: str = GUIDE) -> str:
    assert old in guide, old  # the mutation must apply, or the test proves nothing
    return guide.replace(old, new, 1)


def test_the_made_up_guide_has_no_problems() -> None:
    assert problems_of(GUIDE) == []


def test_an_excerpt_with_one_character_changed_is_caught() -> None:
    problems = problems_of(changed("print(double(value))", "print(double(value) )"))

    assert problems == [
        "the excerpt at guide line 24: it is not a run of consecutive lines of ch02.py "
        "(changed or elided?)"
    ]


def test_an_excerpt_with_a_line_elided_is_caught() -> None:
    guide = changed("    print(double(value))\n", "    ...\n")

    assert [p for p in problems_of(guide) if "changed or elided" in p] != []


def test_an_excerpt_whose_range_is_one_line_off_is_caught_and_located() -> None:
    for wrong in ("Lines 11–12 of", "Lines 12–14 of", "Lines 13–14 of"):
        problems = problems_of(changed("Lines 12–13 of", wrong))

        assert problems == [
            f"the excerpt at guide line 24: it says lines {wrong[6:8]}–{wrong[9:11]} of "
            "ch02.py, but it is lines 12–13"
        ]


def test_a_range_that_takes_in_a_blank_line_more_is_caught() -> None:
    assert problems_of(changed("Lines 3–4 of", "Lines 3–5 of")) == [
        "the excerpt at guide line 11: it says lines 3–5 of ch02.py, but it is lines 3–4"
    ]
    assert problems_of(changed("Lines 3–4 of", "Lines 2–4 of")) != []


def test_an_excerpt_with_a_blank_line_at_an_end_is_caught() -> None:
    guide = changed("Line 7 of `ch02.py` names", "Lines 7–9 of `ch02.py` name")
    whole = "def double(number: int) -> int:\n    return 2 * number\n\n```"
    guide = changed("def double(number: int) -> int:\n```", whole, guide)

    assert problems_of(guide) == [
        "the excerpt at guide line 18: it starts or ends with a blank line (ruff would drop it)"
    ]


def test_a_single_line_reference_and_a_hyphen_range_are_read() -> None:
    assert problems_of(changed("Line 7 of", "Line 8 of")) != []
    assert problems_of(changed("Lines 3–4 of", "Lines 3-4 of")) == []
    assert problems_of(changed("Lines 3–4 of", "The constants are lines 3–4 of")) == []


def test_an_excerpt_without_a_line_reference_or_of_another_lesson_is_caught() -> None:
    assert problems_of(changed("Lines 3–4 of `ch02.py`: the", "The")) == [
        "the excerpt at guide line 11: the sentence before it names no lines "
        "('Lines A–B of `ch02.py`')"
    ]
    assert problems_of(changed("Lines 3–4 of `ch02.py`", "Lines 3–4 of `ch01.py`")) == [
        "the excerpt at guide line 11: it names `ch01.py`, but this guide's lesson is `ch02.py`"
    ]


def test_three_excerpts_are_enough_and_two_are_not() -> None:
    two = changed("```python\ndef double(number: int) -> int:\n```", "")

    assert problems_of(two) == ["the walkthrough has 2 ```python excerpts (at least 3)"]


def test_python_outside_the_walkthrough_is_not_an_excerpt() -> None:
    # The exercise's block is not in the lesson, and is not checked as an excerpt.
    assert "print(double(double(value)))" in GUIDE
    assert problems_of(GUIDE) == []


def test_a_wrong_diff_size_is_caught() -> None:
    guide = changed(
        "11 changed lines (9 added, 2 removed)", "11 changed lines (8 added, 3 removed)"
    )

    assert problems_of(guide) == [
        "'What changed' states (11, 8, 3) changed/added/removed; it is (11, 9, 2)"
    ]
    assert problems_of(changed("shows 11 changed lines (9 added, 2 removed)", "is small")) == [
        "'What changed' states no 'X changed lines (Y added, Z removed)'"
    ]


def test_chapter_1_needs_no_what_changed_section() -> None:
    guide = changed("## What changed from chapter 1", "## The difference")
    guide = changed("# Chapter 2", "# Chapter 1", guide).replace("ch02.py", "ch01.py")
    guide = changed("make lesson N=2", "make lesson N=1", guide)
    lesson = LESSON.replace("CHAPTER = 2", "CHAPTER = 1")

    assert guide_problems(1, guide.replace("CHAPTER = 2", "CHAPTER = 1"), lesson, None) == []
    assert "the section '## What changed from chapter 1' appears 0 times" in problems_of(
        changed("## What changed from chapter 1", "## The difference")
    )


def test_each_required_section_is_needed_once_and_in_order() -> None:
    for title in ("Try it", "Exercises", "Going further: the package"):
        assert f"the section '## {title}' appears 0 times" in problems_of(
            changed(f"## {title}\n", f"## {title}s and more\n")
        )
    going_further = "## Going further: the package\n\nThe package counts faster.\n"
    moved = changed("## Try it", going_further + "\n## Try it", GUIDE.replace(going_further, ""))

    assert problems_of(moved) == [
        "the sections are out of order: ['What changed from chapter 1', "
        "'Going further: the package', 'Try it', 'Exercises'], not ['What changed from chapter 1', "
        "'Try it', 'Exercises', 'Going further: the package']"
    ]


def test_two_to_four_exercises() -> None:
    third = "2. Double twice:"
    assert problems_of(changed(third, "3. Triple.\n4. Halve.\n2. Double twice:")) == []
    assert problems_of(changed(third, "3. a\n4. b\n5. c\n2. Double twice:")) == [
        "'Exercises' has 5 numbered items (2–4)"
    ]
    assert problems_of(changed(third, "Double twice:")) == [
        "'Exercises' has 1 numbered items (2–4)"
    ]


def test_the_diagram_is_needed_and_small() -> None:
    assert problems_of(changed("```text", "```sh")) == [
        "no ```text diagram before the first excerpt"
    ]
    twenty = "\n".join(["|"] * DIAGRAM_MAX_LINES)
    assert problems_of(changed("main --> double", twenty)) == []
    assert problems_of(changed("main --> double", twenty + "\n|")) == [
        "the diagram has 21 lines (at most 20)"
    ]
    assert problems_of(changed("main --> double", "-" * DIAGRAM_MAX_COLUMNS)) == []
    assert len(problems_of(changed("main --> double", "-" * (DIAGRAM_MAX_COLUMNS + 1)))) == 1
    assert len(problems_of(changed("main --> double", "main ──> double"))) == 1


def test_the_problem_comes_before_the_diagram() -> None:
    assert problems_of(changed("Counting by hand is slow.\n", "")) == [
        "no paragraph stating the problem before the diagram"
    ]


def test_try_it_shows_the_offline_run_and_the_real_one() -> None:
    assert problems_of(changed(" --trace", "")) == ["'Try it' does not show '--trace'"]
    assert problems_of(changed('ch02.py --prompt "go"', 'ch02.py -y --prompt "go"')) == []
    assert problems_of(changed('ch02.py --prompt "go"', 'ch02.py "go"')) == [
        "'Try it' does not show 'chapters/ch02.py … --prompt'"
    ]
    assert problems_of(changed("make lesson N=2", "make lesson N=3")) == [
        "'Try it' does not show 'make lesson N=2'"
    ]


def test_a_link_to_a_missing_heading_is_caught_and_a_demoted_one_still_lands() -> None:
    guide = "# Chapter 3 — X\n\n### What bash sees\n\n```sh\n# Not a heading\n```\n"
    documents = {"ch03.md": guide, "README.md": "[a](ch03.md#what-bash-sees)"}

    assert broken_links(documents) == []
    assert broken_links(documents | {"README.md": "[a](ch03.md#not-a-heading)"}) == [
        "README.md: ch03.md#not-a-heading"
    ]
    assert broken_links({"ch03.md": guide + "[b](#what-bash-see)"}) == ["ch03.md: #what-bash-see"]


def test_anchors_are_githubs() -> None:
    assert anchor("Going further: the package") == "going-further-the-package"
    assert anchor("Secrets, whole outputs and oversized arguments") == (
        "secrets-whole-outputs-and-oversized-arguments"
    )
    assert anchor("The lesson: `chapters/ch01.py`") == "the-lesson-chaptersch01py"
