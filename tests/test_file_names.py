"""A file name that is not valid UTF-8 (`caf\\xe9.txt`, as Git can check out) is shown with
that byte escaped, `caf\\xe9.txt`, everywhere: in tool results, on the terminal, in JSON
output, in the session file. The model can pass that form back to the file tools and reach
the same file. Before, glob or grep on such a workspace ended in `UnicodeEncodeError:
surrogates not allowed` from the renderer and the stream-json writer: a traceback, exit 1,
no result line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.core.text import encodable, name_from_shown, printable
from tests.conftest import RunCli, cli_command
from tests.loopback import LoopbackServer, conversation, text_stream, tool_stream
from tests.terminal import Terminal

ODD = b"caf\xe9.txt"
NEW = b"new\xe9.txt"
SHOWN = r"caf\xe9.txt"  # what the model, the terminal and every file show
NEW_SHOWN = r"new\xe9.txt"

EVERY_TOOL = [
    ("c1", "glob", {"pattern": "*"}),
    ("c2", "grep", {"pattern": "hello"}),
    ("c3", "read_file", {"path": SHOWN}),
    ("c4", "edit_file", {"path": SHOWN, "old_text": "hello", "new_text": "howdy"}),
    ("c5", "write_file", {"path": NEW_SHOWN, "content": "fresh\n"}),
    ("c6", "bash", {"command": "ls"}),
]
EXPECTED_RESULTS = {
    "c1": f"1 file matches '*':\n{SHOWN}",
    "c2": f"{SHOWN}:1:hello there",
    "c3": "1\thello there",
    "c4": f"Edited {SHOWN}: replaced 1 occurrence (first at line 1).",
    "c5": f"Created {NEW_SHOWN} (6 bytes).",
    "c6": f"{SHOWN}\n{NEW_SHOWN}\n[exit code 0 · 18 bytes of output]",
}


@pytest.fixture
def odd_name(workspace: Path) -> Path:
    """The workspace with one file whose name is not UTF-8."""
    (workspace / os.fsdecode(ODD)).write_bytes(b"hello there\n")
    return workspace


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in conversation(body) if m["role"] == "tool"}


def stored(workspace: Path, name: bytes) -> bytes:
    return (workspace / os.fsdecode(name)).read_bytes()


def assert_every_tool_worked(workspace: Path, loopback: LoopbackServer) -> None:
    assert tool_results(loopback.requests[1]) == EXPECTED_RESULTS
    names = sorted(os.fsencode(path.name) for path in workspace.iterdir())
    assert names == [b".agent_tutorial", ODD, NEW]
    assert stored(workspace, ODD) == b"howdy there\n"
    assert stored(workspace, NEW) == b"fresh\n"


def session_file(workspace: Path) -> Path:
    [path] = (workspace / ".agent_tutorial" / "sessions").glob("*.jsonl")
    return path


# --- every tool, every output format ------------------------------------------------------


@pytest.mark.usefixtures("odd_name")
@pytest.mark.parametrize("output_format", ["text", "json"])
def test_every_tool_works_on_the_name_and_the_terminal_shows_it_escaped(
    run_cli_process: RunCli, loopback: LoopbackServer, workspace: Path, output_format: str
) -> None:
    loopback.queue(tool_stream(EVERY_TOOL), text_stream("done"))

    result = run_cli_process("run", "-c", "2", "-p", "go", "--output-format", output_format)

    assert result.exit_code == 0, result.stderr
    answer = result.stdout if output_format == "text" else json.loads(result.stdout)["result"]
    assert answer.strip() == "done"
    assert_every_tool_worked(workspace, loopback)
    assert f"read_file {SHOWN}" in result.stderr and f"edit_file {SHOWN}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.usefixtures("odd_name")
def test_stream_json_shows_the_name_escaped_and_ends_with_a_result(
    run_cli_process: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(EVERY_TOOL), text_stream("done"))

    result = run_cli_process("run", "-c", "2", "-p", "go", "--output-format", "stream-json")

    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1]["type"] == "result" and lines[-1]["is_error"] is False
    results = [line["message"] for line in lines if line["type"] == "message"][2:-1]
    assert [message["content"] for message in results] == list(EXPECTED_RESULTS.values())
    assert_every_tool_worked(workspace, loopback)


@pytest.mark.usefixtures("odd_name")
def test_the_session_file_holds_the_escaped_name_and_show_and_resume_read_it(
    run_cli_process: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(EVERY_TOOL), text_stream("done"), text_stream("again"))
    assert run_cli_process("run", "-c", "2", "-p", "go").exit_code == 0
    path = session_file(workspace)
    session_id = path.stem.rsplit("-", 1)[1]

    saved = path.read_bytes().decode("utf-8")  # strict: the file is valid UTF-8
    shown = run_cli_process("sessions", "show", session_id)
    resumed = run_cli_process("run", "--resume", session_id, "-p", "and now?")

    assert all(json.loads(line) for line in saved.splitlines())
    assert json.dumps(SHOWN)[1:-1] in saved
    assert shown.exit_code == 0 and SHOWN in shown.stdout
    assert (resumed.exit_code, resumed.stdout) == (0, "again\n"), resumed.stderr
    assert tool_results(loopback.requests[2]) == EXPECTED_RESULTS


@pytest.mark.usefixtures("odd_name")
def test_the_repl_shows_the_name_escaped(
    make_terminal: Any, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(EVERY_TOOL), text_stream("alldone"))
    terminal: Terminal = make_terminal("run", "--chapter", "2", "-y", columns=120)

    terminal.wait_for_prompt()
    terminal.enter("go")
    terminal.wait_for_text("alldone")
    terminal.wait_for_prompt()

    assert f"read_file {SHOWN}" in terminal.text()
    assert f"write_file {NEW_SHOWN}" in terminal.text()
    assert_every_tool_worked(workspace, loopback)


def test_a_lone_surrogate_in_a_servers_reply_is_sent_back_escaped(
    run_cli_process: RunCli, loopback: LoopbackServer
) -> None:
    """JSON can escape a lone surrogate (`\\udce9`); the reply is echoed in the next request,
    which the SDK encodes as UTF-8."""
    loopback.queue(tool_stream([("c1", "glob", {"pattern": "*"})], content="caf\udce9"))
    loopback.queue(text_stream("caf\udce9 done"))

    result = run_cli_process("run", "-c", "2", "-p", "go", "--output-format", "stream-json")

    assert result.exit_code == 0, result.stderr
    assert conversation(loopback.requests[1])[1]["content"] == SHOWN.removesuffix(".txt")
    assert json.loads(result.stdout.splitlines()[-1])["result"] == "caf\\xe9 done"


# --- the form the model is shown, and reads back --------------------------------------------


@pytest.mark.parametrize(
    "name", [b"caf\xe9.txt", b"\xff\xfe", b"a\x80b\xc3", b"plain.txt", "é.txt".encode()]
)
def test_a_name_shown_to_the_model_reads_back_as_the_same_name(name: bytes) -> None:
    in_memory = os.fsdecode(name)

    shown = encodable(in_memory)

    assert shown.encode("utf-8")  # valid to send, log and print
    assert os.fsencode(name_from_shown(shown)) == name


@pytest.mark.parametrize(
    ("shown", "name"),
    [
        (r"caf\xe9", b"caf\xe9"),
        (r"\x80\xff", b"\x80\xff"),
        (r"\x7f", rb"\x7f"),  # below 0x80 a byte is UTF-8 already: not an escape
        (r"caf\xE9", rb"caf\xE9"),  # escapes are written in lower case only
        (r"caf\xe", rb"caf\xe"),
    ],
)
def test_only_escapes_of_bytes_that_are_not_utf8_are_read_back(shown: str, name: bytes) -> None:
    assert os.fsencode(name_from_shown(shown)) == name


def test_on_the_terminal_the_byte_looks_the_same_as_to_the_model() -> None:
    assert printable(os.fsdecode(ODD)) == encodable(os.fsdecode(ODD)) == SHOWN


def test_a_workspace_whose_own_path_is_not_utf8_runs_hooks_and_ends_with_a_result(
    workspace: Path,
) -> None:
    """The path reaches the system prompt, `system/init` and every hook's input."""
    odd = workspace / os.fsdecode(b"proj\xe9ct")
    (odd / ".agent_tutorial").mkdir(parents=True)
    (odd / ".agent_tutorial" / "config.toml").write_text(
        '[[hooks.UserPromptSubmit]]\ncommand = "cat > hook-input.json"\n'
    )

    done = subprocess.run(
        cli_command(
            "run",
            "--trust-project",
            "--model",
            "demo",
            "-c",
            "4",
            "-p",
            "hi",
            "--output-format",
            "stream-json",
        ),
        cwd=odd,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["cwd"].endswith(r"proj\xe9ct")
    assert lines[-1]["type"] == "result" and lines[-1]["is_error"] is False
    hook_input = json.loads((odd / "hook-input.json").read_text())
    assert hook_input["workspace"].endswith(r"proj\xe9ct")
