"""`agent-tutorial artifacts list|show|prune`: chapter 8's persisted tool results and
transcripts in `.agent_tutorial/artifacts`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from agent_tutorial.commands.edge import CommandFailed
from agent_tutorial.commands.process import current_project
from agent_tutorial.core.errors import EXIT_FAILURE, EXIT_USAGE

artifacts_app = typer.Typer(help="Chapter 8's persisted tool results and transcripts.")


@artifacts_app.command("list")
def artifacts_list() -> None:
    """Every artifact in .agent_tutorial/artifacts, newest first, with what made it: the
    tool call whose result it holds, or the summary a transcript preceded."""
    from agent_tutorial.artifact_view import artifact_table
    from agent_tutorial.features.artifact_catalog import list_artifacts
    from agent_tutorial.render import make_consoles

    out, _ = make_consoles()
    root = current_project().root
    found = list_artifacts(root)
    if not found:
        out.print("no artifacts yet (chapter 8 writes them when results are large)")
        return
    out.print(artifact_table(found, root))


@artifacts_app.command("show")
def artifacts_show(
    reference: Annotated[str, typer.Argument(help="An id, id prefix, file name or path.")],
    raw: Annotated[bool, typer.Option("--raw", help="Print the stored bytes as they are.")] = False,
) -> None:
    """Print one artifact in full (a transcript as a table unless --raw), through $PAGER
    or less when taller than the terminal. A tool's output may hold escape sequences: they
    are shown as text (`\\x1b`) unless --raw. An unknown or ambiguous reference is a usage
    error (`ArtifactLookupError`)."""
    from agent_tutorial.artifact_view import show_artifact
    from agent_tutorial.features.artifact_catalog import find_artifact
    from agent_tutorial.render import make_consoles

    out, _ = make_consoles()
    try:
        info = find_artifact(current_project().root, reference)
        data = info.path.read_bytes()
    except OSError as error:
        raise CommandFailed(str(error), EXIT_FAILURE) from None
    if raw:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    show_artifact(out, info, data)


@artifacts_app.command("prune")
def artifacts_prune(
    older_than: Annotated[str, typer.Option(help="Age such as 12h, 7d or 2w.")] = "7d",
    yes: Annotated[bool, typer.Option("--yes", help="Really delete (default: dry run).")] = False,
) -> None:
    """Delete artifacts older than an age; only lists them unless --yes."""
    from agent_tutorial.features.artifact_catalog import (
        artifacts_older_than,
        delete_artifacts,
        parse_age,
    )
    from agent_tutorial.render import format_bytes, make_consoles

    out, _ = make_consoles()
    try:
        age = parse_age(older_than)
    except ValueError as error:
        raise CommandFailed(str(error), EXIT_USAGE) from None
    old = artifacts_older_than(current_project().root, age)
    for info in old:
        out.print(f"{info.relative_path}  {format_bytes(info.size)}", highlight=False)
    if not yes:
        out.print(f"{len(old)} artifact(s) older than {older_than}; dry run, pass --yes to delete")
        return
    freed = delete_artifacts(old)
    out.print(f"deleted {len(old)} artifact(s), {format_bytes(freed)} freed")
