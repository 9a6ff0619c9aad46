"""The command as a process: where it runs (the project its directory lies in), under
`main()` it ends like Ctrl-C on SIGTERM or SIGHUP, and `run` adopts the orphans its tools
leave behind. `adapters.processes` does the work; the front ends ask here, so that they
need no adapter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
