"""Find, kill and reap the processes that escaped one child of ours.

With this process a child subreaper (`processes.become_subreaper()`), an orphan anywhere
below it is re-parented to it, so the escapees of a command (`setsid`, `setsid -f`, `nohup
… &`, double-forked daemons) show up among our own children. They are killed with
everything below them, and exactly their pids are reaped: never `waitpid(-1)`, which
would steal exit statuses that `subprocess` is waiting for.
"""

from __future__ import annotations

import signal
import time
from contextlib import suppress

import psutil

from agent_tutorial.adapters.processes import is_subreaper

_REAP_ROUNDS = 8
"""Kill-and-reap passes; each catches the processes re-parented by the previous one."""
_REAP_WAIT_S = 2.0
"""How long one pass waits for SIGKILLed orphans to die (only a process stuck in the
kernel takes longer)."""
_EXIT_POLL_S = 0.05
"""How often `wait_for_exit` looks for orphans that a death just re-parented to us."""


class Escapees:
    """The processes that escaped one child of ours: orphans re-parented to this process
    that were created no earlier than that child (so nothing started before the call, such
    as another tool's process, is touched). Tools run one at a time, so no other child of
    ours starts while the call runs; `child_pid` itself is never counted.

    Does nothing unless `become_subreaper()` succeeded in this process.
    """

    def __init__(self, child_pid: int) -> None:
        self._child_pid = child_pid
        self._since: float | None = None
        self._terminated: set[psutil.Process] = set()
        if is_subreaper():
            # A child exists until it is reaped, so its creation time is readable here;
            # psutil's clock for creation times is the one the orphans are compared with.
            with suppress(psutil.Error):
                self._since = psutil.Process(child_pid).create_time()

    def terminate(self) -> int:
        """SIGTERM (once each) to every escapee and what it started; returns how many."""
        fresh = [process for process in self._trees() if process not in self._terminated]
        _send(fresh, signal.SIGTERM)
        self._terminated.update(fresh)
        return len(fresh)

    def wait_for_exit(self, deadline: float) -> None:
        """Reap the escapees as they exit, until none is left or the `time.monotonic()`
        `deadline` passes; each death may orphan more, which get SIGTERM in turn."""
        while (orphans := self._orphans()) and (left := deadline - time.monotonic()) > 0:
            psutil.wait_procs(orphans, timeout=min(left, _EXIT_POLL_S))
            self.terminate()

    def kill_and_reap(self) -> int:
        """SIGKILL every escapee and its descendants and reap the orphans among them, until
        none is left; returns how many orphans were reaped."""
        reaped = 0
        for _ in range(_REAP_ROUNDS):
            orphans = self._orphans()
            if not orphans:
                break
            _send([*orphans, *self._descendants(orphans)], signal.SIGKILL)
            # They are our children now: psutil waits for them with waitpid(pid), one by one.
            gone, _alive = psutil.wait_procs(orphans, timeout=_REAP_WAIT_S)
            reaped += len(gone)
        return reaped

    def _orphans(self) -> list[psutil.Process]:
        if self._since is None:
            return []
        try:
            children = psutil.Process().children()
        except psutil.Error:
            return []
        return [child for child in children if self._escaped(child)]

    def _escaped(self, child: psutil.Process) -> bool:
        if child.pid == self._child_pid or self._since is None:
            return False
        try:
            return child.create_time() >= self._since
        except psutil.Error:  # already gone and reaped
            return False

    def _trees(self) -> list[psutil.Process]:
        orphans = self._orphans()
        return [*orphans, *self._descendants(orphans)]

    @staticmethod
    def _descendants(orphans: list[psutil.Process]) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for orphan in orphans:
            with suppress(psutil.Error):
                found.extend(orphan.children(recursive=True))
        return found


def _send(processes: list[psutil.Process], signal_number: signal.Signals) -> None:
    for process in processes:
        # psutil checks the pid still names the process it found (no pid reuse); a process
        # that is gone or changed its user id is left alone.
        with suppress(psutil.Error):
            process.send_signal(signal_number)
