"""Terminal rendering of agent events with rich: streamed answers on stdout, one compact
activity line per tool call, compaction step or warning on stderr."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import orjson
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.status import Status
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.live import Live

from agent_tutorial.core.events import (
    ASKING_SOURCE,
    CompactionApplied,
    Event,
    ModelReplied,
    NestedEvent,
    Notice,
    PermissionDecided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStarted,
)
from agent_tutorial.core.text import printable
from agent_tutorial.core.tools import CommandOutcome, ToolResult
from agent_tutorial.diff_view import diff_rows
from agent_tutorial.features.bash import signal_name
from agent_tutorial.features.sessions import DamagedLine, SessionInfo
from agent_tutorial.layout import shorten_at_word, wrap_keeping_units
from agent_tutorial.markdown_blocks import MarkdownBlocks
from agent_tutorial.stream_wrap import WordWrap

SUBJECT_WIDTH = 60
MIN_SUBJECT_WIDTH = 12  # below this a subject says too little: it is left out
PADDING = re.compile(r" +\n")
"""Spaces rich adds to fill a line to the width, before its end."""
ROUTINE_LAYERS = frozenset({"snip", "micro"})
LAYER_ORDER = ("persist", "snip", "micro", "summary", "reactive")
EDIT_DIFF_ROWS = 6
"""Rows of an edit's diff shown under its tool line (the approval showed it whole)."""
SELF_EXPLAINED_ERRORS = frozenset({"interrupted", "permission_denied"})
"""Tool errors with no reason line: the user caused the first, and the `⚖ deny` line
above the tool line already gives the second's reason."""
NOTICE_STYLES = {"info": "cyan", "warning": "yellow", "error": "bold red"}


def notice_line(notice: Notice) -> Text:
    """A warning or an error says which it is in words, as every other one on stderr does
    (`warning: …`, `error: …`), so it reads the same without colour; information is plain."""
    style = NOTICE_STYLES[notice.level]
    label = "" if notice.level == "info" else f"{notice.level}: "
    return Text.assemble((label, style), (printable(notice.text), style))


def make_consoles(*, no_color: bool = False) -> tuple[Console, Console]:
    """(stdout, stderr) consoles; rich itself honours NO_COLOR and plain pipes.

    On a terminal rich wraps every line at the terminal's current width (words, Markdown,
    tables, panels); soft wrapping there would leave lines unwrapped and anything rich
    renders line by line (a live answer, a panel) cropped at the right edge. To a pipe or
    file, lines stay whole for whatever reads them.
    """
    out = Console(file=sys.stdout, no_color=no_color or None)
    err = Console(file=sys.stderr, stderr=True, no_color=no_color or None)
    for console in (out, err):
        console.soft_wrap = not console.is_terminal
    return out, err


def format_bytes(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def shorten(text: str, width: int = SUBJECT_WIDTH) -> str:
    line = printable(" ".join(text.split()))
    return line if len(line) <= width else line[: width - 1] + "…"


def tool_line(
    name: str, subject: str, result: ToolResult, seconds: float, width: int | None = None
) -> Text:
    """`• read_file README.md  2.1 KB  0.01s`, `✗ bash make  exit 2  sandboxed  0.40s` or
    `✗ bash make  Error [timeout]  sandboxed  120.0s` (a command confined by the sandbox
    says so). With a `width`, the subject is shortened so the line fits it instead of
    wrapping; too narrow for a useful part of it (40 columns), the time goes first, then
    the subject."""
    failed = _failed(result)
    line = Text()
    line.append("✗ " if failed else "• ", style="red" if failed else "green")
    line.append(printable(name), style="bold")
    tail = _tool_outcome(result, seconds)
    least = MIN_SUBJECT_WIDTH + 1 if subject else 0
    if width is not None and len(line) + least + len(tail) > width:
        tail = _tool_outcome(result, None)
    room = SUBJECT_WIDTH if width is None else width - len(line) - len(tail) - 1
    if subject and room >= MIN_SUBJECT_WIDTH:
        line.append(f" {shorten(subject, min(room, SUBJECT_WIDTH))}")
    return line + tail


def tool_details(result: ToolResult, width: int) -> list[Text]:
    """What shows under a tool line: a tool error's reason on one line, and the last lines
    of a command's output (at most five, dimmed), each cut to `width`."""
    lines: list[Text] = []
    reason = _error_reason(result)
    if reason:
        lines.append(Text(_cut(f"  {reason}", width), style="red"))
    if result.change is not None and not result.is_error:
        diff = diff_rows(result.change, max_rows=EDIT_DIFF_ROWS)
        lines += [_cut_text(row, width) for row in diff.split("\n")]
    if result.command is not None:
        lines += [
            Text(_cut(f"  {line.expandtabs(4)}", width), style="dim")
            for line in result.command.output_tail
        ]
    return lines


def _failed(result: ToolResult) -> bool:
    return result.is_error or (result.command is not None and result.command.failed)


def _error_reason(result: ToolResult) -> str:
    """The first line of the reason a tool error gave the model (`Error [code]: reason`)."""
    if not result.is_error or result.error_code in SELF_EXPLAINED_ERRORS:
        return ""
    _, _, reason = result.content.partition(f"Error [{result.error_code}]: ")
    return " ".join((reason or result.content).splitlines()[:1])


def _cut_text(row: Text, width: int) -> Text:
    """`row` indented by two and cut to `width` (it is `printable` already)."""
    shown = Text("  ") + row
    if len(shown) > width:
        shown.truncate(max(width - 1, 0))
        shown.append("…")
    return shown


def _cut(text: str, width: int) -> str:
    line = printable(text)
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def _ending(command: CommandOutcome) -> str:
    """How a failed command ended: `denied by the sandbox`, `signal 9 (SIGKILL)`, `exit 3`."""
    if command.sandbox_denied:
        return "denied by the sandbox"
    if command.signal is not None:
        return f"signal {signal_name(command.signal)}"
    return f"exit {command.exit_code}"


def _tool_outcome(result: ToolResult, seconds: float | None) -> Text:
    """What a finished call produced: its size or error, redactions, and its time."""
    tail = Text()
    if result.is_error:
        tail.append(f"  Error [{result.error_code}]", style="red")
    elif result.command is not None and result.command.failed:
        tail.append(f"  {_ending(result.command)}", style="red")
    else:
        tail.append(f"  {format_bytes(len(result.content.encode()))}", style="dim")
    if result.redactions:
        secrets = "secret" if result.redactions == 1 else "secrets"
        tail.append(f"  {result.redactions} {secrets} redacted", style="yellow")
    if result.sandboxed:
        tail.append("  sandboxed", style="dim")
    if seconds is not None:
        tail.append(f"  {seconds:.2f}s", style="dim")
    return tail


class WaitingLabel:
    """`thinking… (12s)`: what is being waited for and for how long, worked out again each
    time the spinner redraws (rich calls `__rich__` on every refresh)."""

    def __init__(self, label: str, clock: Callable[[], float]) -> None:
        self._label = label
        self._clock = clock
        self._started = clock()

    def __rich__(self) -> Text:
        # A model-chosen command is not markup: "[/x]" would even raise.
        return Text(f"{self._label} ({int(self._clock() - self._started)}s)")


class TerminalRenderer:
    """Shows events as they happen.

    With `stream_answer`, assistant text is streamed to stdout as it arrives (a terminal);
    otherwise the caller prints the final answer once at the end (a pipe stays clean).
    While the agent waits (for the model, or a tool), a spinner on stderr says what for
    and how long it has lasted.
    """

    def __init__(
        self,
        out: Console,
        err: Console,
        *,
        stream_answer: bool,
        verbose: bool = False,
        markdown: bool = False,
        live: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.err = err
        self._clock = clock
        self.stream_answer = stream_answer
        self.verbose = verbose
        self.markdown = markdown
        self.live = live
        """With `markdown`: repaint the answer as it grows (the REPL), or else print each
        block once it is complete (a one-shot run, whose output is kept as written)."""
        self._status: Status | None = None
        self._mid_line = False
        self._wrap: WordWrap | None = None  # a plain answer streaming to a terminal
        self._blocks: MarkdownBlocks | None = None  # a one-shot answer's Markdown
        self._blocks_shown = False
        self._live: Live | None = None
        self._answer = ""
        self._subjects: dict[str, str] = {}  # call id -> the subject its start line showed
        self._running: str | None = None  # the spinner's label for the call that runs
        self._layers_shown: set[str] = set()
        self._run_compaction: dict[str, list[int]] = {}  # layer -> [steps, items, bytes saved]

    def emit(self, event: Event, depth: int = 0) -> None:
        if isinstance(event, NestedEvent):
            self.emit(event.event, depth + event.depth)
        elif isinstance(event, TurnStarted) and depth == 0:
            self._wait("thinking…")
        elif isinstance(event, TextDelta) and depth == 0:
            self._stream(event.text)
        elif isinstance(event, ModelReplied) and depth == 0:
            self._end_stream()
        elif isinstance(event, ToolStarted):
            self._subjects[event.call.id] = event.subject
            self._running = f"{printable(event.call.name)} {shorten(event.subject)}"
            self._wait(self._running)
        elif isinstance(event, ToolFinished):
            self._tool_finished(event, depth)
        elif isinstance(event, CompactionApplied):
            self._compaction(event, depth)
        elif isinstance(event, Notice):
            self._activity(notice_line(event), depth)
        elif isinstance(event, PermissionDecided):
            self._permission(event, depth)

    def close(self, *, totals: bool = True) -> None:
        """The run is over: stop any live display and print the run's compaction totals
        (with `totals=False` forget them: /compact's one step says it all)."""
        self._stop_waiting()
        self._end_stream()
        if self._run_compaction and totals:
            totals_line = compaction_totals_line(self._run_compaction, verbose=self.verbose)
            self._activity(totals_line, 0)
        self._run_compaction = {}

    def _tool_finished(self, event: ToolFinished, depth: int) -> None:
        self._running = None
        width = self.err.width - len("  │ ") * depth
        name, result = event.call.name, event.result
        self._activity(tool_line(name, self._subject(event), result, event.seconds, width), depth)
        for line in tool_details(result, width):
            self._activity(line, depth)

    def _compaction(self, event: CompactionApplied, depth: int) -> None:
        """snip and micro act on most tool rounds of a long session: each shows its first
        step, later ones only with --verbose; every layer counts towards the run's totals.
        A step that changes what the model can see (persist, summary, reactive) always shows."""
        totals = self._run_compaction.setdefault(event.layer, [0, 0, 0])  # steps, items, bytes
        totals[0] += 1
        totals[1] += event.count
        totals[2] += event.bytes_saved
        routine = event.layer in ROUTINE_LAYERS
        if routine and event.layer in self._layers_shown and not self.verbose:
            return
        self._layers_shown.add(event.layer)
        shown = Text(f"⚙ {printable(event.text)}", style="dim" if routine else "magenta")
        self._activity(shown, depth)

    def _subject(self, event: ToolFinished) -> str:
        """The subject the tool declared (grep: its pattern); for a call that did not
        parse, whatever argument looks most recognisable."""
        subject = self._subjects.pop(event.call.id, "")
        return subject or subject_from_arguments(event.call.arguments)

    def _wait(self, label: str) -> None:
        if not self.err.is_terminal:
            return
        self._end_stream()
        shown = WaitingLabel(label, self._clock)
        if self._status is None:
            self._status = self.err.status(shown, spinner="dots")
            self._status.start()
        else:
            self._status.update(shown)

    def _stop_waiting(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _stream(self, text: str) -> None:
        self._stop_waiting()
        if not (self.stream_answer and text):
            return
        text = printable(text)  # per character: a sequence split across pieces stays split
        if self.markdown and not self.live:
            self._blocks = self._blocks or MarkdownBlocks()
            self._print_blocks(self._blocks.feed(text))
            return
        if self.markdown:
            self._answer += text
            if self._live is None:
                self._live = _live_display(self.out)
            self._live.update(_markdown(self._answer))
            return
        # A piece starts mid-line, where rich cannot know the column: on a terminal the
        # words are placed here, elsewhere lines stay whole for whatever reads them.
        if self._wrap is None and self.out.is_terminal:
            self._wrap = WordWrap(self.out.width)
        self._print_plain(text if self._wrap is None else self._wrap.feed(text))

    def _print_plain(self, text: str) -> None:
        if text:
            self.out.print(text, end="", markup=False, highlight=False, soft_wrap=True)
            self._mid_line = not text.endswith("\n")

    def _print_blocks(self, source: str) -> None:
        """Complete Markdown blocks below the ones shown, a blank line between, without
        the spaces rich pads each line with to the width (a log or a copy keeps them)."""
        if not source.strip():
            return
        with self.out.capture() as captured:
            self.out.print(_markdown(source))
        shown = PADDING.sub("\n", captured.get())
        if self._blocks_shown and not shown.startswith("\n"):  # (rich opens a list with one)
            shown = "\n" + shown
        self._blocks_shown = True
        self.out.file.write(shown)
        self.out.file.flush()

    def _end_stream(self) -> None:
        if self._blocks is not None:
            self._print_blocks(self._blocks.flush())
            self._blocks, self._blocks_shown = None, False
        if self._live is not None:
            self._live.update(_markdown(self._answer), refresh=True)
            self._live.stop()
            if not self.out.is_terminal:
                self.out.line()  # Live ends its last render with a newline only on a terminal
            self._live, self._answer = None, ""
        if self._wrap is not None:
            self._print_plain(self._wrap.flush())
            self._wrap = None
        if self._mid_line:
            self.out.print()
            self._mid_line = False

    def _permission(self, event: PermissionDecided, depth: int) -> None:
        """Just before the user is asked, only stop the spinner: the approval panel shows
        the call and the reason, and a spinner would redraw over the question. Once the
        call is allowed, the spinner shows it running again (Ctrl-C then erases it with the
        terminal's `^C`, rather than leaving `^C` before the next line)."""
        if event.source == ASKING_SOURCE:
            self._stop_waiting()
            self._end_stream()
            return
        if self.verbose or event.decision != "allow":
            self._activity(decision_line(event), depth)
        if event.decision == "allow" and self._running is not None:
            self._wait(self._running)

    def _activity(self, line: Text, depth: int) -> None:
        self._stop_waiting()
        self._end_stream()
        self.err.print(Text("  │ " * depth) + line, highlight=False)


def error_line(message: str, label: str = "error") -> Text:
    """`error: message`, the message escaped: it may quote a server, a file or a model."""
    return Text.assemble((f"{label}: ", "bold red"), printable(message))


def compaction_totals_line(totals: dict[str, list[int]], *, verbose: bool = False) -> Text:
    """`⚙ compaction this run: persist 1 result, snip 11 groups, micro 46 results,
    1 summary; 186.1 KB saved (-v shows all 58 steps)`: what the layers did, in the words
    their lines use, so the first `micro: 1 result cleared` and `micro 46 results` count
    the same thing; with -v on, every step was shown already, and the hint is left out."""
    done = ", ".join(
        compaction_items(layer, items, with_layer=True)
        for layer in in_layer_order(totals)
        for _, items, _ in [totals[layer]]
    )
    saved = format_bytes(sum(saved for _, _, saved in totals.values()))
    line = Text(f"⚙ compaction this run: {done}; {saved} saved", style="magenta")
    if not verbose:
        steps = sum(steps for steps, _, _ in totals.values())
        line.append(f" (-v shows {'the step' if steps == 1 else f'all {steps} steps'})", "dim")
    return line


LAYER_ITEMS = {"persist": "result", "snip": "group", "micro": "result"}
"""What each layer's count counts; a summary layer counts summaries."""


def compaction_items(layer: str, count: int, *, with_layer: bool = False) -> str:
    """`46 results` (`micro 46 results` `with_layer`), `1 summary`, `2 reactive summaries`."""
    item = LAYER_ITEMS.get(layer)
    if item is None:
        kind = "" if layer == "summary" else f"{layer} "
        return f"{count:,} {kind}{'summary' if count == 1 else 'summaries'}"
    items = f"{count:,} {item}{'' if count == 1 else 's'}"
    return f"{layer} {items}" if with_layer else items


def in_layer_order(layers: Iterable[str]) -> list[str]:
    """Compaction layers in the order they act (persist, snip, micro, summary, reactive)."""
    known = {layer: place for place, layer in enumerate(LAYER_ORDER)}
    return sorted(layers, key=lambda layer: known.get(layer, len(known)))


# Markdown (with markdown-it and pygments behind it) is for a terminal only; a run whose
# answer goes to a pipe should not pay for importing it.
def _live_display(console: Console) -> Live:
    from rich.live import Live

    live = Live(console=console, refresh_per_second=8)
    live.start()
    return live


def _markdown(text: str) -> RenderableType:
    """`text` (already `printable`) as Markdown. A link shows its address after its text
    instead of becoming a terminal hyperlink, whose target the reader would not see."""
    from rich.markdown import Markdown

    return Markdown(text, hyperlinks=False)


def decision_line(event: PermissionDecided) -> Text:
    style = {"allow": "green", "ask": "yellow", "deny": "red"}[event.decision]
    line = Text(f"⚖ {event.decision}", style=style)
    line.append(
        printable(f" {event.tool} {shorten(event.subject)}  ({event.source}: {event.reason})")
    )
    return line


def subject_from_arguments(arguments: str) -> str:
    """The argument a person recognises a call by: the command, path or pattern."""
    try:
        values = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(values, dict):
        return ""
    for key in ("command", "path", "pattern", "description", "name"):
        if isinstance(values.get(key), str):
            return str(values[key])
    return ""


@contextmanager
def rendering(renderer: TerminalRenderer, *, totals: bool = True) -> Iterator[TerminalRenderer]:
    try:
        yield renderer
    finally:
        renderer.close(totals=totals)


def messages_table(records: Sequence[dict[str, Any] | str | DamagedLine], *, title: str) -> Table:
    """One row per message, tool calls and call ids included; nothing hidden, and control
    characters shown as escapes (saved text may hold a tool's colours or a hostile prompt).
    A session's line that does not read is marked `damaged`, with why."""
    table = Table(title=title, show_lines=True, header_style="bold")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("content", overflow="fold")
    for number, record in enumerate(records, start=1):
        if isinstance(record, DamagedLine):
            damaged = Text("damaged", style="bold red")
            table.add_row(str(number), damaged, Text(printable(record.problem), style="red"))
        elif isinstance(record, str):
            table.add_row(str(number), "?", Text(printable(record)))
        else:
            role = Text(printable(str(record.get("role", "?"))))
            table.add_row(str(number), role, Text(printable(_message_text(record))))
    return table


def _message_text(record: dict[str, Any]) -> str:
    parts = [record["content"]] if isinstance(record.get("content"), str) else []
    for call in record.get("tool_calls") or ():
        function = call.get("function", {})
        parts.append(f"→ {function.get('name')}({function.get('arguments')})  [{call.get('id')}]")
    if record.get("tool_call_id"):
        parts.insert(0, f"[{record['tool_call_id']}]")
    return "\n".join(parts)


def session_table(
    sessions: Sequence[SessionInfo], problems: Sequence[str | None] | None = None
) -> SessionTable:
    return SessionTable(sessions, problems)


SESSION_COLUMNS = (("id", 8), ("started", 16), ("chapter", 7), ("size", 9))
CHECK_COLUMN = ("check", 7)
MIN_PROMPT_WIDTH = 20
"""Narrower than this, the prompt moves to a line of its own under the session."""


class SessionTable:
    """Sessions as their header lines describe them, newest first; a damaged header shows
    its problem instead of a prompt. `problems` (from `sessions list --check`) adds a check
    column. Aligned text rather than a rich `Table`, which takes seconds to lay out a
    thousand rows.

    To a pipe, one whole line per session. On a terminal the first prompt is shortened to
    fit at a word (a problem wraps instead); narrower than the columns and a useful part
    of a prompt (40 columns), each session takes two lines: id, start and size, then the
    chapter and the prompt."""

    def __init__(
        self, sessions: Sequence[SessionInfo], problems: Sequence[str | None] | None
    ) -> None:
        self.sessions = sessions
        self.problems = problems
        self.columns = [*SESSION_COLUMNS, *([CHECK_COLUMN] if problems is not None else [])]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fixed = sum(width + 2 for _, width in self.columns)
        if options.no_wrap:
            yield self._wide(None)
        elif options.max_width - fixed >= MIN_PROMPT_WIDTH:
            yield self._wide(options.max_width - fixed)
        else:
            yield self._narrow(options.max_width)

    def _wide(self, prompt_width: int | None) -> Text:
        names, widths = zip(*self.columns, strict=True)
        table = Text(_cells(names, widths) + "first prompt\n", style="bold")
        for index, info in enumerate(self.sessions):
            table.append(_cells(self._cells(info), widths))
            table.append_text(self._check(index, widths[-1]))
            indent = " " * sum(width + 2 for width in widths)
            table.append_text(_prompt_cell(info, prompt_width, indent))
            table.append("\n")
        table.rstrip()
        return table

    def _narrow(self, width: int) -> Text:
        table = Text()
        for index, info in enumerate(self.sessions):
            started, chapter, size = self._cells(info)[1:]
            table.append(f"{info.session_id}  {started}  {size}\n")
            line = Text(f"  ch{chapter} · ")
            line.append_text(self._check(index, None))
            table.append_text(line + _prompt_cell(info, width - len(line.plain), "  "))
            table.append("\n")
        table.rstrip()
        return table

    def _cells(self, info: SessionInfo) -> list[str]:
        return [
            info.session_id,
            info.started.astimezone().strftime("%Y-%m-%d %H:%M"),
            "?" if info.chapter is None else str(info.chapter),
            format_bytes(info.size_bytes),
        ]

    def _check(self, index: int, width: int | None) -> Text:
        """`ok` or `damaged` under --check (its problem is printed in full below)."""
        if self.problems is None:
            return Text()
        ok = self.problems[index] is None
        word = "ok" if ok else "damaged"
        cell = f"{word:<{width}}  " if width is not None else f"{word} · "
        return Text(cell, style="green" if ok else "red")


def _cells(values: Sequence[str], widths: Sequence[int]) -> str:
    return "".join(f"{value:<{width}}  " for value, width in zip(values, widths, strict=False))


def _prompt_cell(info: SessionInfo, width: int | None, indent: str) -> Text:
    """The first prompt, shortened at a word to `width`; a damaged file's problem, wrapped
    at `width` with later lines after `indent`."""
    if info.problem is not None:
        problem = Text(f"damaged: {printable(info.problem)}", style="red")
        if width is None:
            return problem
        return Text("\n" + indent).join(wrap_keeping_units(problem, width))
    if info.first_prompt is None:
        return Text("(a long prompt)" if info.has_prompt else "(no prompt)", style="dim")
    prompt = printable(info.first_prompt)
    return Text(prompt if width is None else shorten_at_word(prompt, width))
