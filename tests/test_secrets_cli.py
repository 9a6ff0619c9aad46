"""Planted secrets, driven through the CLI against the loopback server: none reaches a
request body or a file under `.agent_tutorial/`, and bash never sees them in its
environment. Also whole outputs persisted by chapter 8 and the tool-argument cap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_tutorial.adapters.sandbox import sandbox_available
from tests.conftest import LOOPBACK_MODEL, TEST_API_KEY, RunCli, write_state
from tests.loopback import LoopbackServer, error_reply, text_stream, tool_stream
from tests.terminal import run_on_two_terminals

PLANTED_ENVIRONMENT = {
    "SERVICE_API_TOKEN": "planted-env-token-5f1c2e9a",
    "DB_PASSWORD": "planted-db-password-77aa31",
}
DOTENV_SECRET = "planted-dotenv-value-c0ffee11"
FILE_TOKENS = {
    "api_key": "sk-proj-" + "Q7vLx2Rk9TzW4mNp8sYd3Fh6",
    "github_token": "ghp_" + "Zq8Wm3Nx7Lp2Kv6Rt9Ys4Hd1Jf5Gb0Cc3Ee8Aa",
    "aws_access_key_id": "AKIAZ7QW3ERT5YUI9OPL",
}
PLANTED = [*PLANTED_ENVIRONMENT.values(), DOTENV_SECRET, TEST_API_KEY, *FILE_TOKENS.values()]


def plant_secrets(workspace: Path) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / ".env").write_text(f"WEBHOOK_SECRET={DOTENV_SECRET}\n", encoding="utf-8")
    filler = "".join(f"line {n}: nothing to see here\n" for n in range(1, 1500))
    tokens = "".join(f"{kind} = {value}\n" for kind, value in FILE_TOKENS.items())
    (workspace / "settings.txt").write_text(tokens + filler + tokens, encoding="utf-8")
    assert (workspace / "settings.txt").stat().st_size > 30_000


def bodies(loopback: LoopbackServer) -> str:
    return json.dumps(loopback.requests)


def files_the_agent_wrote(workspace: Path) -> dict[str, bytes]:
    """Every file under `.agent_tutorial/` but the `.env` the test planted."""
    state = workspace / ".agent_tutorial"
    return {
        str(path.relative_to(state)): path.read_bytes()
        for path in state.rglob("*")
        if path.is_file() and path.name != ".env"
    }


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


SANDBOX_UNAVAILABLE = sandbox_available()


@pytest.mark.parametrize(
    "sandbox",
    [
        "off",
        pytest.param(
            "workspace-write",
            marks=pytest.mark.skipif(SANDBOX_UNAVAILABLE is not None, reason="no sandbox here"),
        ),
    ],
)
def test_planted_secrets_reach_no_request_and_no_file(
    workspace: Path, loopback: LoopbackServer, run_cli_process: RunCli, sandbox: str
) -> None:
    plant_secrets(workspace)
    loopback.queue(
        tool_stream(
            [
                ("c1", "bash", {"command": "env; tr '\\0' '\\n' < /proc/$PPID/environ"}),
                ("c2", "read_file", {"path": "settings.txt"}),
                ("c3", "bash", {"command": "cat settings.txt .agent_tutorial/.env"}),
            ]
        ),
        text_stream("done"),
    )

    run = run_cli_process(
        "run",
        "--chapter",
        "8",
        "-y",
        f"--sandbox={sandbox}",
        "--prompt",
        "look around",
        env=PLANTED_ENVIRONMENT,
        exec_fresh=True,  # the command reads the agent's /proc/PID/environ
    )

    assert run.exit_code == 0, run.stderr
    sent = bodies(loopback)
    on_disk = files_the_agent_wrote(workspace)
    assert {"sessions", "artifacts"} <= {name.split("/")[0] for name in on_disk}
    assert [secret for secret in PLANTED if secret in sent] == []
    assert [
        (name, secret)
        for name, data in on_disk.items()
        for secret in PLANTED
        if secret.encode() in data
    ] == []
    environ_output = tool_messages(loopback.requests[1])[0]
    for name in ("SERVICE_API_TOKEN", "DB_PASSWORD", "OPENAI_API_KEY"):
        if sandbox == "off":  # masked, not missing: the agent's environment did hold them
            assert f"{name}=[REDACTED:{name}]" in environ_output
        else:  # not even there: in the sandbox the agent's process is out of sight
            assert name not in environ_output


def test_a_persisted_artifact_holds_the_redacted_bytes(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    plant_secrets(workspace)
    loopback.queue(
        tool_stream([("c1", "read_file", {"path": "settings.txt"})]), text_stream("done")
    )

    run = run_cli("run", "--chapter", "8", "-y", "--prompt", "read it")

    assert run.exit_code == 0, run.stderr
    artifacts = list((workspace / ".agent_tutorial" / "artifacts").glob("tool-result-*.txt"))
    assert len(artifacts) == 1
    text = artifacts[0].read_text(encoding="utf-8")
    for kind in FILE_TOKENS:
        assert text.count(f"[REDACTED:{kind}]") == 2
    assert "<persisted-tool-result>" in tool_messages(loopback.requests[1])[0]


def test_bash_environment_leaves_out_secret_variables_unless_included(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    write_state(workspace, "config.toml", '[shell_environment]\ninclude = ["DEPLOY_TOKEN"]\n')
    command = "echo ${SERVICE_API_TOKEN:-unset} ${DEPLOY_TOKEN:-unset} ${OPENAI_API_KEY:-unset}"
    loopback.queue(tool_stream([("c1", "bash", {"command": command})]), text_stream("ok"))

    run = run_cli(
        "run",
        "--trust-project",
        "--chapter",
        "2",
        "--prompt",
        "check",
        env={**PLANTED_ENVIRONMENT, "DEPLOY_TOKEN": "deploy-token-value-9"},
    )

    assert run.exit_code == 0, run.stderr
    # DEPLOY_TOKEN reaches bash, but its value is still masked in what the model sees.
    output = tool_messages(loopback.requests[1])[0]
    assert output.startswith("unset [REDACTED:DEPLOY_TOKEN] unset\n")


def test_redact_secrets_false_keeps_token_shapes_but_masks_known_values(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    write_state(workspace, "config.toml", "redact_secrets = false\n")
    token = FILE_TOKENS["github_token"]
    command = f"echo {token} $(cat pw)"
    (workspace / "pw").write_text(PLANTED_ENVIRONMENT["DB_PASSWORD"], encoding="utf-8")
    loopback.queue(tool_stream([("c1", "bash", {"command": command})]), text_stream("ok"))

    run = run_cli(
        "run", "--trust-project", "--chapter", "2", "--prompt", "x", env=PLANTED_ENVIRONMENT
    )

    assert run.exit_code == 0, run.stderr
    assert tool_messages(loopback.requests[1])[0].startswith(f"{token} [REDACTED:DB_PASSWORD]\n")


def test_the_redaction_count_is_in_the_tool_line_and_the_json_result(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    plant_secrets(workspace)
    command = "head -n 3 settings.txt"
    loopback.queue(tool_stream([("c1", "bash", {"command": command})]), text_stream("ok"))

    run = run_cli("run", "--chapter", "2", "--output-format", "json", "--prompt", "x")

    assert run.exit_code == 0, run.stderr
    assert orjson.loads(run.stdout)["usage"]["redactions"] == 3
    assert "3 secrets redacted" in run.stderr


def test_stream_json_tool_finished_lines_count_redactions(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    plant_secrets(workspace)
    command = "head -n 3 settings.txt"
    loopback.queue(tool_stream([("c1", "bash", {"command": command})]), text_stream("ok"))

    run = run_cli("run", "--chapter", "2", "--output-format", "stream-json", "--prompt", "x")

    assert run.exit_code == 0, run.stderr
    records = [orjson.loads(line) for line in run.stdout.splitlines()]
    [finished] = [record for record in records if record["type"] == "tool_finished"]
    assert finished["redactions"] == 3


# --- whole outputs ------------------------------------------------------------------------


def test_chapter_8_persists_a_long_commands_whole_output(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    loopback.queue(tool_stream([("c1", "bash", {"command": "seq 1 200000"})]), text_stream("done"))

    run = run_cli("run", "--chapter", "8", "-y", "--prompt", "count")

    assert run.exit_code == 0, run.stderr
    expected = "".join(f"{n}\n" for n in range(1, 200_001))
    expected += f"[exit code 0 · {len(expected)} bytes of output]"
    [artifact] = (workspace / ".agent_tutorial" / "artifacts").glob("tool-result-*.txt")
    assert artifact.read_text(encoding="utf-8") == expected
    assert f"original_bytes: {len(expected.encode())}\n" in tool_messages(loopback.requests[1])[0]


def test_past_the_disk_cap_the_artifact_says_how_many_bytes_were_dropped(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    state = write_state(workspace, "config.toml", "output_disk_cap_bytes = 100000\n").parent
    loopback.queue(tool_stream([("c1", "bash", {"command": "seq 1 200000"})]), text_stream("done"))

    run = run_cli("run", "--chapter", "8", "-y", "--prompt", "count")

    assert run.exit_code == 0, run.stderr
    whole = "".join(f"{n}\n" for n in range(1, 200_001))
    [artifact] = (state / "artifacts").glob("tool-result-*.txt")
    text = artifact.read_text(encoding="utf-8")
    dropped = len(whole) - 100_000 - 15_000
    assert text.startswith(whole[:100_000] + f"\n… [{dropped} bytes dropped: ")
    assert text.endswith(whole[-15_000:] + f"[exit code 0 · {len(whole)} bytes of output]")


# --- the tool-argument cap ------------------------------------------------------------------


def test_oversized_arguments_end_the_stream_and_are_kept_nowhere(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    """The adapter stops reading at the first byte past the cap (issue 17: endless arguments
    reached 1.26 GB); the registry's own refusal, and the shortened arguments in history,
    remain for models that hand over whole calls (tests/test_loop_secrets.py)."""
    huge = {"path": "big.txt", "content": "x" * (2 * 1024 * 1024)}
    loopback.queue(
        tool_stream([("c1", "write_file", huge)]),
        text_stream("never asked"),
    )

    run = run_cli("run", "--chapter", "2", "-y", "--prompt", "write it")

    assert run.exit_code == 1
    assert "whose arguments pass 1048576 bytes (max_tool_argument_bytes)" in run.stderr
    assert not (workspace / "big.txt").exists()
    assert len(loopback.requests) == 1
    [session] = (workspace / ".agent_tutorial" / "sessions").glob("*.jsonl")
    assert session.stat().st_size < 20_000


# --- text hooks add -----------------------------------------------------------------------

LEAKY_HOOK = """\
cat > /dev/null
leak="key=$OPENAI_API_KEY token=@TOKEN@ gh=@GH@"
case "$1" in
  context) printf '{"additional_context": "%s"}' "$leak" ;;
  replace) printf '{"updated_output": "%s", "additional_context": "%s"}' "$leak" "$leak" ;;
  block) echo "no: $leak" >&2; exit 2 ;;
  fail) echo "broke: $leak" >&2; exit 1 ;;
  stop) printf '{"decision": "block", "reason": "%s"}' "$leak" ;;
esac
"""
HOOK_TOKENS = (FILE_TOKENS["api_key"], FILE_TOKENS["github_token"])


def leaky_hooks_config(workspace: Path) -> None:
    """Hooks at every event that print the API key from their environment and two token
    shapes: as added context, replaced output, a block reason, a failure, a Stop reason."""
    script = LEAKY_HOOK.replace("@TOKEN@", HOOK_TOKENS[0]).replace("@GH@", HOOK_TOKENS[1])
    (workspace / "leak.sh").write_text(script, encoding="utf-8")

    def hook(event: str, how: str, matcher: str | None = None) -> str:
        match = f'matcher = "{matcher}"\n' if matcher else ""
        return f'[[hooks.{event}]]\n{match}command = "bash leak.sh {how}"\n'

    write_state(
        workspace,
        "config.toml",
        hook("UserPromptSubmit", "context")
        + hook("PreToolUse", "context", "read_file")
        + hook("PreToolUse", "block", "bash")
        + hook("PostToolUse", "replace", "read_file")
        + hook("PostToolUse", "fail", "glob")
        + hook("Stop", "stop"),
    )


def test_secrets_hooks_print_reach_no_request_and_no_file(
    workspace: Path, loopback: LoopbackServer, run_cli_process: RunCli
) -> None:
    leaky_hooks_config(workspace)
    (workspace / "notes.txt").write_text("plain notes\n", encoding="utf-8")
    calls = [
        ("c1", "read_file", {"path": "notes.txt"}),
        ("c2", "bash", {"command": "true"}),
        ("c3", "glob", {"pattern": "*.txt"}),
    ]
    loopback.queue(tool_stream(calls), text_stream("done"), text_stream("done again"))

    run = run_cli_process(
        "run", "--trust-project", "--chapter", "8", "-y", "--prompt", "look around"
    )

    assert run.exit_code == 0, run.stderr
    assert len(loopback.requests) == 3  # the Stop hook's reason was sent as one more turn
    sent = bodies(loopback)
    on_disk = files_the_agent_wrote(workspace)
    assert "sessions" in {name.split("/")[0] for name in on_disk}
    leaked = [TEST_API_KEY, *HOOK_TOKENS]
    assert [secret for secret in leaked if secret in sent] == []
    assert [(name, s) for name, data in on_disk.items() for s in leaked if s.encode() in data] == []
    # Masked, not dropped: each hook's text arrived, with the secrets replaced.
    masked = "key=[REDACTED:OPENAI_API_KEY] token=[REDACTED:api_key] gh=[REDACTED:github_token]"
    assert sent.count(masked) >= 6


def test_secrets_a_post_tool_use_hook_adds_count_as_redactions(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli
) -> None:
    leaky_hooks_config(workspace)
    (workspace / "notes.txt").write_text("plain notes\n", encoding="utf-8")
    loopback.queue(
        tool_stream([("c1", "read_file", {"path": "notes.txt"})]),
        text_stream("ok"),
        text_stream("ok again"),
    )

    run = run_cli(
        "run", "--trust-project", "--chapter", "4", "--output-format", "json", "--prompt", "x"
    )

    assert run.exit_code == 0, run.stderr
    # PreToolUse context (3) + PostToolUse replaced output (3) and its context (3).
    assert orjson.loads(run.stdout)["usage"]["redactions"] == 9


@pytest.mark.parametrize(
    ("key", "masked"), [("Zq7xW2p", False), ("Zq7xW2pL", True), ("Zq7xW2pLm", True)]
)
def test_an_api_key_the_server_echoes_in_its_error_is_masked_from_8_characters(
    loopback: LoopbackServer, run_cli: RunCli, key: str, masked: bool
) -> None:
    # A shorter key is a placeholder such as "EMPTY"; masking it would mangle the words.
    echoed = {"error": {"message": f"Incorrect API key provided: {key}. Check it."}}
    loopback.queue(error_reply(401, echoed))

    run = run_cli("run", "--chapter", "1", "--prompt", "hi", env={"OPENAI_API_KEY": key})

    assert run.exit_code == 1
    assert "Incorrect API key provided" in run.stderr
    assert (key in run.stderr) is not masked, run.stderr


# --- what the model writes (issue 27) -------------------------------------------------------

WRITTEN_SECRETS = f"the key {TEST_API_KEY}, the token {FILE_TOKENS['github_token']}, done"
WRITTEN_MASKED = "the key [REDACTED:OPENAI_API_KEY], the token [REDACTED:github_token], done"


def answer_with_secrets(loopback: LoopbackServer) -> None:
    """The answer in pieces of 5 characters: each secret arrives split."""
    loopback.queue(text_stream(WRITTEN_SECRETS, pieces=len(WRITTEN_SECRETS) // 5))


def session_log_text(workspace: Path) -> str:
    (log,) = (workspace / ".agent_tutorial" / "sessions").glob("*.jsonl")
    return log.read_text(encoding="utf-8")


def test_a_secret_the_model_writes_is_masked_on_stdout_and_in_the_session_log(
    workspace: Path, loopback: LoopbackServer, run_cli_process: RunCli
) -> None:
    answer_with_secrets(loopback)

    run = run_cli_process("run", "-c", "2", "-p", "what is my key?")

    assert run.exit_code == 0, run.stderr
    assert run.stdout == WRITTEN_MASKED + "\n"
    assert WRITTEN_MASKED in session_log_text(workspace)
    assert TEST_API_KEY not in session_log_text(workspace)


def test_a_secret_the_model_writes_is_masked_in_the_json_result(
    loopback: LoopbackServer, run_cli: RunCli
) -> None:
    answer_with_secrets(loopback)

    run = run_cli("run", "-c", "2", "-p", "what is my key?", "--output-format", "json")

    assert run.exit_code == 0, run.stderr
    assert orjson.loads(run.stdout)["result"] == WRITTEN_MASKED


def test_a_secret_the_model_writes_is_masked_in_every_stream_json_line(
    loopback: LoopbackServer, run_cli: RunCli
) -> None:
    answer_with_secrets(loopback)

    run = run_cli("run", "-c", "2", "-p", "what is my key?", "--output-format", "stream-json")

    assert run.exit_code == 0, run.stderr
    assert TEST_API_KEY not in run.stdout and FILE_TOKENS["github_token"] not in run.stdout
    assert orjson.loads(run.stdout.splitlines()[-1])["result"] == WRITTEN_MASKED


def test_a_secret_the_model_writes_is_masked_on_a_terminal(
    workspace: Path, loopback: LoopbackServer
) -> None:
    answer_with_secrets(loopback)
    env = {
        "OPENAI_BASE_URL": loopback.base_url,
        "OPENAI_API_KEY": TEST_API_KEY,
        "AGENT_TUTORIAL_MODEL": LOOPBACK_MODEL,
        "HOME": str(workspace.parent / "home"),
    }

    run = run_on_two_terminals(
        ["run", "-c", "2", "-p", "key?", "--no-color"], cwd=workspace, env=env, columns=200
    )

    assert run.exit_code == 0
    assert run.stdout.decode() == WRITTEN_MASKED + "\n"


def test_an_answer_without_a_secret_is_written_as_the_model_wrote_it(
    loopback: LoopbackServer, run_cli_process: RunCli
) -> None:
    almost = "sk-short, ghp_tooshort and a key's name: OPENAI_API_KEY"
    loopback.queue(text_stream(almost, pieces=9))

    run = run_cli_process("run", "-c", "2", "-p", "x")

    assert run.exit_code == 0, run.stderr
    assert run.stdout == almost + "\n"


@pytest.mark.parametrize("tool_calls", ["native", "text"])
def test_a_call_the_model_writes_with_a_secret_runs_as_written(
    workspace: Path, loopback: LoopbackServer, run_cli: RunCli, tool_calls: str
) -> None:
    arguments = {"path": "key.txt", "content": f"token={FILE_TOKENS['github_token']}"}
    write = (
        tool_stream([("c1", "write_file", arguments)])
        if tool_calls == "native"
        else text_stream(
            f"<tool_call>\n{json.dumps({'name': 'write_file', 'arguments': arguments})}\n"
            "</tool_call>"
        )
    )
    loopback.queue(write, text_stream(f"wrote {FILE_TOKENS['github_token']}"))

    run = run_cli("run", "-c", "2", "-y", "-p", "x", "--tool-calls", tool_calls)

    assert run.exit_code == 0, run.stderr
    assert (workspace / "key.txt").read_text() == f"token={FILE_TOKENS['github_token']}"
    assert run.stdout == "wrote [REDACTED:github_token]\n"
