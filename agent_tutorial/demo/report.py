"""Writes the tour's closing report: a few Markdown bullets of facts read from the tool
results the demo got back, so the report is concrete without being an LLM."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from agent_tutorial.demo.script import (
    DEMO_BANNER,
    LISTED_LINES,
    SOURCE_SUFFIXES,
    Outcome,
    Script,
    SourceFile,
    Step,
    StepKind,
)
from agent_tutorial.demo.text import is_tool_error, output_lines

_LEFT_OUT = re.compile(r"^\[(stopped after|\d+ more not shown)", re.MULTILINE)
"""The note glob and grep add when they leave matches out."""


def write_report(script: Script, outcomes: Sequence[Outcome], summaries: int) -> str:
    """A few lines of Markdown about what the tour looked at, from the results it got."""
    facts = [
        _directory_fact(outcomes),
        _listing_fact(outcomes),
        _largest_fact(script.files),
        _reading_fact(outcomes),
        _search_fact(outcomes),
        _line_count_fact(outcomes),
        _delegation_fact(outcomes),
        _skill_fact(outcomes),
        _large_results_fact(outcomes),
        _summary_fact(summaries),
        _plan_fact(outcomes),
        _errors_fact(outcomes),
    ]
    headline = f"{DEMO_BANNER} Tour finished: {_plural(len(outcomes), 'tool call')}."
    if not outcomes:
        headline = f"{DEMO_BANNER} {script.intro}"
    bullets = [f"- {fact}" for fact in facts if fact]
    closing = (
        "This was a fixed script, not an LLM. Point `--model` and `OPENAI_BASE_URL` at a "
        "real endpoint for real answers."
    )
    return "\n".join([headline, "", *bullets, "", closing]) if bullets else headline


def _results(outcomes: Iterable[Outcome], *kinds: StepKind) -> list[tuple[Step, str]]:
    """Successful results of the given kinds that the demo saw."""
    return [
        (outcome.step, outcome.result)
        for outcome in outcomes
        if outcome.step.kind in kinds and outcome.result is not None and not _is_error(outcome)
    ]


def _is_error(outcome: Outcome) -> bool:
    return outcome.result is not None and is_tool_error(outcome.result)


def _wanted_lines(
    results: Iterable[tuple[Step, str]], wanted: Callable[[str], bool]
) -> tuple[list[str], bool]:
    """The wanted output lines, and whether the tool (or `head`) left some out."""
    found: list[str] = []
    capped = False
    for step, result in results:
        lines = output_lines(result)
        found += [line for line in lines if wanted(line)]
        capped = capped or _LEFT_OUT.search(result) is not None
        capped = capped or (step.tool == "bash" and len(lines) >= LISTED_LINES)
    return found, capped


# --- one fact per function, None when the tour has nothing to say about it -----------


def _directory_fact(outcomes: Sequence[Outcome]) -> str | None:
    for _, result in _results(outcomes, "list_dir"):
        entries = [
            line
            for line in output_lines(result)
            if line and not line.startswith("total ") and not line.endswith((" .", " .."))
        ]
        return f"**Top level:** {_plural(len(entries), 'entry', 'entries')} (`ls -la`)."
    return None


def _listing_fact(outcomes: Sequence[Outcome]) -> str | None:
    listings = _results(outcomes, "find")
    paths, capped = _wanted_lines(listings, _is_source_path)
    if not paths:
        return "**Found** no Python or Markdown files." if listings else None
    python = sum(path.endswith(".py") for path in paths)
    count = f"at least {len(paths)}" if capped else str(len(paths))
    files = "source file" if count == "1" else "source files"
    return f"**Found** {count} {files}: {python} Python, {len(paths) - python} Markdown."


def _is_source_path(line: str) -> bool:
    return line.endswith(SOURCE_SUFFIXES)


def _largest_fact(files: Sequence[SourceFile]) -> str | None:
    if not files:
        return None
    shown = ", ".join(f"`{file.path}` ({file.size:,} B)" for file in files[:3])
    return f"**Largest:** {shown}."


def _reading_fact(outcomes: Sequence[Outcome]) -> str | None:
    reads = _results(outcomes, "read", "skim")
    if not reads:
        return None
    lines = sum(len(output_lines(result)) for _, result in reads)
    files = len({_subject(step) for step, _ in reads})
    return f"**Read** {_plural(lines, 'line')} from {_plural(files, 'file')}."


def _subject(step: Step) -> str:
    return str(step.arguments.get("path") or step.arguments.get("command") or "")


def _search_fact(outcomes: Sequence[Outcome]) -> str | None:
    searches = _results(outcomes, "search")
    if not searches:
        return None
    matches, capped = _wanted_lines(searches, _is_grep_match)
    count = f"at least {len(matches):,}" if capped else f"{len(matches):,}"
    where = f"in {len(searches)} searches" if len(searches) > 1 else "with grep"
    return f"**Matched** {count} top-level `class`/`def` lines {where}."


def _is_grep_match(line: str) -> bool:
    return re.match(r"[^:\n]+:\d+:", line) is not None


def _line_count_fact(outcomes: Sequence[Outcome]) -> str | None:
    for _, result in _results(outcomes, "count_lines"):
        counts = [re.match(r"\s*(\d+)\s+(.+)", line) for line in output_lines(result)]
        found = [(int(m[1]), m[2]) for m in counts if m]
        files = [(lines, name) for lines, name in found if name != "total"]
        if files:
            total = sum(lines for lines, _ in files)
            largest = "largest file" if len(files) == 1 else f"{len(files)} largest files"
            return f"**Measured** {_plural(total, 'line')} in the {largest} (`wc -l`)."
    return None


def _delegation_fact(outcomes: Sequence[Outcome]) -> str | None:
    for _, result in _results(outcomes, "delegate"):
        answer = result.removeprefix(DEMO_BANNER).strip().splitlines()
        return f"**Subagent:** {answer[0] if answer else '(no answer)'}"
    return None


def _skill_fact(outcomes: Sequence[Outcome]) -> str | None:
    for step, _ in _results(outcomes, "skill"):
        return f"**Skill** `{step.arguments['name']}` loaded from the catalog."
    return None


def _large_results_fact(outcomes: Sequence[Outcome]) -> str | None:
    parts = [_bulk_result_part(result) for _, result in _results(outcomes, "bulk")]
    large = [outcome for outcome in outcomes if outcome.step.kind == "large_read"]
    if large:
        parts.append(_large_reads_part(large))
    return f"**Large results:** {'; '.join(parts)}." if parts else None


def _bulk_result_part(result: str) -> str:
    persisted = re.search(r"^path: (\S+)\noriginal_bytes: (\d+)", result, re.MULTILINE)
    if persisted:
        size = int(persisted[2])
        return f"one result of {size:,} B was persisted to `{persisted[1]}`"
    return f"one result of {_utf8_len(result):,} B came back whole"


def _large_reads_part(large: Sequence[Outcome]) -> str:
    seen = [f"{_utf8_len(result):,} B" for _, result in _results(large, "large_read")]
    unseen = sum(outcome.result is None for outcome in large)
    details = seen + ([f"{unseen} folded into the summary before I saw it"] if unseen else [])
    return f"{len(large)} reads of about 20 KB ({', '.join(details)})"


def _summary_fact(summaries: int) -> str | None:
    if not summaries:
        return None
    times = "once" if summaries == 1 else f"{summaries} times"
    return (
        f"**Compaction:** the history was summarized {times}; I answered the summary "
        "request extractively."
    )


def _plan_fact(outcomes: Sequence[Outcome]) -> str | None:
    plans = _results(outcomes, "plan")
    progress = re.search(r"\((\d+)/(\d+) completed\)", plans[-1][1]) if plans else None
    if progress is None:
        return None
    return f"**Plan:** {progress[1]}/{progress[2]} steps completed (`todo_write`)."


def _errors_fact(outcomes: Sequence[Outcome]) -> str | None:
    errors = [outcome.result for outcome in outcomes if _is_error(outcome)]
    if not errors:
        return None
    first = " ".join((errors[0] or "").split())
    example = first if len(first) <= 160 else first[:159] + "…"
    return f"**{_plural(len(errors), 'call')} failed**, e.g. {example}"


def _plural(count: int, singular: str, plural: str = "") -> str:
    return f"{count:,} {singular if count == 1 else plural or singular + 's'}"


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))
