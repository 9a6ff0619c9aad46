"""The command as a process: where it runs (the project its directory lies in), under
`main()` it ends like Ctrl-C on SIGTERM or SIGHUP, and `run` adopts the orphans its tools
leave behind. `adapters.processes` does the work; the front ends ask here, so that they
need no adapter."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_tutorial.project import Project

_as_the_command = False


@contextmanager
def running_as_the_command() -> Iterator[None]:
    """Only the real command does this: a test runner that calls the app in-process keeps
    its own signal handling and children."""
    global _as_the_command
    from agent_tutorial.adapters.processes import terminate_like_ctrl_c

    _as_the_command = True
    with terminate_like_ctrl_c():
        yield


def adopt_orphans() -> None:
    """Make this process a subreaper, when it runs as the command. Done by `run`, not by
    `main()`, so that `--help` and `--version` do not load ctypes for it."""
    if _as_the_command:
        from agent_tutorial.adapters.processes import become_subreaper

        become_subreaper()


def command_as_invoked() -> str:
    """The command as the user ran it, to tell them how to run it again: `agent-tutorial`
    when that name on PATH is this very program, otherwise the path they used
    (`.venv/bin/agent-tutorial`), and `python -m agent_tutorial` for a module run."""
    if Path(sys.argv[0]).name == "__main__.py":  # python -m agent_tutorial
        return f"{_as_typed(sys.orig_argv[0])} -m agent_tutorial"
    return _as_typed(sys.argv[0])


def _as_typed(program: str) -> str:
    """`program`'s bare name if running that name finds this very file, else as given."""
    name = Path(program).name
    if "/" not in program:
        return shlex.quote(name)  # it was found on PATH
    found = shutil.which(name)
    try:
        same = found is not None and Path(found).samefile(program)
    except OSError:  # gone, or not ours to look at: say what was typed
        same = False
    return shlex.quote(name if same else program)


def termination_exit_code() -> int | None:
    """128 + the signal that asked this process to end (143 SIGTERM, 129 SIGHUP), if one did."""
    from agent_tutorial.adapters.processes import termination_exit_code as exit_code

    return exit_code()


def termination_name() -> str:
    from agent_tutorial.adapters.processes import termination_name as name

    return name()


def current_project() -> Project:
    """The project the current directory lies in (`project.find_project`): every command
    reads its settings, sessions and artifacts from the root found there."""
    from pathlib import Path

    from agent_tutorial.project import find_project

    return find_project(Path.cwd())
