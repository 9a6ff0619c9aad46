"""Start a command inside the session's sandbox from a process of its own:
`python -m agent_tutorial.adapters.sandbox_launch POLICY -- COMMAND ARGS…` execs bwrap with
the policy's rules around the command.

The MCP SDK starts a stdio server itself and passes it no extra descriptors, but bwrap
reads its seccomp filter from one; this launcher, started in the server's place, makes the
filter's descriptor and then becomes bwrap, which inherits it.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from agent_tutorial.adapters.sandbox import SandboxUnavailableError, sandboxed
from agent_tutorial.core.sandbox import SandboxPolicy

_PATH_FIELDS = ("workspace", "private_tmp", "home", "project_root")
_PATHS_FIELDS = ("also_hidden", "protected", "visible")
EXIT_NO_SANDBOX = 126
"""The launcher's exit code when the sandbox cannot run (the shell's 'cannot execute')."""


def launch_argv(policy: SandboxPolicy, argv: list[str]) -> list[str]:
    """The command line that runs `argv` confined by `policy` (in the current folder)."""
    return [sys.executable, "-m", __name__, policy_text(policy), "--", *argv]


def policy_text(policy: SandboxPolicy) -> str:
    return orjson.dumps(dataclasses.asdict(policy), default=str).decode()


def policy_of(text: str) -> SandboxPolicy:
    values: dict[str, Any] = orjson.loads(text)
    for name in _PATH_FIELDS:
        if values.get(name) is not None:
            values[name] = Path(values[name])
    for name in _PATHS_FIELDS:
        values[name] = tuple(Path(path) for path in values[name])
    values["hidden_home_paths"] = tuple(values["hidden_home_paths"])
    return SandboxPolicy(**values)


def main(arguments: list[str]) -> int:
    if len(arguments) < 3 or arguments[1] != "--":
        sys.stderr.write("usage: sandbox_launch POLICY -- COMMAND [ARGS…]\n")
        return 2
    policy, argv = policy_of(arguments[0]), arguments[2:]
    try:
        with sandboxed(policy, argv, cwd=Path.cwd()) as launch:
            for descriptor in launch.pass_fds:
                os.set_inheritable(descriptor, True)
            os.execv(launch.argv[0], list(launch.argv))
    except (SandboxUnavailableError, OSError) as error:
        sys.stderr.write(f"the sandbox cannot start this server: {error}\n")
    return EXIT_NO_SANDBOX


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
