"""`agent-tutorial undo` and `agent-tutorial checkpoints list`: the files a session's
turns changed, put back from the checkpoint store (`features.checkpoints`). Neither needs
model settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agent_tutorial.commands.edge import CommandFailed
from agent_tutorial.commands.process import current_project
from agent_tutorial.core.errors import EXIT_FAILURE, EXIT_USAGE

if TYPE_CHECKING:
    from agent_tutorial.features.checkpoints import ProjectCheckpoints

checkpoints_app = typer.Typer(help="Files recorded before the agent's turns changed them.")

SessionOption = Annotated[
    str | None,
    typer.Option("--session", help="A session id or prefix (default: the latest)."),
]


def undo(
    session: SessionOption = None,
    turns: Annotated[int, typer.Option(help="How many checkpointed turns to undo.")] = 1,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would happen; change nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite files changed since the turn.")
    ] = False,
) -> None:
    """Put files back as they were before the last turns.

    One line per path: removed (the turns created it), recreated (they deleted it) or
    restored (they changed its content or mode). A file changed since the turn ended
    stops the undo (exit 1) unless --force.
    """
    from agent_tutorial.features.checkpoints import UndoError
    from agent_tutorial.render import make_consoles

    out, err = make_consoles()
    if turns < 1:
        raise CommandFailed(f"--turns must be at least 1, got {turns}", EXIT_USAGE)
    store = _store()
    session_id = _session_named(store, session, "nothing to undo: no checkpoints left")
    try:
        plan = store.plan_undo(session_id, turns)
    except UndoError as error:
        raise CommandFailed(str(error), error.exit_code) from None
    if plan.conflicts and not force:
        names = ", ".join(plan.conflicts)
        raise CommandFailed(
            f"nothing undone: changed since the agent's turn: {names} (--force overwrites)",
            EXIT_FAILURE,
        )
    for change in plan.changes:
        out.print(f"{change.action:<9} {change.path}", markup=False, highlight=False)
    if dry_run:
        out.print("dry run: nothing changed", highlight=False)
        return
    try:
        failures = store.apply_undo(plan)
    except UndoError as error:
        raise CommandFailed(str(error), error.exit_code) from None
    for failure in failures:
        err.print(f"not restored: {failure}", markup=False, highlight=False)
    if failures:
        raise CommandFailed(f"{len(failures)} path(s) could not be put back", EXIT_FAILURE)


@checkpoints_app.command("list", short_help="A session's checkpointed turns.")
def checkpoints_list(
    session: SessionOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array.")] = False,
) -> None:
    """A session's checkpointed turns, oldest first: number, time, the prompt's first
    line and the files the turn changed (undone ones are marked)."""
    import orjson

    from agent_tutorial.features.checkpoints import UndoError
    from agent_tutorial.render import make_consoles

    out, _ = make_consoles()
    store = _store()
    session_id = _session_named(store, session, "no checkpoints", undone=True)
    try:
        standing = {c.number for c in store.of(session_id)}
        every = store.of(session_id, undone=True)
    except UndoError as error:
        raise CommandFailed(str(error), error.exit_code) from None
    if as_json:
        rows = [
            {
                "session": session_id,
                "turn": c.number,
                "time": c.time,
                "prompt": c.prompt,
                "files_changed": list(c.changed),
                "undone": c.number not in standing,
            }
            for c in every
        ]
        typer.echo(orjson.dumps(rows).decode())
        return
    for c in every:
        mark = " (undone)" if c.number not in standing else ""
        out.print(f"{c.number}  {c.time}  {c.prompt}{mark}", markup=False, highlight=False)
        out.print(f"   {', '.join(c.changed)}", markup=False, highlight=False)


def _store() -> ProjectCheckpoints:
    from agent_tutorial.features.checkpoints import ProjectCheckpoints

    return ProjectCheckpoints(current_project().root)


def _session_named(
    store: ProjectCheckpoints, given: str | None, none_found: str, *, undone: bool = False
) -> str:
    """The session `--session` names (exit 2 for one that is not there), or the latest
    session with checkpoints (exit 1 and `none_found` when there is none)."""
    from agent_tutorial.features.checkpoints import UndoError
    from agent_tutorial.features.session_files import file_id as session_id_of
    from agent_tutorial.features.sessions import SessionError, find_session

    if given is None:
        try:
            latest = store.latest_session(undone=undone)
        except UndoError as error:
            raise CommandFailed(str(error), error.exit_code) from None
        if latest is None:
            raise CommandFailed(f"{none_found} in this project", EXIT_FAILURE)
        return latest
    prefix = given.strip().lower()
    recorded = [found for found in store.sessions() if found.startswith(prefix)]
    if prefix and len(recorded) == 1:
        return recorded[0]
    try:
        return session_id_of(find_session(current_project().root, given))
    except SessionError as error:
        raise CommandFailed(str(error), error.exit_code) from None
