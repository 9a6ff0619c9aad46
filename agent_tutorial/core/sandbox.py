"""What the sandbox lets a bash command do, as one small value (Codex's sandbox policies):
`adapters/sandbox.py` turns it into operating-system rules in one place.

- `workspace-write`: write only inside the workspace and the session's private temporary
  directory (`/tmp` and `$TMPDIR` inside); the agent's state folder, the repository folder
  git obeys and the `protected` paths stay read-only there.
- `read-only`: write only in the private temporary directory (the file tools write nothing
  either).
- `off`: no confinement at all; bash runs as it did before the sandbox existed.

In both confined modes the network is off unless `network` is set, the agent's own
process is out of sight, and the home directory's credentials cannot be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias, get_args

SandboxMode: TypeAlias = Literal["workspace-write", "read-only", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)

HIDDEN_HOME_PATHS = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".docker",
    ".kube",
    ".npmrc",
    ".pypirc",
    ".config/agent-tutorial",
)
"""Credentials under the home directory that a sandboxed command cannot read (keys, cloud
and registry tokens, the agent's own user settings), even when the workspace is the home
directory."""


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """One session's sandbox: what its bash commands may write and reach."""

    mode: SandboxMode
    """How far writes reach: `workspace-write`, `read-only` or `off`."""
    network: bool
    """Let commands use the network (TCP and UDP through the host's network). Unix sockets
    stay closed either way: they lead to the Docker daemon, the session bus, the SSH agent."""
    workspace: Path
    """The folder the agent works in; its real path is the one that becomes writable."""
    private_tmp: Path
    """The session's own temporary directory, writable and handed over as `$TMPDIR`; the
    session removes it at its end."""
    home: Path
    """The home directory whose `hidden_home_paths` are covered."""
    hidden_home_paths: tuple[str, ...] = HIDDEN_HOME_PATHS
    """Paths relative to `home` that a command cannot read."""
    also_hidden: tuple[Path, ...] = ()
    """Absolute paths a command cannot read either: the agent's user settings when
    `XDG_CONFIG_HOME` moves them out of `~/.config`, a key file the user names."""
    project_root: Path | None = None
    """The project root whose `.agent_tutorial/` is the agent's state folder, at or above
    the workspace (`project.find_project`); None: the workspace itself."""
    visible: tuple[Path, ...] = ()
    """Absolute paths outside the workspace a command must see, read-only, even where the
    private /tmp would hide them (an MCP server's executable, virtual environment and
    script in a checkout under /tmp). Elsewhere they are visible read-only anyway."""
    protected: tuple[Path, ...] = ()
    """Absolute paths in the workspace that commands must not write, rename or replace (the
    scripts trusted hooks run, the git hooks folder `core.hooksPath` names). The whole
    topmost folder below the workspace that holds each one is read-only (for one directly
    in the workspace, itself), since a read-only file alone is bypassed by moving its
    folder away and making a new one. A path outside the workspace is read-only anyway; one
    that does not exist is not reserved."""

    def __post_init__(self) -> None:
        if self.mode not in SANDBOX_MODES:
            raise ValueError(f"mode must be one of {SANDBOX_MODES}, got {self.mode!r}")
        named = {"workspace": self.workspace, "private_tmp": self.private_tmp, "home": self.home}
        named |= {f"also_hidden[{index}]": path for index, path in enumerate(self.also_hidden)}
        named |= {f"protected[{index}]": path for index, path in enumerate(self.protected)}
        named |= {f"visible[{index}]": path for index, path in enumerate(self.visible)}
        if self.project_root is not None:
            named["project_root"] = self.project_root
        for name, path in named.items():
            if not path.is_absolute():
                raise ValueError(f"{name} must be an absolute path, got {path!r}")

    @property
    def confined(self) -> bool:
        return self.mode != "off"

    @property
    def root(self) -> Path:
        """Where the agent's state folder is: the project root, or the workspace."""
        return self.project_root or self.workspace

    def describe(self) -> str:
        """`workspace-write, network off`, as the tool line and the guide say it."""
        if not self.confined:
            return "sandbox off"
        return f"{self.mode}, network {'on' if self.network else 'off'}"
