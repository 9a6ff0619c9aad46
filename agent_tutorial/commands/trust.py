"""`agent-tutorial trust [PATH]`, and how `run` settles whether the project's powerful
settings apply: trusted in the store (`folder_trust`), `--trust-project` for one run, a
yes in the REPL; otherwise they are ignored and one line on stderr names each."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agent_tutorial.commands.edge import CommandFailed
from agent_tutorial.core.errors import EXIT_USAGE

if TYPE_CHECKING:
    from rich.console import Console
    from rich.panel import Panel

    from agent_tutorial.config import ProjectSettings
    from agent_tutorial.project import Project

TRUST_PROMPT = "Trust this folder? [y/N] "
HOOK_SETTINGS = frozenset({"hooks", "AGENT_TUTORIAL_HOOKS"})


def trust(
    path: Annotated[
        Path | None,
        typer.Argument(help="A folder in the project (default: the current directory)."),
    ] = None,
) -> None:
    """Trust this project's hooks, mode and other powerful settings.

    Records the project root (found from PATH, as `run` finds it) and a hash of its
    powerful settings (hooks, permission_mode, allow rules, shell_environment, base_url,
    api_key_env, redact_secrets, mcp_servers and .mcp.json, the sandbox's) in your own
    config folder. They apply from
    then on, until they change: then `run` ignores them again until you trust it again.
    """
    from agent_tutorial.config import load_settings, read_project_settings
    from agent_tutorial.core.text import printable
    from agent_tutorial.folder_trust import record_trust
    from agent_tutorial.project import find_project
    from agent_tutorial.render import make_consoles

    out, _ = make_consoles()
    start = Path.cwd() if path is None else path
    if not start.is_dir():
        raise CommandFailed(f"{start} is not a folder", EXIT_USAGE)
    project = find_project(start)
    if project.root != project.workspace:
        inside = f"{printable(str(project.workspace))} is inside the project at "
        out.print(f"{inside}{printable(str(project.root))}; trusting that", markup=False)
    settings = read_project_settings(project.root)
    # Settings that would stop every trusted run are refused now, not recorded (ConfigError
    # says which and exits 2, as `run` would).
    load_settings(project.root, project=settings, trusted=True)
    record_trust(project.root, settings.digest, settings.powerful)
    root = printable(str(project.root))
    if not settings.powerful:
        out.print(
            f"trusted {root} (its settings hold nothing that needs trust today; one added "
            "later asks again)",
            markup=False,
            highlight=False,
        )
        return
    lines = [f"  {printable(line)}" for line in describe_powerful(settings.powerful)]
    text = "\n".join([f"trusted {root}; these apply until they change:", *lines, COVERS])
    out.print(text, markup=False, highlight=False)


class FolderTrust:
    """Whether the project's powerful settings apply to this run. The store is read only
    when something depends on the answer (powerful settings, or `--continue`)."""

    def __init__(self, project: Project, settings: ProjectSettings, *, for_this_run: bool):
        self.project = project
        self.settings = settings
        self._trusted: bool | None = True if for_this_run else None  # --trust-project

    @property
    def trusted(self) -> bool:
        if self._trusted is None:
            from agent_tutorial.folder_trust import is_trusted

            self._trusted = is_trusted(self.project.root, self.settings.digest)
        return self._trusted

    @property
    def needs_trust(self) -> bool:
        """Powerful settings present, and not trusted (yet)."""
        return bool(self.settings.powerful) and not self.trusted

    def ask(self, err: Console, read_line: Callable[[str], str] | None = None) -> None:
        """The REPL's question, asked once before it opens: a yes is recorded, unless the
        settings would not validate once trusted (ConfigError: the run ends, as `trust`)."""
        from agent_tutorial.config import load_settings
        from agent_tutorial.folder_trust import record_trust

        err.print(power_panel(self.project, self.settings))
        answer = (read_line or _read_from(err))(TRUST_PROMPT).strip().lower()
        if answer in ("y", "yes"):
            load_settings(self.project.root, project=self.settings, trusted=True)
            record_trust(self.project.root, self.settings.digest, self.settings.powerful)
            self._trusted = True

    def ignored_settings(self) -> list[str]:
        """The powerful settings this run goes without (none when trusted)."""
        return list(self.settings.powerful) if self.needs_trust else []

    def warning(self) -> str | None:
        """One line naming each ignored setting, and those that changed since the folder
        was last trusted (a rewritten hook script, say)."""
        ignored = self.ignored_settings()
        if not ignored:
            return None
        from agent_tutorial.folder_trust import changed_since_trusted

        changed = changed_since_trusted(self.project.root, self.settings.powerful)
        since = f"changed since trusted: {', '.join(changed)}; " if changed else ""
        return (
            f"project settings not trusted, ignored: {', '.join(ignored)} "
            f"({since}`agent-tutorial trust` applies them; `run --trust-project` for one run)"
        )


def _read_from(err: Console) -> Callable[[str], str]:
    from rich.text import Text

    def read(prompt: str) -> str:
        try:
            return err.input(Text(prompt, style="bold"))
        except EOFError:
            return ""

    return read


COVERS = (
    "The check covers these settings and the project files a hook command names "
    "(hook script …) or an MCP server's command names (mcp server file …), not what "
    "those files read or import."
)


def power_panel(project: Project, settings: ProjectSettings) -> Panel:
    """The REPL's question: what trusting the folder lets in, each setting on its line, a
    hook by its command, a URL as it is (its password masked); plain text, escapes made
    visible."""
    from rich.panel import Panel
    from rich.text import Text

    from agent_tutorial.core.text import printable

    body = Text(
        f"{printable(str(project.state_dir))} holds settings that run commands or "
        "widen what the agent may do:"
    )
    for line in describe_powerful(settings.powerful):
        body.append(f"\n  {printable(line)}")
    body.append(f"\nTrusted, they apply until they change; then it asks again. {COVERS}", "dim")
    heading = Text(f"Trust {printable(str(project.root))}?", style="bold yellow")
    return Panel(body, title=heading, title_align="left", border_style="yellow")


def describe_powerful(powerful: Mapping[str, Any]) -> list[str]:
    """One line per setting, one per hook command, one per MCP server."""
    import orjson

    from agent_tutorial.config import SCRIPT_SETTING
    from agent_tutorial.features.redaction import mask_url_passwords
    from agent_tutorial.mcp_config import SERVER_FILE_SETTING, SERVERS_SETTING, describe_server

    lines: list[str] = []
    for name, value in powerful.items():
        if name in HOOK_SETTINGS and isinstance(value, dict):
            lines += [f"{name}: {event} runs {command}" for event, command in _commands(value)]
            continue
        if name.startswith((SCRIPT_SETTING, SERVER_FILE_SETTING)):  # a hash tells them apart
            lines.append(f"{name}: sha256 {str(value)[:12]}…")
            continue
        if name.startswith(f"{SERVERS_SETTING}."):
            lines.append(f"{name}: {mask_url_passwords(describe_server(value))}")
            continue
        shown = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        lines.append(f"{name} = {mask_url_passwords(shown)}")
    return lines


def _commands(hooks: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (str(event), str(entry.get("command")))
        for event, entries in hooks.items()
        if isinstance(entries, list)
        for entry in entries
        if isinstance(entry, dict)
    ]
