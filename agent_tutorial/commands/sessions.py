"""`agent-tutorial sessions list|prune|show`: saved conversations in
`.agent_tutorial/sessions`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agent_tutorial.commands.edge import CommandFailed, print_warnings
from agent_tutorial.commands.process import current_project
from agent_tutorial.core.errors import EXIT_FAILURE, EXIT_USAGE

if TYPE_CHECKING:
    from rich.console import Console

    from agent_tutorial.features.sessions import LoadedSession

sessions_app = typer.Typer(help="Saved conversations in .agent_tutorial/sessions.")


@sessions_app.command("list", short_help="Saved sessions, newest first, damaged ones too.")
def sessions_list(
    check: Annotated[
        bool, typer.Option("--check", help="Read every file whole and show its first bad line.")
    ] = False,
) -> None:
    """Saved sessions, newest first, damaged ones too (listing reads only each file's first
    lines; --check reads them whole, as resuming would). With --check, exit 1 if any is
    damaged."""
    from rich.text import Text

    from agent_tutorial.core.text import printable
    from agent_tutorial.features.sessions import SessionError, check_session, list_sessions
    from agent_tutorial.render import make_consoles, session_table

    out, _ = make_consoles()
    try:
        found = list_sessions(current_project().root)
    except SessionError as error:
        raise CommandFailed(str(error), EXIT_FAILURE) from None
    if not found:
        out.print("no saved sessions in this workspace")
        return
    if not check:
        out.print(session_table(found))
        return
    problems = [check_session(info).problem for info in found]
    out.print(session_table(found, problems))
    damaged = [(info, problem) for info, problem in zip(found, problems, strict=True) if problem]
    for info, problem in damaged:
        out.print(Text(f"{info.session_id}: {printable(problem)}"), soft_wrap=True)
    if damaged:
        raise CommandFailed(
            f"{len(damaged)} of {len(found)} session(s) cannot be resumed", EXIT_FAILURE
        )


@sessions_app.command(
    "prune", short_help="Delete sessions older than an age (a dry run without --yes)."
)
def sessions_prune(
    older_than: Annotated[
        str, typer.Option(help="Age since the last write, such as 12h, 30d or 2w.")
    ] = "30d",
    yes: Annotated[bool, typer.Option("--yes", help="Really delete (default: dry run).")] = False,
) -> None:
    """Delete sessions last written before an age; only lists them unless --yes. A session
    open in another process is kept."""
    from agent_tutorial.features.artifact_catalog import parse_age
    from agent_tutorial.features.checkpoints import forget_checkpoints
    from agent_tutorial.features.sessions import (
        SessionError,
        delete_sessions,
        sessions_older_than,
    )
    from agent_tutorial.render import format_bytes, make_consoles

    out, err = make_consoles()
    try:
        age = parse_age(older_than)
        old = sessions_older_than(current_project().root, age)
    except ValueError as error:
        raise CommandFailed(str(error), EXIT_USAGE) from None
    except SessionError as error:
        raise CommandFailed(str(error), EXIT_FAILURE) from None
    for info in old:
        out.print(f"{info.path.name}  {format_bytes(info.size_bytes)}", highlight=False)
    if not yes:
        out.print(f"{len(old)} session(s) older than {older_than}; dry run, pass --yes to delete")
        return
    deleted, kept = delete_sessions(old)
    kept += forget_checkpoints(current_project().root, [info.session_id for info in deleted])
    print_warnings(err, kept)
    freed = sum(info.size_bytes for info in deleted)
    out.print(f"deleted {len(deleted)} session(s), {format_bytes(freed)} freed")


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="An id or unique prefix.")],
) -> None:
    """One session's conversation as a table (through $PAGER or less when taller than the
    terminal). A damaged session shows the lines that still read, marks the ones that do
    not, and exits 1."""
    from agent_tutorial.core.messages import to_wire
    from agent_tutorial.features.sessions import SessionError, load_session
    from agent_tutorial.paging import print_paged
    from agent_tutorial.render import make_consoles, messages_table

    out, _ = make_consoles()
    path = named_session(session_id)
    try:
        loaded = load_session(path, repair=False)
    except (SessionError, OSError) as error:
        _print_what_still_reads(out, path)
        raise CommandFailed(str(error), EXIT_FAILURE) from None
    print_paged(out, messages_table([to_wire(m) for m in loaded.history], title=path.name))


def _print_what_still_reads(out: Console, path: Path) -> None:
    from agent_tutorial.core.messages import to_wire
    from agent_tutorial.features.sessions import DamagedLine, SessionLoadError, salvage_session
    from agent_tutorial.render import messages_table

    try:
        lines = salvage_session(path)
    except SessionLoadError:
        return  # not a line of it can be read: the error alone says why
    rows = [line if isinstance(line, DamagedLine) else to_wire(line) for line in lines]
    out.print(messages_table(rows, title=path.name))


def named_session(session_id: str) -> Path:
    """The session file an id or prefix names (exit 2 when none or several match)."""
    from agent_tutorial.features.sessions import SessionError, find_session

    try:
        return find_session(current_project().root, session_id)
    except SessionError as error:
        raise CommandFailed(str(error), error.exit_code) from None


def load_named_session(session_id: str) -> tuple[Path, LoadedSession]:
    """The session an id or prefix names, read whole without repairing it: exit 2 when
    none matches, 1 when it cannot be read or is damaged, as for every command that meets
    a damaged session (`run --resume`, `sessions list --check`)."""
    from agent_tutorial.features.sessions import SessionError, load_session

    path = named_session(session_id)
    try:
        return path, load_session(path, repair=False)
    except (SessionError, OSError) as error:
        raise CommandFailed(str(error), EXIT_FAILURE) from None
