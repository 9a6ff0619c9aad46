"""What becomes of a command's output and environment: redacted as it arrives, kept whole
in a private spool up to a disk cap, and secret-looking variables kept from bash."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.shell import OutputSpool, run_command
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.bash import BashSettings, bash_tool
from agent_tutorial.features.redaction import Redactor
from agent_tutorial.features.shell_environment import shell_environment

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
REPO_ROOT = Path(__file__).resolve().parent.parent


def run_bash(workspace: Path, settings: BashSettings, **arguments: object) -> ToolResult:
    registry = ToolRegistry([bash_tool(workspace, settings)])
    return registry.run(tool_call("call-1", "bash", orjson.dumps(arguments).decode()))


def whole_text(result: ToolResult) -> str:
    assert result.whole_output is not None
    try:
        return b"".join(result.whole_output.chunks()).decode()
    finally:
        result.whole_output.close()


def spooled(command: str, workspace: Path, *, cap: int, spool_cap: int) -> OutputSpool:
    result = run_command(
        command, cwd=workspace, timeout_s=30, output_cap_bytes=cap, spool_cap_bytes=spool_cap
    )
    assert result.whole_output is not None
    return result.whole_output


# --- environment -------------------------------------------------------------------------


def test_secret_looking_variables_are_left_out_of_the_environment() -> None:
    environ = {
        "PATH": "/bin",
        "GITHUB_TOKEN": "t",
        "db_password": "p",
        "AWS_SECRET_ACCESS_KEY": "s",
        "GOOGLE_APPLICATION_CREDENTIALS": "c",
        "MY_LLM": "x",
    }

    kept = shell_environment(environ, hidden={"MY_LLM"})

    assert kept == {"PATH": "/bin"}


def test_included_names_are_let_through() -> None:
    environ = {"GITHUB_TOKEN": "t", "NPM_TOKEN": "n", "MY_LLM": "x"}

    kept = shell_environment(environ, include=["GITHUB_TOKEN", "MY_LLM"], hidden={"MY_LLM"})

    assert kept == {"GITHUB_TOKEN": "t", "MY_LLM": "x"}


def test_a_variable_whose_value_is_a_url_with_a_password_is_left_out_unless_included() -> None:
    environ = {
        "HTTPS_PROXY": "http://me:hunter2-long@proxy:3128",
        "HTTP_PROXY": "http://proxy:3128",
        "ALL_PROXY": "socks5://me:hunter2-long@proxy:1080",
    }

    kept = shell_environment(environ, include=["ALL_PROXY"])

    assert kept == {"HTTP_PROXY": "http://proxy:3128", "ALL_PROXY": environ["ALL_PROXY"]}


def test_bash_sees_no_secret_variables_unless_included(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", "token-value-1")
    monkeypatch.setenv("DEPLOY_KEY", "deploy-value-2")
    settings = BashSettings(include_env=frozenset({"DEPLOY_KEY"}))

    result = run_bash(
        workspace, settings, command='echo "${SERVICE_TOKEN:-unset} ${DEPLOY_KEY:-unset}"'
    )

    assert result.content.startswith("unset deploy-value-2\n")


# --- redaction as output arrives ------------------------------------------------------------


# Prints its arguments one after another, and before each next one waits until the reader
# has drained the pipe: every piece reaches the reader in reads of its own, however fast or
# loaded the machine (a controlled writer, where a pause would only make a split likely).
DRAINING_WRITER = (
    "import fcntl, os, struct, sys, termios, time\n"
    "for piece in sys.argv[1:]:\n"
    "    data = piece.encode()\n"
    "    while data:\n"
    "        data = data[os.write(1, data) :]\n"
    "    while struct.unpack('i', fcntl.ioctl(1, termios.FIONREAD, bytes(4)))[0]:\n"
    "        time.sleep(0.001)  # a polling interval: the order never depends on it\n"
)


def printed_in_separate_reads(*pieces: str) -> str:
    """A command that prints `pieces` so that no read of its output takes in two of them."""
    return shlex.join([sys.executable, "-c", DRAINING_WRITER, *pieces])


def test_a_secret_printed_in_two_pieces_is_masked(workspace: Path) -> None:
    half = len(GITHUB_TOKEN) // 2
    command = printed_in_separate_reads(GITHUB_TOKEN[:half], GITHUB_TOKEN[half:] + "\n")

    result = run_bash(workspace, BashSettings(redactor=Redactor({})), command=command)

    assert result.content == "[REDACTED:github_token]\n[exit code 0 · 45 bytes of output]"
    assert result.redactions == 1


def test_a_secret_across_the_cut_is_masked_before_the_output_is_cut(workspace: Path) -> None:
    # The token starts 10 bytes before the in-memory head ends: cutting first would keep
    # its first 10 characters, too short for any shape to recognise.
    command = f"head -c 14990 /dev/zero | tr '\\0' a; echo ' {GITHUB_TOKEN}'; seq 1 20000"

    result = run_bash(workspace, BashSettings(redactor=Redactor({})), command=command)

    assert "ghp_" not in result.content
    assert "[REDACTED:github_token]" in whole_text(result)


def test_a_private_key_across_pipe_reads_is_masked_in_the_whole_output(workspace: Path) -> None:
    # The key arrives in two reads, split 700 bytes in.
    body = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2MXgD8bFbWq0dP7Hk3ZMAf7XwVbK\n" * 25
    key = f"-----BEGIN PRIVATE KEY-----\n{body}-----END PRIVATE KEY-----\n"
    command = printed_in_separate_reads("a" * 65500 + key[:700], key[700:]) + "; seq 1 5000"

    result = run_bash(workspace, BashSettings(redactor=Redactor({})), command=command)

    whole = whole_text(result)
    assert "MIIE" not in whole and "MIIE" not in result.content
    assert "a" * 65500 + "[REDACTED:private_key]\n1\n" in whole
    assert result.redactions == 1


def test_known_values_are_masked_in_the_output(workspace: Path) -> None:
    redactor = Redactor({"correct-horse-battery": "DB_PASSWORD"})

    result = run_bash(
        workspace, BashSettings(redactor=redactor), command="echo correct-horse-battery"
    )

    assert result.content.startswith("[REDACTED:DB_PASSWORD]\n")


# --- whole output in a spool --------------------------------------------------------------


def test_output_within_the_cap_needs_no_spool(workspace: Path) -> None:
    result = run_command("seq 1 10", cwd=workspace, timeout_s=10, spool_cap_bytes=1000)

    assert result.whole_output is None


def test_output_over_the_cap_is_kept_whole_in_the_spool(workspace: Path) -> None:
    expected = "".join(f"{n}\n" for n in range(1, 20001))

    spool = spooled("seq 1 20000", workspace, cap=100, spool_cap=10**6)
    try:
        assert b"".join(spool.chunks()).decode() == expected
        assert (spool.total_bytes, spool.dropped_bytes) == (len(expected), 0)
    finally:
        spool.close()


def test_without_a_usable_temporary_directory_the_command_still_runs(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(workspace / "missing"))

    result = run_command(
        "seq 1 20000", cwd=workspace, timeout_s=10, output_cap_bytes=100, spool_cap_bytes=10**6
    )

    assert (result.exit_code, result.truncated, result.whole_output) == (0, True, None)
    assert result.output.endswith("19999\n20000\n")


def test_the_spool_is_a_private_file_without_a_name(workspace: Path) -> None:
    spool = spooled("seq 1 20000", workspace, cap=100, spool_cap=10**6)
    try:
        descriptor = spool._descriptor
        assert stat.S_IMODE(os.fstat(descriptor).st_mode) == 0o600
        assert os.fstat(descriptor).st_nlink == 0  # in no directory: gone once closed
    finally:
        spool.close()


def test_past_the_disk_cap_the_spool_says_how_many_bytes_it_dropped(workspace: Path) -> None:
    spool = spooled("seq 1 20000", workspace, cap=100, spool_cap=1000)
    try:
        text = b"".join(spool.chunks()).decode()
    finally:
        spool.close()
    whole = "".join(f"{n}\n" for n in range(1, 20001))
    head, note_and_tail = text[:1000], text[1000:]
    kept_tail = note_and_tail.split("] …\n", 1)[1]
    assert head == whole[:1000]
    assert whole.endswith(kept_tail) and len(kept_tail) == 50
    dropped = len(whole) - 1000 - 50
    assert f"\n… [{dropped} bytes dropped: the output passed the 1000-byte disk cap] …\n" in text


def test_the_bash_result_carries_the_whole_output_with_its_status_line(workspace: Path) -> None:
    result = run_bash(workspace, BashSettings(), command="seq 1 20000")

    expected = "".join(f"{n}\n" for n in range(1, 20001))
    assert whole_text(result) == expected + f"[exit code 0 · {len(expected)} bytes of output]"
    assert "bytes omitted" in result.content


def test_a_timed_out_command_keeps_its_explanation_in_the_whole_output(workspace: Path) -> None:
    result = run_bash(workspace, BashSettings(), command="seq 1 20000; sleep 30", timeout_s=1)

    text = whole_text(result)
    assert result.error_code == "timeout"
    assert text.startswith("Error [timeout]: the command ran longer than 1 s")
    assert text.endswith("20000\n[timed out · 108894 bytes of output]")


def test_a_60_mb_output_is_kept_whole_with_bounded_memory(tmp_path: Path) -> None:
    """In a fresh interpreter, so the peak resident size is this command's alone."""
    script = """
import hashlib, json, sys
from pathlib import Path
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry
from agent_tutorial.features.bash import BashSettings, bash_tool
from agent_tutorial.features.redaction import Redactor

settings = BashSettings(redactor=Redactor({"not-in-the-output": "SOME_TOKEN"}))
registry = ToolRegistry([bash_tool(Path(sys.argv[1]), settings)])
command = "yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 60000000"
result = registry.run(tool_call("c1", "bash", json.dumps({"command": command})))
digest, size = hashlib.sha256(), 0
for chunk in result.whole_output.chunks():
    digest.update(chunk)
    size += len(chunk)
result.whole_output.close()
# VmHWM belongs to this process's own memory map; ru_maxrss would include pytest's peak.
status = Path("/proc/self/status").read_text()
peak_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
print(json.dumps({"size": size, "sha256": digest.hexdigest(), "peak_mib": peak_kib / 1024}))
"""
    finished = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    report = json.loads(finished.stdout)

    # The expected bytes are hashed block by block, so 60 MB never swells pytest itself.
    expected, remaining = hashlib.sha256(), 60_000_000
    block = b"0123456789abcdefghijklmnopqrstuvwxyz\n" * 10_000
    while remaining:
        piece = block[:remaining]
        expected.update(piece)
        remaining -= len(piece)
    status = "\n[exit code 0 · 60000000 bytes of output]".encode()
    expected.update(status)
    assert report["size"] == 60_000_000 + len(status)
    assert report["sha256"] == expected.hexdigest()
    assert report["peak_mib"] < 150
