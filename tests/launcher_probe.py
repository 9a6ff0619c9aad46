"""What a started interpreter looks like from inside, as JSON on stdout, for
`test_launcher.py`: run as `python -m launcher_probe` from the tests folder."""

from __future__ import annotations

import atexit
import io
import json
import os
import signal
import sys
from pathlib import Path


def _handler(number: int) -> str:
    handler = signal.getsignal(number)
    if handler is signal.default_int_handler:
        return "python"
    return str(handler)


def _stream(stream: object) -> dict[str, object]:
    assert isinstance(stream, io.TextIOWrapper)
    return {
        "tty": stream.isatty(),
        "line_buffering": stream.line_buffering,
        "write_through": stream.write_through,
        "encoding": stream.encoding,
        "errors": stream.errors,
        "raw": type(stream.buffer).__name__,
    }


def probe() -> dict[str, object]:
    on_terminal = os.isatty(0)
    return {
        "argv": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "orig_argv": sys.orig_argv[1:],
        "cwd": str(Path.cwd()),
        "path0": sys.path[0],
        "variable": os.environ.get("PROBE_VARIABLE"),
        "streams": [_stream(stream) for stream in (sys.stdin, sys.stdout, sys.stderr)],
        "originals_are_current": sys.__stdout__ is sys.stdout and sys.__stderr__ is sys.stderr,
        "signals": {
            number.name: _handler(number)
            for number in (
                signal.SIGINT,
                signal.SIGTERM,
                signal.SIGHUP,
                signal.SIGPIPE,
                signal.SIGCHLD,
                signal.SIGWINCH,
                signal.SIGXFSZ,
                signal.SIGQUIT,
            )
        },
        "blocked": sorted(int(number) for number in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "session_leader": os.getsid(0) == os.getpid(),
        "foreground": on_terminal and os.tcgetpgrp(0) == os.getpgrp(),
    }


if __name__ == "__main__":
    atexit.register(print, "atexit ran")
    print(json.dumps(probe(), sort_keys=True))
    sys.exit(int(sys.argv[1]))
