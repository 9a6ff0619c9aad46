"""Chapter 9 end to end: real MCP servers (a small one written with the SDK, and the
registry's `mcp-server-time`) started by `agent-tutorial run`, their tools offered to and
called by the scripted model over the loopback server."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_tutorial.features.mcp_tools import tool_name
from tests.conftest import (
    MARKER_VARIABLE,
    TEST_API_KEY,
    WAIT_S,
    RunCli,
    processes_with_marker,
    start_cli,
    wait_until,
    write_state,
)
from tests.contracts import tool_contents
from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
TINY_SERVER = Path(__file__).parent / "mcp_fixtures" / "tiny_server.py"
GLOSSARY_SERVER = Path(__file__).parent.parent / "chapters" / "offline" / "lesson_mcp_server.py"
"""Lesson 9's server, standard library only, with one tool (`define`): for the tests where
any server will do, since it starts in milliseconds where the SDK's takes a second of CPU.
It also shows the agent working with a server the SDK did not write."""
DEFINE = ("c1", "mcp__glossary__define", {"term": "MCP"})
DEFINITION = "Model Context Protocol: "
SPAWNER = (
    "import os, subprocess, sys\n"
    "subprocess.Popen(['sleep', '60'], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n"
    "if os.fork() == 0:\n"
    "    if os.fork(): os._exit(0)\n"
    "    os.setsid()\n"
    "    if os.fork(): os._exit(0)\n"
    "    os.execvp('sleep', ['sleep', '60'])\n"
    "os.wait()\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)
"""`python -c SPAWNER SERVER.py`: a server that first leaves a helper in its process group
and a daemon that left it (double fork, setsid), both sleeping with no pipe of the
client's, then becomes SERVER.py: what a server starting a database or a watcher does."""


def server_table(name: str, marker: str, *args: str, **options: object) -> str:
    """A `[mcp_servers.NAME]` table running this interpreter on `args` (the tiny server by
    default), its processes carrying `marker`."""
    lines = [
        f"[mcp_servers.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps(list(args) or [str(TINY_SERVER)])}",
        f"env = {{ {MARKER_VARIABLE} = {json.dumps(marker)} }}",
        *(f"{key} = {json.dumps(value)}" for key, value in options.items()),
    ]
    return "\n".join(lines) + "\n"


def glossary_table(marker: str, **options: object) -> str:
    """A `[mcp_servers.glossary]` table running lesson 9's server."""
    return server_table("glossary", marker, str(GLOSSARY_SERVER), **options)


def user_config(workspace: Path, text: str) -> None:
    """`text` as the user's config.toml (the workspace fixture's XDG_CONFIG_HOME)."""
    path = workspace.parent / "home" / ".config" / "agent-tutorial" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def offered_tools(body: dict[str, object]) -> dict[str, dict[str, object]]:
    tools = body.get("tools") or []
    assert isinstance(tools, list)
    return {tool["function"]["name"]: tool["function"] for tool in tools}


def test_a_servers_tools_are_offered_and_called(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, server_table("tiny", marker))
    loopback.queue(tool_stream([("c1", "mcp__tiny__echo", {"text": "hello"})]), text_stream("done"))

    result = run_cli("run", "-y", "--prompt", "say hello")

    assert result.exit_code == 0, result.stderr
    offered = offered_tools(loopback.requests[0])
    assert offered["mcp__tiny__echo"]["description"] == "Return the text given."
    parameters = offered["mcp__tiny__echo"]["parameters"]
    assert isinstance(parameters, dict) and "text" in parameters["properties"]
    assert tool_contents(loopback.requests[1]) == {"c1": "echo: hello"}
    assert processes_with_marker(marker) == []


def test_the_registrys_time_server_answers(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(
        workspace,
        server_table("time", marker, "-m", "mcp_server_time", "--local-timezone", "UTC"),
    )
    call = ("c1", "mcp__time__get_current_time", {"timezone": "UTC"})
    loopback.queue(tool_stream([call]), text_stream("done"))

    result = run_cli("run", "-y", "--prompt", "what time is it?")

    assert result.exit_code == 0, result.stderr
    answer = json.loads(tool_contents(loopback.requests[1])["c1"])
    assert answer["timezone"] == "UTC"
    assert processes_with_marker(marker) == []


def test_chapter_8_has_no_mcp_tools(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, server_table("tiny", marker))
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--chapter", "8", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert not [name for name in offered_tools(loopback.requests[0]) if name.startswith("mcp__")]


def test_an_untrusted_projects_server_is_not_started(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    started = workspace / "started"
    script = f"open({str(started)!r}, 'w').close()"
    write_state(workspace, "config.toml", server_table("evil", marker, "-c", script))
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert not started.exists()
    assert "mcp_servers" in result.stderr  # folder trust names what it ignored


def test_folder_trust_names_each_projects_server_and_the_one_that_changed(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    write_state(workspace, "config.toml", glossary_table(marker))
    entry = {"command": "uvx", "args": ["mcp-server-time"], "sandbox": "off"}
    mcp_json = workspace / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"time": entry}}))
    loopback.queue(text_stream("done"), text_stream("done"))

    untrusted = run_cli("run", "--prompt", "hi")
    panel = run_cli("trust")
    entry["args"] = ["mcp-server-time", "--local-timezone", "UTC"]
    mcp_json.write_text(json.dumps({"mcpServers": {"time": entry}}))
    changed = run_cli("run", "--prompt", "hi")

    assert "ignored: mcp_servers.glossary, mcp_servers.time (`agent" in untrusted.stderr
    assert f"  mcp_servers.glossary: runs {sys.executable} {GLOSSARY_SERVER}\n" in panel.stdout
    assert "  mcp_servers.time: runs uvx mcp-server-time, outside the sandbox\n" in panel.stdout
    assert "(changed since trusted: mcp_servers.time; `agent" in changed.stderr


def test_a_trusted_projects_server_starts(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    write_state(workspace, "config.toml", glossary_table(marker))
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--trust-project", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert "mcp__glossary__define" in offered_tools(loopback.requests[0])


def test_a_server_in_mcp_json_starts_in_a_trusted_folder(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    entry = {
        "command": sys.executable,
        "args": [str(GLOSSARY_SERVER)],
        "env": {MARKER_VARIABLE: marker},
    }
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"glossary": entry}}))
    loopback.queue(text_stream("done"), text_stream("done"))

    untrusted = run_cli("run", "--prompt", "hi")
    trusted = run_cli("run", "--trust-project", "--prompt", "hi")

    assert untrusted.exit_code == trusted.exit_code == 0, trusted.stderr
    assert "mcp__glossary__define" not in offered_tools(loopback.requests[0])
    assert "mcp__glossary__define" in offered_tools(loopback.requests[1])


def test_an_invalid_entry_is_a_configuration_error_naming_file_and_key(
    workspace: Path, run_cli: RunCli
) -> None:
    (workspace / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"x": {"command": "a", "bogus": 1}}})
    )

    result = run_cli("run", "--prompt", "hi")

    assert result.exit_code == 2
    assert f"{workspace / '.mcp.json'}: mcpServers.x.bogus" in result.stderr


def test_a_user_entry_without_command_or_url_is_a_configuration_error(
    workspace: Path, run_cli: RunCli
) -> None:
    user_config(workspace, "[mcp_servers.x]\nargs = ['a']\n")

    result = run_cli("run", "--prompt", "hi")

    assert result.exit_code == 2
    assert "config.toml: mcp_servers.x: Value error, give either command" in result.stderr


def test_the_sec_spellings_are_aliases(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    never = server_table(
        "never", marker, "-c", "import time; time.sleep(60)", startup_timeout_sec=0.5
    )
    user_config(workspace, never)
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert "MCP server 'never' did not start: did not start within 0.5 s" in result.stderr
    assert processes_with_marker(marker) == []


def test_a_server_that_fails_costs_one_warning_and_its_tools(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    broken = server_table("broken", marker, "-c", "raise SystemExit('no such thing')")
    user_config(workspace, broken + glossary_table(marker))
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "MCP server" in line]
    assert len(warnings) == 1 and "'broken'" in warnings[0]
    offered = offered_tools(loopback.requests[0])
    assert "mcp__glossary__define" in offered
    assert not [name for name in offered if name.startswith("mcp__broken")]


def test_a_call_is_asked_for_and_denied_without_a_terminal(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, glossary_table(marker))
    loopback.queue(tool_stream([DEFINE]), text_stream("ok"))

    result = run_cli("run", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[1])["c1"].startswith("Error [permission_denied]")


def test_accept_edits_does_not_allow_a_call(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, glossary_table(marker))
    loopback.queue(tool_stream([DEFINE]), text_stream("ok"))

    result = run_cli("run", "--permission-mode", "accept-edits", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[1])["c1"].startswith("Error [permission_denied]")


@pytest.mark.parametrize(
    ("rule_tool", "allowed"),
    [
        ("mcp__glossary__*", True),
        ("mcp__glossary__define", True),
        ("mcp__glossary__def", False),
        ("mcp__other__*", False),
    ],
)
def test_an_allow_rule_with_a_glob_covers_a_servers_tools(
    workspace: Path,
    loopback: LoopbackServer,
    run_cli: RunCli,
    marker: str,
    rule_tool: str,
    allowed: bool,
) -> None:
    rule = f'[[permissions.rules]]\ntool = "{rule_tool}"\nbehavior = "allow"\n'
    user_config(workspace, glossary_table(marker) + rule)
    loopback.queue(tool_stream([DEFINE]), text_stream("ok"))

    result = run_cli("run", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[1])["c1"].startswith(DEFINITION) is allowed


def test_a_tools_error_is_a_paired_tool_error(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, server_table("tiny", marker))
    loopback.queue(
        tool_stream([("c1", "mcp__tiny__fail", {"reason": "out of cheese"})]), text_stream("ok")
    )

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    content = tool_contents(loopback.requests[1])["c1"]
    # The SDK's server tells the client only which tool failed, not the exception's text.
    assert content.startswith("Error [mcp_tool_error]") and "fail" in content


def test_a_call_that_runs_past_its_timeout_is_an_error_saying_so(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, server_table("tiny", marker, tool_timeout_s=0.5))
    loopback.queue(tool_stream([("c1", "mcp__tiny__slow", {"seconds": 30})]), text_stream("ok"))

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    content = tool_contents(loopback.requests[1])["c1"]
    assert content.startswith("Error [mcp_call_failed]") and "timed out after 0.5 s" in content
    assert processes_with_marker(marker) == []


def test_a_crashed_server_is_an_error_then_restarted_once(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, server_table("tiny", marker))
    loopback.queue(
        tool_stream([("c1", "mcp__tiny__crash", {})]),
        tool_stream([("c2", "mcp__tiny__echo", {"text": "again"})]),
        tool_stream([("c3", "mcp__tiny__crash", {})]),
        tool_stream([("c4", "mcp__tiny__echo", {"text": "once more"})]),
        text_stream("ok"),
    )

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    answers = [tool_contents(loopback.requests[turn])[f"c{turn}"] for turn in range(1, 5)]
    assert answers[0].startswith("Error [mcp_call_failed]")
    assert answers[1] == "echo: again"  # restarted
    assert answers[2].startswith("Error [mcp_call_failed]")
    assert answers[3].startswith("Error [mcp_call_failed]")  # once only
    assert "is not running" in answers[3]
    assert processes_with_marker(marker) == []


def test_a_large_result_is_persisted_whole(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, server_table("tiny", marker))
    loopback.queue(tool_stream([("c1", "mcp__tiny__big", {"size": 100_000})]), text_stream("ok"))

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    content = tool_contents(loopback.requests[1])["c1"]
    assert len(content) < 100_000
    (artifact,) = (workspace / ".agent_tutorial" / "artifacts").glob("tool-result-*")
    whole = artifact.read_text()
    assert whole.startswith("BEGIN") and whole.endswith("END") and len(whole) == 100_000


def test_names_that_do_not_fit_are_made_to_fit_the_same_way_each_time() -> None:
    assert tool_name("time", "get_current_time") == "mcp__time__get_current_time"
    odd = tool_name("my server", "a.b")
    assert odd.startswith("mcp__my_server__a_b_") and odd == tool_name("my server", "a.b")
    assert tool_name("my server", "a.b") != tool_name("my_server", "a_b")
    long = tool_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long != tool_name("s" * 40, "t" * 41)
    assert tool_name("s" * 28, "t" * 29) == f"mcp__{'s' * 28}__{'t' * 29}"  # 64: kept
    one_past = tool_name("s" * 28, "t" * 30)
    assert len(one_past) == 64 and one_past != f"mcp__{'s' * 28}__{'t' * 29}"


def test_stream_json_init_names_each_server_and_its_tools(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    broken = server_table("broken", marker, "-c", "raise SystemExit(1)")
    off = server_table("off", marker, enabled=False)
    user_config(workspace, glossary_table(marker) + broken + off)
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--output-format", "stream-json", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    init = json.loads(result.stdout.splitlines()[0])
    assert init["subtype"] == "init"
    assert init["mcp_servers"] == [
        {"name": "glossary", "status": "connected"},
        {"name": "broken", "status": "failed"},
    ]
    assert "mcp__glossary__define" in init["tools"]


def test_mcp_list_shows_servers_tools_and_failures_without_model_settings(
    workspace: Path, run_cli: RunCli, marker: str
) -> None:
    broken = server_table("broken", marker, "-c", "raise SystemExit('no such thing')")
    user_config(workspace, server_table("tiny", marker) + broken)
    no_model = {"OPENAI_BASE_URL": None, "OPENAI_API_KEY": None, "AGENT_TUTORIAL_MODEL": None}

    text = run_cli("mcp", "list", env=no_model)
    as_json = run_cli("mcp", "list", "--json", env=no_model)

    assert text.exit_code == as_json.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "tiny: connected, 7 tool(s)"
    assert "  mcp__tiny__echo  (echo)" in lines
    assert any(line.startswith("broken: failed:") for line in lines)
    servers = json.loads(as_json.stdout)["mcp_servers"]
    assert [(s["name"], s["status"]) for s in servers] == [
        ("tiny", "connected"),
        ("broken", "failed"),
    ]
    assert {"name": "echo", "model_name": "mcp__tiny__echo"}.items() <= servers[0]["tools"][
        0
    ].items()
    assert processes_with_marker(marker) == []


def test_mcp_list_leaves_an_untrusted_projects_servers_alone(
    workspace: Path, run_cli: RunCli, marker: str
) -> None:
    started = workspace / "started"
    script = f"open({str(started)!r}, 'w').close()"
    write_state(workspace, "config.toml", server_table("evil", marker, "-c", script))

    result = run_cli("mcp", "list")

    assert result.exit_code == 0
    assert not started.exists()
    assert "not trusted, ignored: mcp_servers" in result.stderr


@pytest.mark.parametrize(("options", "written"), [({}, False), ({"sandbox": "off"}, True)])
def test_mcp_list_starts_a_server_in_the_sandbox_a_session_would(
    workspace: Path, run_cli: RunCli, marker: str, options: dict[str, object], written: bool
) -> None:
    outside = workspace.parent / "outside.txt"
    script = f"open({str(outside)!r}, 'w').close()"
    user_config(workspace, server_table("writer", marker, "-c", script, **options))

    result = run_cli("mcp", "list")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("writer: failed:")  # it wrote (or not), then ended
    assert outside.exists() is written


def test_mcp_list_says_when_no_server_is_configured(run_cli: RunCli) -> None:
    result = run_cli("mcp", "list")

    assert result.exit_code == 0
    assert result.stdout.startswith("no MCP servers configured")


@pytest.mark.parametrize(
    ("options", "written"),
    [({}, False), ({"sandbox": "off"}, True), ({"network": True}, True)],
)
def test_a_stdio_server_runs_in_the_sessions_sandbox_unless_its_entry_says_not(
    workspace: Path,
    loopback: LoopbackServer,
    run_cli: RunCli,
    marker: str,
    options: dict[str, object],
    written: bool,
) -> None:
    inside, outside = workspace / "inside.txt", workspace.parent / "outside.txt"
    user_config(workspace, server_table("tiny", marker, **options))
    loopback.queue(
        tool_stream(
            [
                ("c1", "mcp__tiny__write", {"path": str(inside), "text": "in"}),
                ("c2", "mcp__tiny__write", {"path": str(outside), "text": "out"}),
            ]
        ),
        text_stream("ok"),
    )

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert inside.read_text() == "in"
    # In the sandbox /tmp is the session's own: the write lands there, not on the host.
    assert outside.exists() is written
    assert processes_with_marker(marker) == []
    # An MCP tool may change files as bash may: its call takes the turn's checkpoint.
    assert run_cli("undo").stdout.splitlines() == ["removed   inside.txt"]
    assert not inside.exists()


@pytest.mark.parametrize(("options", "writable"), [({}, True), ({"sandbox": "off"}, False)])
def test_the_script_of_a_server_outside_the_sandbox_is_read_only_to_the_tools(
    workspace: Path,
    loopback: LoopbackServer,
    run_cli: RunCli,
    marker: str,
    options: dict[str, object],
    writable: bool,
) -> None:
    # Rewritten, it would run unconfined when its server restarts (as a hook script would).
    script = workspace / "server.py"
    script.write_text(GLOSSARY_SERVER.read_text())
    user_config(workspace, server_table("glossary", marker, str(script), **options))
    rewrite = ("c1", "write_file", {"path": "server.py", "content": "import os\n"})
    loopback.queue(tool_stream([rewrite]), text_stream("ok"))

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    refused = tool_contents(loopback.requests[1])["c1"].startswith("Error [protected_path]")
    assert refused is not writable
    assert (script.read_text() == "import os\n") is writable


def test_a_pre_tool_use_hook_sees_the_full_name_and_can_block_a_call(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    seen = workspace / "seen.json"
    hook = workspace / "guard.py"
    hook.write_text(
        "import json, sys\n"
        f"open({str(seen)!r}, 'w').write(sys.stdin.read())\n"
        "print('no glossary today', file=sys.stderr)\n"
        "sys.exit(2)\n"
    )
    command = f"{sys.executable} {hook}"
    hooks = (
        f'[[hooks.PreToolUse]]\nmatcher = "mcp__glossary__.*"\ncommand = {json.dumps(command)}\n'
    )
    user_config(workspace, glossary_table(marker) + hooks)
    loopback.queue(
        tool_stream([DEFINE, ("c2", "bash", {"command": "true"})]),
        text_stream("ok"),
    )

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    contents = tool_contents(loopback.requests[1])
    assert (
        contents["c1"].startswith("Error [hook_blocked]") and "no glossary today" in contents["c1"]
    )
    assert not contents["c2"].startswith("Error")  # the matcher's other side: bash runs
    assert json.loads(seen.read_text())["tool_name"] == "mcp__glossary__define"


def test_a_secret_in_a_result_is_masked_before_the_model_sees_it(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    user_config(workspace, server_table("tiny", marker))
    loopback.queue(
        tool_stream([("c1", "mcp__tiny__echo", {"text": f"key={TEST_API_KEY}"})]),
        text_stream("ok"),
    )

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    content = tool_contents(loopback.requests[1])["c1"]
    assert TEST_API_KEY not in content and "[REDACTED" in content


def test_the_registrys_git_server_reads_the_repository(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "tracked.txt").write_text("hello\n")
    git = server_table("git", marker, "-m", "mcp_server_git", "--repository", str(workspace))
    user_config(workspace, git)
    call = ("c1", "mcp__git__git_status", {"repo_path": str(workspace)})
    loopback.queue(tool_stream([call]), text_stream("done"))

    result = run_cli("run", "-y", "--prompt", "status?")

    assert result.exit_code == 0, result.stderr
    assert "tracked.txt" in tool_contents(loopback.requests[1])["c1"]
    assert processes_with_marker(marker) == []


@pytest.mark.parametrize("options", [{}, {"sandbox": "off"}])
def test_nothing_a_server_started_outlives_the_run(
    workspace: Path,
    loopback: LoopbackServer,
    run_cli_process: RunCli,
    marker: str,
    options: dict[str, object],
) -> None:
    # Sandboxed, the server's PID namespace ends with it; unconfined, the keeper it runs
    # under ends its group and what left the group, as a bash call's are.
    spawner = server_table("glossary", marker, "-c", SPAWNER, str(GLOSSARY_SERVER), **options)
    user_config(workspace, spawner)
    loopback.queue(tool_stream([DEFINE]), text_stream("ok"))

    result = run_cli_process("run", "-y", "--prompt", "hi", timeout_s=WAIT_S)

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[1])["c1"].startswith(DEFINITION)
    assert processes_with_marker(marker) == []


@pytest.mark.parametrize("options", [{}, {"sandbox": "off"}])
def test_sigterm_during_a_call_leaves_no_server_behind(
    workspace: Path, loopback: LoopbackServer, marker: str, options: dict[str, object]
) -> None:
    user_config(workspace, server_table("tiny", marker, "-c", SPAWNER, str(TINY_SERVER), **options))
    loopback.queue(tool_stream([("c1", "mcp__tiny__slow", {"seconds": 60})]))
    arguments = ("run", "-y", "--prompt", "wait")
    with start_cli(workspace, loopback, *arguments) as cli:
        assert wait_until(lambda: (workspace / "slow-started").exists())
        cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=WAIT_S)

    assert cli.returncode == 143, stderr
    assert processes_with_marker(marker) == []


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_streamable_http_server_is_called_and_not_reconnected_once_gone(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(TINY_SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: listening(port))
        table = f'[mcp_servers.web]\nurl = "http://127.0.0.1:{port}/mcp"\n'
        user_config(workspace, table + 'bearer_token_env_var = "WEB_TOKEN"\n')
        loopback.queue(
            tool_stream([("c1", "mcp__web__echo", {"text": "over http"})]),
            tool_stream([("c2", "mcp__web__crash", {})]),  # the HTTP server's process ends
            tool_stream([("c3", "mcp__web__echo", {"text": "again"})]),
            text_stream("ok"),
        )

        result = run_cli("run", "-y", "--prompt", "hi", env={"WEB_TOKEN": "t0ken"})
    finally:
        server.terminate()
        server.wait(timeout=WAIT_S)

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[1]) == {"c1": "echo: over http"}
    assert tool_contents(loopback.requests[2])["c2"].startswith("Error [mcp_call_failed]")
    gone = tool_contents(loopback.requests[3])["c3"]
    assert gone.startswith("Error [mcp_call_failed]") and "is not reconnected" in gone


def test_the_repl_shows_the_servers_and_counts_their_schemas(
    workspace: Path, make_terminal: MakeTerminal, marker: str
) -> None:
    broken = server_table("broken", marker, "-c", "raise SystemExit('no such thing')")
    user_config(workspace, glossary_table(marker) + broken)
    terminal = make_terminal("run", "--model", "demo")
    terminal.wait_for_prompt()

    terminal.enter("/mcp")
    terminal.wait_for_text("mcp__glossary__define")
    terminal.enter("/context")
    terminal.wait_for_text("tokens so far")

    text = terminal.flat_text()
    assert "glossary: connected, 1 tool(s)" in text
    assert "broken: failed:" in text
    assert re.search(r"MCP tools +1 tool\(s\), [\d,]+ bytes of schemas", text)


@pytest.mark.parametrize(
    ("relative", "options"),
    [("server.py", {}), ("tools/server.py", {"cwd": "tools"})],
    ids=["from the root", "from its cwd"],
)
def test_trust_covers_the_script_a_projects_server_runs(
    workspace: Path,
    loopback: LoopbackServer,
    run_cli: RunCli,
    marker: str,
    relative: str,
    options: dict[str, object],
) -> None:
    script = workspace / relative
    script.parent.mkdir(exist_ok=True)
    script.write_text(GLOSSARY_SERVER.read_text())
    table = server_table("glossary", marker, "server.py", **options)
    write_state(workspace, "config.toml", table)
    assert run_cli("trust").exit_code == 0
    loopback.queue(text_stream("done"), text_stream("done"))

    trusted = run_cli("run", "--prompt", "hi")
    script.write_text(GLOSSARY_SERVER.read_text() + "\n# changed after the folder was trusted\n")
    changed = run_cli("run", "--prompt", "hi")

    assert trusted.exit_code == changed.exit_code == 0, changed.stderr
    assert "mcp__glossary__define" in offered_tools(loopback.requests[0])
    assert "mcp__glossary__define" not in offered_tools(loopback.requests[1])
    assert f"(changed since trusted: mcp server file {relative}; " in changed.stderr


def test_a_projects_server_runs_in_the_project_root_from_a_subfolder(
    workspace: Path,
    loopback: LoopbackServer,
    run_cli: RunCli,
    marker: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (workspace / "server.py").write_text(GLOSSARY_SERVER.read_text())
    (workspace / "sub").mkdir()
    write_state(workspace, "config.toml", server_table("glossary", marker, "server.py"))
    assert run_cli("trust").exit_code == 0
    monkeypatch.chdir(workspace / "sub")  # the session starts below the project root
    loopback.queue(tool_stream([DEFINE]), text_stream("done"))

    result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[1])["c1"].startswith(DEFINITION)


@pytest.mark.parametrize(("answer", "reply"), [("y", DEFINITION), ("n", "declined")])
def test_on_a_terminal_a_call_is_asked_for_and_the_answer_decides(
    workspace: Path,
    loopback: LoopbackServer,
    make_terminal: MakeTerminal,
    marker: str,
    answer: str,
    reply: str,
) -> None:
    user_config(workspace, glossary_table(marker))
    loopback.queue(tool_stream([DEFINE]), text_stream("done"))
    terminal = make_terminal("run", "-p", "go")
    terminal.wait_for_question()

    assert "mcp__glossary__define wants permission" in terminal.flat_text()
    terminal.type(answer)  # one key, no Enter
    assert terminal.wait_for_exit() == 0
    assert reply in tool_contents(loopback.requests[1])["c1"]


def test_a_sandboxed_server_whose_script_lies_under_tmp_still_starts(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    # The sandbox's /tmp is the session's own, which hid a server kept in a checkout under
    # the host's /tmp (CI clones into one): the script's folder is shown again, read-only.
    with tempfile.TemporaryDirectory(dir="/tmp") as checkout:
        script = Path(checkout) / "glossary_server.py"
        script.write_text(GLOSSARY_SERVER.read_text())
        user_config(workspace, server_table("glossary", marker, str(script)))
        loopback.queue(tool_stream([DEFINE]), text_stream("ok"))

        result = run_cli("run", "-y", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[1])["c1"].startswith(DEFINITION)


def glossary_in_the_projects_env(workspace: Path, variable: str) -> tuple[Path, Path]:
    """A project whose `.env` sets one server running its own `server.py` (lesson 9's);
    the script, and the file a rewritten script leaves when it runs."""
    script = workspace / "server.py"
    script.write_text(GLOSSARY_SERVER.read_text())
    servers = {"glossary": {"command": sys.executable, "args": ["server.py"]}}
    write_state(workspace, ".env", f"{variable}='{json.dumps(servers)}'\n")
    return script, workspace / "rewritten-script-ran"


def rewrite_to_leave(script: Path, ran: Path) -> None:
    """`script` made to leave `ran`, then serve as before: what an attacker commits."""
    script.write_text(
        f"import runpy\nopen({str(ran)!r}, 'w').close()\n"
        f"runpy.run_path({str(GLOSSARY_SERVER)!r}, run_name='__main__')\n"
    )


def test_a_server_in_the_projects_env_cannot_be_trusted_so_its_script_never_runs(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    # Trusted through `.env`, a server's script was not hashed: rewritten after trust, it
    # ran with no new question (outside the sandbox, if its entry said so).
    script, ran = glossary_in_the_projects_env(workspace, "Agent_Tutorial_Mcp_Servers")
    refusal = (
        f"invalid configuration in {workspace / '.agent_tutorial' / '.env'}: "
        "Agent_Tutorial_Mcp_Servers: a project's .env may not set MCP servers; MCP servers "
        "belong in .agent_tutorial/config.toml ([mcp_servers.NAME]) or .mcp.json"
    )
    loopback.queue(text_stream("done"))

    trusted = run_cli("trust")
    rewrite_to_leave(script, ran)
    untrusted = run_cli("run", "--prompt", "hi")
    for_this_run = run_cli("run", "--trust-project", "--prompt", "hi")

    assert trusted.exit_code == for_this_run.exit_code == 2
    assert refusal in " ".join(trusted.stderr.split())
    assert refusal in " ".join(for_this_run.stderr.split())
    assert untrusted.exit_code == 0, untrusted.stderr
    assert "ignored: AGENT_TUTORIAL_MCP_SERVERS (`agent" in untrusted.stderr
    assert "mcp__glossary__define" not in offered_tools(loopback.requests[0])
    assert len(loopback.requests) == 1
    assert not ran.exists()


def test_the_users_own_environment_variable_still_sets_servers(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, marker: str
) -> None:
    servers = {"glossary": {"command": sys.executable, "args": [str(GLOSSARY_SERVER)]}}
    write_state(workspace, "config.toml", "max_turns = 5\n")
    loopback.queue(text_stream("done"))

    result = run_cli(
        "run",
        "--trust-project",
        "--prompt",
        "hi",
        env={"AGENT_TUTORIAL_MCP_SERVERS": json.dumps(servers)},
    )

    assert result.exit_code == 0, result.stderr
    assert "mcp__glossary__define" in offered_tools(loopback.requests[0])
