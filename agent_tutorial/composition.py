"""The one composition call of a session: from the project as read once (its settings
and `.env`), build the sandbox, the redactor, the model connection and its window, and
the conversation that builds its agents from them.

A front end calls `open_session` once; `/clear` and `/resume` build another agent from
the same parts (`Conversation`), so nothing is read or connected twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from agent_tutorial.adapters.hook_scripts import hook_snapshot
from agent_tutorial.bootstrap import AgentDeps, connect_model, open_sandbox, secret_redactor
from agent_tutorial.config import ProjectSettings, Settings
from agent_tutorial.conversation import Conversation, ConversationSetup
from agent_tutorial.core.events import EventSink
from agent_tutorial.core.permissions import Approver
from agent_tutorial.mcp_session import start_mcp_servers
from agent_tutorial.profiles import ChapterProfile
from agent_tutorial.project import Project


@dataclass(frozen=True)
class ReadProject:
    """A project as a run read it, once: where it is, its own files split by power, and
    the settings settled from those and every other source."""

    project: Project
    files: ProjectSettings
    """`config.toml` and `.env` as read (the redactor masks the `.env`'s secrets)."""
    settings: Settings


@dataclass(frozen=True)
class FrontEnd:
    """What the front end brings to a session: where its events go, who answers approval
    questions (None: nobody, so `ask` denies), and how a start-up warning is shown."""

    sinks: Sequence[EventSink]
    approver: Approver | None
    warn: Callable[[str], None]


def open_session(
    read: ReadProject,
    profile: ChapterProfile,
    front_end: FrontEnd,
    opened: ExitStack,
    *,
    resume: Path | None = None,
) -> Conversation:
    """The session's conversation, new or resumed from `resume`: its sandbox (the warning
    when there is none to be had is shown first), its one redactor and its model
    connection, closed with `opened`. The settings it went on with (the server's window
    included) are `conversation.setup.settings`. A session file that cannot be resumed
    raises `SessionError`."""
    project, settings = read.project, read.settings
    sandbox = open_sandbox(settings, project, profile, opened)
    if sandbox.notice is not None:
        front_end.warn(sandbox.notice)
    redactor = secret_redactor(settings, project.root, read.files.dotenv_lines)
    connection = connect_model(settings, project, profile, opened, redactor=redactor)
    mcp = start_mcp_servers(settings, project, profile, opened, front_end.warn, sandbox.policy)
    deps = AgentDeps(
        model=connection.model,
        project=project,
        settings=connection.settings,
        approver=front_end.approver,
        sandbox=sandbox.policy,
        redactor=redactor,
        window=connection.window,
        mcp=mcp,
        # Once, in the session's parts: an agent built later (`/clear`, `/resume`, after a
        # mode change) holds the hooks to the scripts as they were at the start.
        hook_snapshot=hook_snapshot(project.root, settings.hooks),
    )
    setup = ConversationSetup(profile=profile, deps=deps, sinks=front_end.sinks)
    return Conversation.open(setup, resume)
