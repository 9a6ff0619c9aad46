"""Chapter 8's artifacts on the screen: the list (`artifacts list`, `/artifacts`), each row
with what made it, and one artifact whole (`artifacts show`, `/artifacts ID`), paged on a
terminal when it is taller than the screen."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from agent_tutorial.core.text import printable
from agent_tutorial.features.artifact_catalog import ArtifactInfo
from agent_tutorial.features.artifact_origins import (
    ArtifactOrigin,
    PersistedCall,
    artifact_origins,
)
from agent_tutorial.layout import shorten_at_word
from agent_tutorial.paging import print_paged, write_paged
from agent_tutorial.render import format_bytes, messages_table, subject_from_arguments

SUMMARY_TRIGGERS = {"automatic": "summary", "manual": "/compact", "overflow": "summary"}


def artifact_table(
    artifacts: Sequence[ArtifactInfo], project_root: Path | None = None
) -> ArtifactTable:
    """The table of `artifacts`, each with its origin when `project_root`'s sessions
    name it."""
    origins = {} if project_root is None else artifact_origins(project_root)
    return ArtifactTable(
        artifacts,
        {name: origin_text(origin) for name, origin in origins.items()},
    )


def origin_text(origin: ArtifactOrigin) -> str:
    """`read_file logs/big1.log`, `summary of 121 messages`, `/compact of 40 messages` or
    `summary of 80 messages (prompt too long)`."""
    if isinstance(origin, PersistedCall):
        subject = " ".join(subject_from_arguments(origin.arguments).split())
        return printable(f"{origin.tool} {subject}".rstrip())
    said = (
        f"{SUMMARY_TRIGGERS.get(origin.trigger, 'summary')} of {origin.covered_messages:,} messages"
    )
    return said + (" (prompt too long)" if origin.trigger == "overflow" else "")


class ArtifactTable:
    """Artifacts: kind, id, size, time and what made it (the call whose result was
    persisted, or the summary a transcript preceded). The id is what `artifacts show`
    takes, so it is never shortened. To a pipe, or where it fits, one line each; on a
    terminal too narrow for the origin beside them, the origin goes under the row (cut at
    a word); narrower than a row (40 columns), the id goes on a line of its own too."""

    def __init__(self, artifacts: Sequence[ArtifactInfo], origins: Mapping[str, str]) -> None:
        self.artifacts = artifacts
        self.origins = origins
        self.id_width = max((len(printable(info.id)) for info in artifacts), default=2)

    def _origin(self, info: ArtifactInfo) -> str:
        return self.origins.get(info.path.name, "")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = (11, self.id_width, 9, 19)
        row = sum(widths) + 2 * 3
        longest = max((len(self._origin(info)) for info in self.artifacts), default=0)
        if options.no_wrap or row + 2 + longest <= options.max_width:
            yield self._wide(widths, beside=longest > 0)
        elif row <= options.max_width:
            yield self._wide(widths, beside=False, under=options.max_width)
        else:
            yield self._narrow(options.max_width)

    def _wide(self, widths: tuple[int, int, int, int], *, beside: bool, under: int = 0) -> Text:
        kind, id_, size, time = widths
        heading = f"{'kind':<{kind}}  {'id':<{id_}}  {'size':>{size}}  "
        table = Text(heading + (f"{'time':<{time}}  made by\n" if beside else "time\n"))
        table.stylize("bold")
        for info in self.artifacts:
            table.append(f"{info.kind:<{kind}}  ")
            table.append(f"{printable(info.id):<{id_}}", style="bold")
            table.append(f"  {format_bytes(info.size):>{size}}  {_stamp(info, seconds=True)}")
            origin = self._origin(info)
            if beside and origin:
                table.append(f"  {origin}")
            table.append("\n")
            if under and origin:
                table.append(f"  {shorten_at_word(origin, under - 2)}\n", style="dim")
        table.rstrip()
        return table

    def _narrow(self, width: int) -> Text:
        table = Text()
        for info in self.artifacts:
            table.append(f"{info.kind}  {format_bytes(info.size)}  {_stamp(info)}\n  ")
            table.append(f"{printable(info.id)}\n", style="bold")
            origin = self._origin(info)
            if origin:
                table.append(f"  {shorten_at_word(origin, width - 2)}\n", style="dim")
        table.rstrip()
        return table


def _stamp(info: ArtifactInfo, *, seconds: bool = False) -> str:
    pattern = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return datetime.fromtimestamp(info.modified).strftime(pattern)


def show_artifact(console: Console, info: ArtifactInfo, data: bytes) -> None:
    """One artifact whole: a transcript as a table of its messages, a tool's output as its
    text (escape sequences shown as text, `\\x1b`); through the pager when taller than
    the terminal."""
    if info.kind == "transcript":
        print_paged(console, messages_table(transcript_records(data), title=info.relative_path))
    else:
        write_paged(console, printable(data.decode("utf-8", "surrogateescape")))


def transcript_records(data: bytes) -> list[dict[str, Any] | str]:
    """A transcript's lines as wire messages; a line that is not JSON stays as its text."""
    records: list[dict[str, Any] | str] = []
    for line in data.splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            value = line.decode("utf-8", "replace")
        records.append(value if isinstance(value, dict | str) else str(value))
    return records
