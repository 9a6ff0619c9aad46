"""The offline demo model (`--model demo`): a deterministic script, not an LLM, that tours
the workspace with whichever tools the request offers and ends with a short report.

With `long_session=True` (chapter 8) the tour is long and reads large enough that every
compaction layer fires: persistence, snip, micro and the summary.
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

import orjson

from agent_tutorial.adapters.filesystem import SKIPPED_DIRECTORIES, is_binary, walk_workspace
from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    assistant_message,
    to_wire,
    tool_call,
)
from agent_tutorial.core.model import FinishReason, ModelReply, ModelRequest, ToolSpec, Usage

DEMO_BANNER = "[scripted demo model — not an LLM]"
"""Every tour's first text and its final report start with this, so nobody mistakes it."""
SUBAGENT_MARKER = "[demo subagent]"
"""Starts the prompt of the demo's own `task` call, so the child run knows its script."""

SOURCE_SUFFIXES = (".py", ".md")
DEFINITION_PATTERN = r"^(class|def) "
LISTED_LINES = 40
"""How many lines the chapter-1 `find`/`grep`/`head` commands show."""
READ_LINES = 80
SKIM_LINES = 12
STREAM_PIECES = 3
BYTES_PER_TOKEN = 4

# The long tour is sized against chapter 8's thresholds (see chapters/ch08.md).
LONG_TOUR_ROUNDS_BEFORE_BULK = 54
"""Snip fires above 50 message groups; each tool round is one group, the prompt another."""
BULK_RESULT_MIN_BYTES = 31_000
"""A result strictly larger than 30,000 bytes is persisted; keep a margin above it."""
BULK_CAT_MIN_BYTES = 36_000
"""bash keeps 30,000 bytes of output plus a note, so feed it clearly more than that."""
LARGE_READS = 3
LARGE_READ_TARGET_BYTES = 20_000
LARGE_READ_MIN_BYTES = 15_000
"""Three reads this size make the last three tool groups exceed the 50,000-byte summary
threshold, while each stays under the 30,000-byte persistence threshold."""
READ_FILE_MAX_LINES = 2_000
"""read_file's default line limit: a read without `limit` returns at most this many."""

StepKind: TypeAlias = Literal[
    "plan",
    "find",
    "list_dir",
    "read",
    "skim",
    "search",
    "count_lines",
    "delegate",
    "skill",
    "bulk",
    "large_read",
]


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    """Relative to the workspace, `/`-separated."""
    size: int


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call of the script; `narration` is the text sent along with it."""

    kind: StepKind
    tool: str
    arguments: dict[str, object]
    narration: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A step and the result it got; None when compaction folded the result into a summary
    before the demo saw it."""

    step: Step
    result: str | None


@dataclass(frozen=True, slots=True)
class Script:
    intro: str
    steps: tuple[Step, ...]
    files: tuple[SourceFile, ...]


class DemoModel:
    """A `ModelClient` that plays a fixed, deterministic script. It is not an LLM.

    It keeps its own place in the script, because compaction may rewrite the request
    history, and reads the tool results it gets back only to make its report concrete.
    Chapter 8's summary requests are answered by the extractive summarizer without moving
    the script on; a subagent started by the demo's own `task` call makes one read.
    """

    def __init__(self, workspace: Path, *, long_session: bool = False) -> None:
        self.workspace = workspace
        self.long_session = long_session
        self._call_numbers = itertools.count(1)
        self._tour: _Tour | None = None

    def complete(self, request: ModelRequest) -> ModelReply:
        if _is_summary_request(request):
            message = _summary_answer(_summarized_history(request.messages))
            if self._tour is not None:
                self._tour.summaries_answered += 1
        elif (task_prompt := _subagent_prompt(request.messages)) is not None:
            message = self._subagent_step(task_prompt, request)
        else:
            message = self._tour_step(request)
        finish: FinishReason = "tool_calls" if message.tool_calls else "stop"
        _stream(message.content or "", request.on_text)
        return ModelReply(message, finish, usage=_usage(request, message))

    def _tour_step(self, request: ModelRequest) -> AssistantMessage:
        if self._tour is None or _ends_with_prompt(request.messages):
            tools = {spec.name: spec for spec in request.tools}
            self._tour = _Tour(plan_tour(self.workspace, tools, long_session=self.long_session))
        tour = self._tour
        tour.take_result(request.messages)
        step = tour.next_step({spec.name for spec in request.tools})
        if step is None:
            self._tour = None
            return assistant_message(tour.report())
        call_id = self._next_call_id()
        tour.expect(step, call_id)
        call = tool_call(call_id, step.tool, _json(step.arguments))
        return assistant_message(tour.narration(step), [call])

    def _subagent_step(self, task_prompt: str, request: ModelRequest) -> AssistantMessage:
        path = _quoted_path(task_prompt)
        results = [m.content for m in request.messages if isinstance(m, ToolMessage)]
        if results:
            return assistant_message(_subagent_report(path, results[-1]))
        offered = {spec.name for spec in request.tools}
        if "read_file" in offered:
            arguments: dict[str, object] = {"path": path, "limit": 20}
            call = tool_call(self._next_call_id(), "read_file", _json(arguments))
        elif "bash" in offered:
            command = f"head -n 20 -- {shlex.quote(path)}"
            call = tool_call(self._next_call_id(), "bash", _json({"command": command}))
        else:
            return assistant_message(f"{DEMO_BANNER} Subagent: no tool to read `{path}` with.")
        return assistant_message(f"{DEMO_BANNER} Subagent: reading `{path}`.", [call])

    def _next_call_id(self) -> str:
        return f"demo-call-{next(self._call_numbers)}"


class _Tour:
    """One prompt's walk through a script: where it is, and what each step returned."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.outcomes: list[Outcome] = []
        self.summaries_answered = 0
        self._position = 0
        self._waiting: tuple[Step, str] | None = None

    def take_result(self, messages: Sequence[ChatMessage]) -> None:
        """Record the result of the call made last, if the request still holds it."""
        if self._waiting is None:
            return
        step, call_id = self._waiting
        self._waiting = None
        self.outcomes.append(Outcome(step, _result_for(call_id, messages)))

    def next_step(self, offered: set[str]) -> Step | None:
        steps = self.script.steps
        while self._position < len(steps):
            step = steps[self._position]
            self._position += 1
            if step.tool in offered:
                return step
        return None

    def expect(self, step: Step, call_id: str) -> None:
        self._waiting = (step, call_id)

    def narration(self, step: Step) -> str | None:
        if not self.outcomes:  # the first reply says what this is
            return " ".join(filter(None, (DEMO_BANNER, self.script.intro, step.narration)))
        return step.narration

    def report(self) -> str:
        return write_report(self.script, self.outcomes, self.summaries_answered)


# --- planning ------------------------------------------------------------------------


BASE_PHASES = (
    "List the source files",
    "Read the largest files",
    "Search for definitions",
    "Measure with wc and ls",
    "Write the report",
)
LONG_PHASES = (
    "List the source files",
    "Skim and outline each source file",
    "Read the largest files in full",
    "Write the report",
)


def plan_tour(workspace: Path, tools: Mapping[str, ToolSpec], *, long_session: bool) -> Script:
    """The script for one prompt, from the tools offered and the files on disk."""
    files = find_source_files(workspace)
    if "glob" in tools and "read_file" in tools:
        if long_session and "grep" in tools:
            return _long_tour(workspace, files, tools)
        return _file_tour(workspace, files, tools)
    if "bash" in tools:
        return _bash_tour(files, tools)
    return Script("No tools were offered, so there is nothing to look at.", (), files)


def find_source_files(workspace: Path) -> tuple[SourceFile, ...]:
    """Python and Markdown files, largest first (ties by path), seen as glob sees them."""
    found = [
        SourceFile(entry.path.relative_to(workspace.resolve()).as_posix(), size)
        for entry in walk_workspace(workspace, workspace.resolve())
        if not entry.is_dir
        and not entry.is_symlink
        and entry.path.name.endswith(SOURCE_SUFFIXES)
        and (size := _size_of(entry.path)) is not None
    ]
    return tuple(sorted(found, key=lambda file: (-file.size, file.path)))


def _size_of(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:  # vanished while we looked
        return None


class _ScriptBuilder:
    """Collects steps, leaving out any whose tool (or argument names) the request lacks."""

    def __init__(self, tools: Mapping[str, ToolSpec], phases: Sequence[str] = ()) -> None:
        self.tools = tools
        self.phases = phases
        self.steps: list[Step] = []

    def add(
        self, kind: StepKind, tool: str, arguments: dict[str, object], narration: str = ""
    ) -> None:
        spec = self.tools.get(tool)
        if spec is not None and _accepts(spec, arguments):
            self.steps.append(Step(kind, tool, arguments, narration or None))

    def phase(self, current: int) -> None:
        """Update the plan: phases before `current` done, `current` in progress."""
        todos = [
            {"content": phase, "status": _phase_status(index, current)}
            for index, phase in enumerate(self.phases)
        ]
        self.add("plan", "todo_write", {"todos": todos})

    def finish_plan(self) -> None:
        self.phase(len(self.phases))

    def build(self, intro: str, files: Sequence[SourceFile]) -> Script:
        return Script(intro, tuple(self.steps), tuple(files))


def _phase_status(index: int, current: int) -> str:
    if index < current:
        return "completed"
    return "in_progress" if index == current else "pending"


def _accepts(spec: ToolSpec, arguments: Mapping[str, object]) -> bool:
    properties = spec.parameters.get("properties", {})
    required = spec.parameters.get("required", [])
    return set(arguments) <= set(properties) and set(required) <= set(arguments)


def _bash_tour(files: Sequence[SourceFile], tools: Mapping[str, ToolSpec]) -> Script:
    script = _ScriptBuilder(tools)
    script.add("list_dir", "bash", {"command": "ls -la"}, "Looking around with bash first.")
    script.add("find", "bash", {"command": _find_command()}, "Finding the source files.")
    if files:
        script.add("count_lines", "bash", {"command": _wc_command(files[:5])})
        largest = shlex.quote(files[0].path)
        command = f"head -n {LISTED_LINES} -- {largest}"
        script.add("read", "bash", {"command": command}, f"Reading the top of `{files[0].path}`.")
    script.add("search", "bash", {"command": _grep_command()}, "Searching for definitions.")
    intro = "Only bash is offered, so I will tour this workspace with shell commands."
    return script.build(intro, files)


def _find_command() -> str:
    pruned = " -o ".join(f"-name {name}" for name in sorted(SKIPPED_DIRECTORIES))
    return (
        f"find . \\( {pruned} \\) -prune -o -type f \\( -name '*.py' -o -name '*.md' \\) "
        f"-print | sort | head -n {LISTED_LINES}"
    )


def _grep_command() -> str:
    excluded = ",".join(sorted(SKIPPED_DIRECTORIES))
    return (
        f"grep -rnE '{DEFINITION_PATTERN}' --include='*.py' --exclude-dir={{{excluded}}} . "
        f"| head -n {LISTED_LINES}"
    )


def _wc_command(files: Iterable[SourceFile]) -> str:
    return "wc -l -- " + " ".join(shlex.quote(file.path) for file in files)


def _file_tour(
    workspace: Path, files: Sequence[SourceFile], tools: Mapping[str, ToolSpec]
) -> Script:
    script = _ScriptBuilder(tools, BASE_PHASES)
    script.phase(0)
    _add_listing(script)
    _add_skill(script, workspace)
    script.phase(1)
    for index, file in enumerate(files[:2]):
        narration = "Reading the largest files." if index == 0 else ""
        script.add("read", "read_file", {"path": file.path, "limit": READ_LINES}, narration)
    if len(files) > 2:
        _add_delegation(script, files[2])
    script.phase(2)
    arguments: dict[str, object] = {"pattern": DEFINITION_PATTERN, "glob": "*.py"}
    script.add("search", "grep", arguments, "Searching for top-level definitions.")
    script.phase(3)
    if files:
        script.add("count_lines", "bash", {"command": _wc_command(files[:5])}, "Measuring them.")
    script.add("list_dir", "bash", {"command": "ls -la"})
    script.finish_plan()
    intro = (
        "I will list the source files, read the largest ones, search for definitions, "
        "measure them and report."
    )
    return script.build(intro, files)


def _add_listing(script: _ScriptBuilder) -> None:
    script.add("find", "glob", {"pattern": "**/*.py"}, "Listing the source files.")
    script.add("find", "glob", {"pattern": "**/*.md"})


def _add_skill(script: _ScriptBuilder, workspace: Path) -> None:
    if "load_skill" not in script.tools:
        return
    from agent_tutorial.features.skills import SkillRegistry  # only chapters with skills

    names = sorted(SkillRegistry.discover(workspace).names())
    if names:
        narration = f"The skill catalog lists `{names[0]}`; loading it first."
        script.add("skill", "load_skill", {"name": names[0]}, narration)


def _add_delegation(script: _ScriptBuilder, file: SourceFile) -> None:
    arguments: dict[str, object] = {
        "description": f"Skim {file.path}",
        "prompt": f"{SUBAGENT_MARKER} Read the first lines of `{file.path}` and report "
        "in one sentence how it starts.",
    }
    script.add("delegate", "task", arguments, f"Handing `{file.path}` to a subagent.")


def _long_tour(
    workspace: Path, files: Sequence[SourceFile], tools: Mapping[str, ToolSpec]
) -> Script:
    script = _ScriptBuilder(tools, LONG_PHASES)
    script.phase(0)
    _add_listing(script)
    _add_skill(script, workspace)
    script.phase(1)
    if files:
        _add_delegation(script, files[0])
    _add_skims_and_outlines(script, files)
    script.phase(2)
    _add_bulk_read(script, workspace, files)
    if files:
        script.add("count_lines", "bash", {"command": _wc_command(files[:5])})
    _add_large_reads(script, workspace, files)
    script.finish_plan()
    intro = (
        "This is the long chapter-8 tour: many small reads and searches, then a few large "
        "ones, so that every compaction layer has something to do."
    )
    return script.build(intro, files)


def _add_skims_and_outlines(script: _ScriptBuilder, files: Sequence[SourceFile]) -> None:
    """Many cheap, still useful rounds: the head of each file, then its definitions."""
    for index, file in enumerate(files):
        if len(script.steps) >= LONG_TOUR_ROUNDS_BEFORE_BULK:
            return
        narration = "Skimming each file and outlining its definitions." if index == 0 else ""
        script.add("skim", "read_file", {"path": file.path, "limit": SKIM_LINES}, narration)
        if file.path.endswith(".py"):
            arguments: dict[str, object] = {"pattern": DEFINITION_PATTERN, "path": file.path}
            script.add("search", "grep", arguments)


def _add_bulk_read(script: _ScriptBuilder, workspace: Path, files: Sequence[SourceFile]) -> None:
    """One result over 30,000 bytes: the largest file whole, or several through `cat`."""
    if files and "read_file" in script.tools:
        lines = _text_lines(workspace / files[0].path)
        if _numbered_bytes(lines[:READ_FILE_MAX_LINES], first=1) >= BULK_RESULT_MIN_BYTES:
            narration = f"Reading the largest file, `{files[0].path}`, in full."
            script.add("bulk", "read_file", {"path": files[0].path}, narration)
            return
    chosen = _largest_covering(files, BULK_CAT_MIN_BYTES)
    if chosen:
        command = "cat -- " + " ".join(shlex.quote(file.path) for file in chosen)
        narration = f"Reading the {len(chosen)} largest files in full."
        script.add("bulk", "bash", {"command": command}, narration)


def _add_large_reads(script: _ScriptBuilder, workspace: Path, files: Sequence[SourceFile]) -> None:
    """Three reads of about 20 KB each, in consecutive rounds."""
    windows = _read_windows(workspace, files) if "read_file" in script.tools else []
    if len(windows) < LARGE_READS and "bash" in script.tools:
        slices = _cat_slices(files)
        if len(slices) == LARGE_READS:
            for index, command in enumerate(slices):
                narration = "Reading the sources in 20 KB slices." if index == 0 else ""
                script.add("large_read", "bash", {"command": command}, narration)
            return
    for index, arguments in enumerate(windows):
        narration = "Reading the largest files section by section." if index == 0 else ""
        script.add("large_read", "read_file", arguments, narration)


def _read_windows(workspace: Path, files: Sequence[SourceFile]) -> list[dict[str, object]]:
    """read_file arguments for up to three windows whose output is 15–20 KB each."""
    windows: list[dict[str, object]] = []
    for file in files:
        if file.size < LARGE_READ_MIN_BYTES:
            break  # files are largest first
        lines = _text_lines(workspace / file.path)
        start = 0
        while len(windows) < LARGE_READS:
            count = _lines_within(lines, start, LARGE_READ_TARGET_BYTES)
            if _numbered_bytes(lines[start : start + count], start + 1) < LARGE_READ_MIN_BYTES:
                break
            windows.append({"path": file.path, "offset": start + 1, "limit": count})
            start += count
    return windows


def _lines_within(lines: Sequence[str], start: int, budget: int) -> int:
    """How many lines from `start` read_file can show within `budget` bytes."""
    used = 0
    for count, line in enumerate(lines[start:]):
        used += _numbered_line_bytes(line, start + count + 1)
        if used > budget:
            return count
    return len(lines) - start


def _numbered_bytes(lines: Sequence[str], first: int) -> int:
    return sum(_numbered_line_bytes(line, first + index) for index, line in enumerate(lines))


def _numbered_line_bytes(line: str, number: int) -> int:
    # read_file shows "<number>\t<text>" per line, joined by newlines (a close estimate:
    # the number is padded to the widest one shown).
    return len(str(number)) + 2 + len(line.encode("utf-8"))


def _text_lines(path: Path) -> list[str]:
    """The file's lines as read_file numbers them (split on newlines only), or [] for a
    file it would refuse."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if is_binary(data):
        return []
    lines = data.decode("utf-8").split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _largest_covering(files: Sequence[SourceFile], minimum: int) -> list[SourceFile]:
    """The fewest largest files whose sizes add up to `minimum`, or [] if all cannot."""
    chosen: list[SourceFile] = []
    for file in files:
        chosen.append(file)
        if sum(chosen_file.size for chosen_file in chosen) >= minimum:
            return chosen
    return []


def _cat_slices(files: Sequence[SourceFile]) -> list[str]:
    """Commands printing consecutive 20 KB slices of the largest files concatenated."""
    slices = []
    for index in range(LARGE_READS):
        end = (index + 1) * LARGE_READ_TARGET_BYTES
        chosen = _largest_covering(files, end)
        if not chosen:
            break
        names = " ".join(shlex.quote(file.path) for file in chosen)
        start = index * LARGE_READ_TARGET_BYTES + 1
        slices.append(f"cat -- {names} | tail -c +{start} | head -c {LARGE_READ_TARGET_BYTES}")
    return slices


# --- the report ----------------------------------------------------------------------


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
    return outcome.result is not None and outcome.result.startswith("Error [")


def _listing_fact(outcomes: Sequence[Outcome]) -> str | None:
    listings = _results(outcomes, "find")
    paths, capped = _wanted_lines(listings, _is_source_path)
    if not paths:
        return "**Found** no Python or Markdown files." if listings else None
    python = sum(path.endswith(".py") for path in paths)
    count = f"at least {len(paths)}" if capped else str(len(paths))
    return f"**Found** {count} source files: {python} Python, {len(paths) - python} Markdown."


def _is_source_path(line: str) -> bool:
    return line.endswith(SOURCE_SUFFIXES)


def _wanted_lines(
    results: Iterable[tuple[Step, str]], wanted: Callable[[str], bool]
) -> tuple[list[str], bool]:
    """The wanted output lines, and whether the tool (or `head`) left some out."""
    found: list[str] = []
    capped = False
    for step, result in results:
        lines = _output_lines(result)
        found += [line for line in lines if wanted(line)]
        capped = capped or _LEFT_OUT.search(result) is not None
        capped = capped or (step.tool == "bash" and len(lines) >= LISTED_LINES)
    return found, capped


_LEFT_OUT = re.compile(r"^\[(stopped after|\d+ more not shown)", re.MULTILINE)


def _directory_fact(outcomes: Sequence[Outcome]) -> str | None:
    for _, result in _results(outcomes, "list_dir"):
        entries = [
            line
            for line in _output_lines(result)
            if line and not line.startswith("total ") and not line.endswith((" .", " .."))
        ]
        return f"**Top level:** {_plural(len(entries), 'entry', 'entries')} (`ls -la`)."
    return None


def _largest_fact(files: Sequence[SourceFile]) -> str | None:
    if not files:
        return None
    shown = ", ".join(f"`{file.path}` ({file.size:,} B)" for file in files[:3])
    return f"**Largest:** {shown}."


def _reading_fact(outcomes: Sequence[Outcome]) -> str | None:
    reads = _results(outcomes, "read", "skim")
    if not reads:
        return None
    lines = sum(len(_output_lines(result)) for _, result in reads)
    files = len({_subject(step) for step, _ in reads})
    return f"**Read** {_plural(lines, 'line')} from {_plural(files, 'file')}."


def _search_fact(outcomes: Sequence[Outcome]) -> str | None:
    searches = _results(outcomes, "search")
    matches, capped = _wanted_lines(searches, _is_grep_match)
    if not searches:
        return None
    count = f"at least {len(matches):,}" if capped else f"{len(matches):,}"
    where = f"in {len(searches)} searches" if len(searches) > 1 else "with grep"
    return f"**Matched** {count} top-level `class`/`def` lines {where}."


def _is_grep_match(line: str) -> bool:
    return re.match(r"[^:\n]+:\d+:", line) is not None


def _line_count_fact(outcomes: Sequence[Outcome]) -> str | None:
    for _, result in _results(outcomes, "count_lines"):
        counts = [re.match(r"\s*(\d+)\s+(.+)", line) for line in _output_lines(result)]
        found = [(int(m[1]), m[2]) for m in counts if m]
        files = [(lines, name) for lines, name in found if name != "total"]
        if files:
            total = sum(lines for lines, _ in files)
            return f"**Measured** {total:,} lines in the {len(files)} largest files (`wc -l`)."
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
    parts = []
    for _, result in _results(outcomes, "bulk"):
        persisted = re.search(r"^path: (\S+)\noriginal_bytes: (\d+)", result, re.MULTILINE)
        if persisted:
            size = int(persisted[2])
            parts.append(f"one result of {size:,} B was persisted to `{persisted[1]}`")
        else:
            parts.append(f"one result of {_utf8_len(result):,} B came back whole")
    large = [outcome for outcome in outcomes if outcome.step.kind == "large_read"]
    if large:
        seen = [f"{_utf8_len(result):,} B" for _, result in _results(large, "large_read")]
        unseen = sum(outcome.result is None for outcome in large)
        details = seen + ([f"{unseen} folded into the summary before I saw it"] if unseen else [])
        parts.append(f"{len(large)} reads of about 20 KB ({', '.join(details)})")
    return f"**Large results:** {'; '.join(parts)}." if parts else None


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


def _output_lines(result: str) -> list[str]:
    """The lines a tool printed, without bash's status line or notes in brackets."""
    return [line for line in result.splitlines() if not line.startswith("[")]


def _subject(step: Step) -> str:
    return str(step.arguments.get("path") or step.arguments.get("command") or "")


# --- summary and subagent requests ---------------------------------------------------


def _is_summary_request(request: ModelRequest) -> bool:
    if request.tools or not request.messages:
        return False
    first = request.messages[0]
    if not isinstance(first, SystemMessage):
        return False
    from agent_tutorial.features.compaction import SUMMARY_SYSTEM_PROMPT  # chapter 8 only

    return first.content == SUMMARY_SYSTEM_PROMPT


def _summarized_history(messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
    """The history a summary request is about: after the system prompt, and without the
    closing user instruction ("summarise now") that `ModelHistorySummarizer` appends."""
    history = messages[1:]
    return history[:-1] if history and isinstance(history[-1], UserMessage) else history


def _summary_answer(history: Sequence[ChatMessage]) -> AssistantMessage:
    from agent_tutorial.features.compaction import ExtractiveSummarizer

    return assistant_message(_json(ExtractiveSummarizer().summarize(history).to_json_object()))


def _subagent_prompt(messages: Sequence[ChatMessage]) -> str | None:
    first_prompt = next((m.content for m in messages if isinstance(m, UserMessage)), None)
    if first_prompt is not None and first_prompt.startswith(SUBAGENT_MARKER):
        return first_prompt
    return None


def _quoted_path(task_prompt: str) -> str:
    found = re.search(r"`([^`]+)`", task_prompt)
    return found[1] if found else "."


def _subagent_report(path: str, result: str) -> str:
    if result.startswith("Error ["):
        return f"{DEMO_BANNER} Could not read `{path}`: {result.splitlines()[0]}"
    lines = [line.split("\t", 1)[-1].strip() for line in _output_lines(result)]
    opening = next((text for line in lines if (text := line.strip("\"'# "))), "")
    return f"{DEMO_BANNER} Read {len(lines)} lines of `{path}`; it opens with: {opening[:100]}"


# --- plumbing ------------------------------------------------------------------------


def _ends_with_prompt(messages: Sequence[ChatMessage]) -> bool:
    """True when the newest non-system message is a user prompt: a new run has begun. The
    request-only nudge chapter 8 adds after a summary is not a prompt."""
    from agent_tutorial.features.compaction import CONTINUE_AFTER_SUMMARY

    for message in reversed(messages):
        if isinstance(message, UserMessage) and message.content == CONTINUE_AFTER_SUMMARY:
            continue
        if not isinstance(message, SystemMessage):
            return isinstance(message, UserMessage)
    return False


def _result_for(call_id: str, messages: Sequence[ChatMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return message.content
    return None


def _stream(text: str, on_text: Callable[[str], None] | None) -> None:
    """Send `text` in a few word-aligned pieces, the way a streaming endpoint would."""
    if not text or on_text is None:
        return
    words = text.split(" ")
    size = math.ceil(len(words) / STREAM_PIECES)
    for start in range(0, len(words), size):
        end = start + size
        on_text(" ".join(words[start:end]) + (" " if end < len(words) else ""))


def _usage(request: ModelRequest, message: AssistantMessage) -> Usage:
    """Plausible token counts: UTF-8 bytes of the wire JSON over four."""
    sent = sum(len(orjson.dumps(to_wire(m))) for m in request.messages)
    sent += sum(len(orjson.dumps(spec.to_wire())) for spec in request.tools)
    prompt = math.ceil(sent / BYTES_PER_TOKEN)
    completion = math.ceil(len(orjson.dumps(to_wire(message))) / BYTES_PER_TOKEN)
    return Usage(prompt, completion, prompt + completion)


def _json(value: object) -> str:
    return orjson.dumps(value).decode("utf-8")


def _plural(count: int, singular: str, plural: str = "") -> str:
    return f"{count:,} {singular if count == 1 else plural or singular + 's'}"


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))
