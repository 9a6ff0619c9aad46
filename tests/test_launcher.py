"""The test launcher forks a warm interpreter instead of exec'ing a fresh one: the child
must be indistinguishable from inside — argv, working directory, environment, stdio,
signals, session — and end as the interpreter does (atexit handlers, the exit status)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess

import pytest

from tests.launcher import EXEC_ALWAYS, REPOSITORY, Child, launch

PROBE_FOLDER = REPOSITORY / "tests"


def read_all(descriptor: int) -> bytes:
    received = bytearray()
    while select.select([descriptor], [], [], 20)[0]:
        try:
            data = os.read(descriptor, 65536)
        except OSError:  # EIO: the pty's other side is closed
            break
        if not data:
            break
        received += data
    return bytes(received)


PROBE_AS = {
    "module": ["-m", "launcher_probe", "3"],
    "script": [str(PROBE_FOLDER / "launcher_probe.py"), "3"],
}


def probe(
    python_args: list[str], *, on_terminal: bool, exec_fresh: bool
) -> tuple[Child, int, list[str]]:
    """The probe's report and its exit status, on a pty or on a pipe."""
    environment = {**os.environ, "PROBE_VARIABLE": "seen"}
    if on_terminal:
        ours, theirs = pty.openpty()
        stdio: tuple[int | None, int, int] = (theirs, theirs, theirs)
    else:
        ours, theirs = os.pipe()
        stdio = (None, theirs, theirs)
    child = launch(
        python_args,
        cwd=PROBE_FOLDER,
        env=environment,
        stdio=stdio,
        controlling_terminal=on_terminal,
        exec_fresh=exec_fresh,
    )
    os.close(theirs)
    try:
        output = read_all(ours).decode()
    finally:
        os.close(ours)
    return child, child.wait(20), output.replace("\r\n", "\n").splitlines()


@pytest.mark.skipif(EXEC_ALWAYS, reason="AGENT_TUTORIAL_TEST_LAUNCH=exec: nothing forks")
@pytest.mark.parametrize("form", PROBE_AS)
@pytest.mark.parametrize("on_terminal", [False, True], ids=["pipe", "pty"])
def test_a_forked_start_looks_like_an_exec_from_inside(on_terminal: bool, form: str) -> None:
    python_args = PROBE_AS[form]
    forked_child, forked_status, forked = probe(
        python_args, on_terminal=on_terminal, exec_fresh=False
    )
    executed_child, executed_status, executed = probe(
        python_args, on_terminal=on_terminal, exec_fresh=True
    )

    assert not isinstance(forked_child, subprocess.Popen)  # the fork was what ran
    assert isinstance(executed_child, subprocess.Popen)
    assert forked == executed
    assert forked_status == executed_status == 3
    report, last = forked
    assert last == "atexit ran"
    seen = json.loads(report)
    assert seen["cwd"] == seen["path0"] == str(PROBE_FOLDER)
    assert seen["argv"] == ["launcher_probe.py", "3"]
    assert seen["variable"] == "seen"
    assert seen["session_leader"] is on_terminal
    assert seen["foreground"] is on_terminal
    assert seen["signals"]["SIGINT"] == "python"
    assert [stream["tty"] for stream in seen["streams"]] == [on_terminal] * 3


def test_a_start_whose_environment_changes_how_python_starts_is_an_exec() -> None:
    ours, theirs = os.pipe()
    environment = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    child = launch(
        ["-m", "launcher_probe", "0"],
        cwd=PROBE_FOLDER,
        env=environment,
        stdio=(None, theirs, theirs),
    )
    os.close(theirs)
    output = read_all(ours).decode()
    os.close(ours)

    assert isinstance(child, subprocess.Popen)
    assert child.wait(20) == 0
    assert json.loads(output.splitlines()[0])["streams"][1]["encoding"] == "iso8859-1"
