"""Run an MCP stdio server outside the sandbox so that nothing it starts outlives it:
`python -m agent_tutorial.adapters.server_keeper -- COMMAND ARGS…` starts the server as its
child, on its own standard streams, waits for it, then ends everything the server left.

The MCP SDK starts a server in a session of its own and, when the connection closes, ends
that process group only if the server did not exit by itself at the end of its input; a
server that forked a helper, or a daemon that called `setsid`, would outlive the agent. The
keeper ends them with bash's pieces: it is a child subreaper (`processes.become_subreaper`),
so whatever the server leaves behind is re-parented to it, where `escapees.Escapees` finds
it, and the server's own process group is signalled as a bash command's is. SIGTERM or
SIGHUP (the SDK's escalation, the agent's end) cut the wait short and end them the same way.
A sandboxed server needs none of this: bubblewrap's PID namespace ends with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from agent_tutorial.adapters.escapees import Escapees
from agent_tutorial.adapters.processes import (
    InterruptLatch,
    become_subreaper,
    exited_by,
    signal_group,
    terminate_like_ctrl_c,
)

TERM_GRACE_S = 1.0
"""How long what the server left gets to exit after SIGTERM before SIGKILL (well within
the SDK's two seconds before it kills the keeper itself)."""
EXIT_CANNOT_START = 127
"""The keeper's exit code when the server's command cannot be started (the shell's)."""


def keeper_argv(argv: list[str]) -> list[str]:
    """The command line that runs `argv` under the keeper."""
    return [sys.executable, "-m", __name__, "--", *argv]


def main(arguments: list[str]) -> int:
    if len(arguments) < 2 or arguments[0] != "--":
        sys.stderr.write("usage: server_keeper -- COMMAND [ARGS…]\n")
        return 2
    become_subreaper()
    with terminate_like_ctrl_c():
        return _keep(arguments[1:])


def _keep(argv: list[str]) -> int:
    """Start the server, wait for it (or for a signal to end it), end what it left; its
    exit code as a shell gives it (128 + the signal that ended it)."""
    latch = InterruptLatch()  # a SIGTERM inside Popen would lose the server's pid
    try:
        # Its own session: its group can be signalled without signalling the keeper.
        server = subprocess.Popen(argv, start_new_session=True)
    except OSError as error:
        latch.release()
        sys.stderr.write(f"cannot start the server {argv[0]!r}: {error.strerror or error}\n")
        return EXIT_CANNOT_START
    escapees = Escapees(server.pid)
    _let_go_of_the_pipes()
    try:
        latch.release()  # a signal that came while the server started surfaces here
        server.wait()
    except KeyboardInterrupt:  # TerminationRequested: the client wants the server gone
        pass
    finally:
        _end_what_is_left(server, escapees)
    code = server.returncode
    return code if code >= 0 else 128 - code


def _let_go_of_the_pipes() -> None:
    """Only the server (and what it starts) holds the client's pipes from now on, so the
    client sees the end of its output when the server is gone, as without a keeper."""
    nowhere = os.open(os.devnull, os.O_RDWR)
    os.dup2(nowhere, sys.stdin.fileno())
    os.dup2(nowhere, sys.stdout.fileno())
    os.close(nowhere)


def _end_what_is_left(server: subprocess.Popen[bytes], escapees: Escapees) -> None:
    """SIGTERM to the server's group and to every process that left it, a grace for them
    to exit, then SIGKILL to whatever did not, the server and its orphans reaped."""
    try:
        signal_group(server.pid, signal.SIGTERM)
        escapees.terminate()
        deadline = time.monotonic() + TERM_GRACE_S
        exited_by(server, deadline)  # its death orphans its children: they are escapees then
        escapees.wait_for_exit(deadline)
    finally:  # even if a second signal cuts the grace short
        signal_group(server.pid, signal.SIGKILL)
        server.wait()
        escapees.kill_and_reap()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
