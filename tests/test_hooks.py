"""Chapter 4: hooks in code and from config, run as real commands around real tool calls."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
import tomllib
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from agent_tutorial.adapters.filesystem import Workspace
from agent_tutorial.adapters.hook_runner import command_hook
from agent_tutorial.core.events import EventBus, Notice
from agent_tutorial.core.hooks import (
    CommandHookConfig,
    HookCallback,
    HookError,
    HookGuard,
    HookInput,
    HookOutcome,
    HookRegistry,
    HooksConfig,
)
from agent_tutorial.core.loop import AgentRunner, PromptBlocked
from agent_tutorial.core.messages import ToolMessage, UserMessage, tool_call
from agent_tutorial.core.permissions import PermissionPolicy
from agent_tutorial.core.tools import ParsedCall, ToolResult, tool_success
from agent_tutorial.features.redaction import Redactor
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply
from tests.conftest import run_cli_measuring_peak_rss, wait_until
from tests.event_log import EventLog
from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.test_permissions import ScriptedApprover, make_tools, parse


def script_hook(directory: Path, body: str, name: str = "hook.py") -> str:
    """Write a tiny python hook script and return the shell command that runs it."""
    script = directory / name
    script.write_text("import json, sys\n" + body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def registry_with(
    workspace: Path, event: str, body: str, *, matcher: str | None = None, timeout_s: float = 30
) -> HookRegistry:
    config = HooksConfig.model_validate(
        {
            event: [
                {
                    "command": script_hook(workspace.parent, body),
                    "matcher": matcher,
                    "timeout_s": timeout_s,
                }
            ]
        }
    )
    return HookRegistry.from_config(config, workspace, command_hook)


def auto_guard(registry: HookRegistry) -> HookGuard:
    return HookGuard(registry, PermissionPolicy(Workspace(registry.workspace), mode="auto"))


def assert_error(result: ParsedCall | ToolResult, code: str) -> ToolResult:
    assert isinstance(result, ToolResult), result
    assert result.is_error
    assert result.error_code == code, result.content
    return result


BASH_LS = {"command": "ls"}

# --- what a command hook is told --------------------------------------------------------


def test_command_hook_reads_the_event_as_json_on_stdin(workspace: Path) -> None:
    seen = workspace.parent / "seen.json"
    body = f"open({str(seen)!r}, 'w').write(sys.stdin.read())\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    guard.before_call(parse("bash", **BASH_LS))
    assert orjson.loads(seen.read_bytes()) == {
        "event": "PreToolUse",
        "tool_name": "bash",
        "tool_input": {"command": "ls"},
        "workspace": str(workspace),
    }


def test_command_hook_runs_in_the_workspace(workspace: Path) -> None:
    body = "import os; print(json.dumps({'additional_context': os.getcwd()}))\n"
    guard = auto_guard(registry_with(workspace, "PostToolUse", body))
    result = guard.after_call(parse("bash", **BASH_LS), tool_success("out"))
    assert result.content == f"out\n\n[hook context] {workspace}"


def test_post_tool_use_hook_is_told_the_result(workspace: Path) -> None:
    seen = workspace.parent / "seen.json"
    body = f"open({str(seen)!r}, 'w').write(sys.stdin.read())\n"
    guard = auto_guard(registry_with(workspace, "PostToolUse", body))
    guard.after_call(parse("bash", **BASH_LS), tool_success("a.txt"))
    assert orjson.loads(seen.read_bytes())["tool_result"] == {
        "content": "a.txt",
        "is_error": False,
        "error_code": None,
    }


# --- PreToolUse outcomes --------------------------------------------------------------------


def test_hook_allow_lets_an_allowed_call_run(workspace: Path) -> None:
    guard = auto_guard(registry_with(workspace, "PreToolUse", 'print(\'{"decision": "allow"}\')'))
    parsed = parse("bash", **BASH_LS)
    assert guard.before_call(parsed) is parsed


def test_hook_allow_does_not_lift_the_policy_ask(workspace: Path) -> None:
    registry = registry_with(workspace, "PreToolUse", 'print(\'{"decision": "allow"}\')')
    guard = HookGuard(registry, PermissionPolicy(Workspace(workspace), mode="ask"))
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "permission_denied")
    assert "no terminal" in result.content


def test_hook_allow_does_not_lift_a_boundary(workspace: Path) -> None:
    guard = auto_guard(registry_with(workspace, "PreToolUse", 'print(\'{"decision": "allow"}\')'))
    assert_error(guard.before_call(parse("write_file", path=".git/config")), "permission_denied")


def test_exit_2_blocks_with_stderr_as_the_reason(workspace: Path) -> None:
    body = "sys.stderr.write('no deleting in this repo\\n'); sys.exit(2)\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    result = assert_error(guard.before_call(parse("bash", command="rm -rf x")), "hook_blocked")
    assert result.content == (
        "Error [hook_blocked]: blocked by a PreToolUse hook: no deleting in this repo"
    )


@pytest.mark.parametrize("decision", ["deny", "block"])
def test_json_deny_blocks_with_its_reason(workspace: Path, decision: str) -> None:
    body = f"print(json.dumps({{'decision': {decision!r}, 'reason': 'frozen branch'}}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "hook_blocked")
    assert result.content.endswith("frozen branch")


def test_continue_false_blocks_the_call(workspace: Path) -> None:
    body = "print(json.dumps({'continue': False, 'reason': 'enough for today'}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "hook_blocked")
    assert "enough for today" in result.content


def test_hook_ask_forces_the_approval_question_even_in_auto_mode(workspace: Path) -> None:
    body = "print(json.dumps({'decision': 'ask', 'reason': 'touches prod'}))\n"
    registry = registry_with(workspace, "PreToolUse", body)
    approver = ScriptedApprover("no")
    guard = HookGuard(
        registry, PermissionPolicy(Workspace(workspace), mode="auto", approver=approver)
    )
    assert_error(guard.before_call(parse("bash", command="deploy")), "permission_denied")
    (request,) = approver.requests
    assert request.reason == "a PreToolUse hook asks for approval: touches prod"


def test_hook_ask_does_not_soften_a_policy_deny_into_a_question(workspace: Path) -> None:
    registry = registry_with(workspace, "PreToolUse", "print(json.dumps({'decision': 'ask'}))\n")
    approver = ScriptedApprover()  # must never be asked
    guard = HookGuard(
        registry, PermissionPolicy(Workspace(workspace), mode="auto", approver=approver)
    )
    result = assert_error(guard.before_call(parse("write_file", path="../x")), "permission_denied")
    assert "only write inside the workspace" in result.content
    assert approver.requests == []


def test_hook_ask_overrides_a_remembered_approval(workspace: Path) -> None:
    body = "print(json.dumps({'decision': 'ask'}))\n"
    registry = registry_with(workspace, "PreToolUse", body)
    approver = ScriptedApprover("always", "yes")
    guard = HookGuard(registry, PermissionPolicy(Workspace(workspace), approver=approver))
    guard.before_call(parse("bash", command="make"))
    guard.before_call(parse("bash", command="make"))
    assert len(approver.requests) == 2


def test_unparsable_stdout_is_a_hook_execution_error(workspace: Path) -> None:
    guard = auto_guard(registry_with(workspace, "PreToolUse", "print('all good!')\n"))
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "hook_execution_error")
    assert "bash did not run" in result.content
    assert "unusable JSON" in result.content


def test_misspelt_key_is_a_hook_execution_error_not_a_silent_allow(workspace: Path) -> None:
    body = "print(json.dumps({'decison': 'deny'}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "hook_execution_error")
    assert "decison" in result.content


def test_crash_is_a_hook_execution_error_with_its_stderr(workspace: Path) -> None:
    body = "raise SystemExit('guard exploded')\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "hook_execution_error")
    assert "exited with 1: guard exploded" in result.content


def test_timeout_kills_the_hook_and_its_children(workspace: Path) -> None:
    child_pid_file = workspace.parent / "child.pid"
    body = (
        "import subprocess, time\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"open({str(child_pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    guard = auto_guard(registry_with(workspace, "PreToolUse", body, timeout_s=0.5))
    started = time.monotonic()
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "hook_execution_error")
    assert time.monotonic() - started < 10
    assert "timed out after 0.5 s and was killed" in result.content
    child = int(child_pid_file.read_text())
    gone = wait_until(lambda: gone_or_zombie(child), timeout_s=10)
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone, f"process {child} outlived its hook"


def command_hook_for(workspace: Path, command: str) -> HookCallback:
    return command_hook(CommandHookConfig(command=command), workspace)


def prompt_input(workspace: Path) -> HookInput:
    return HookInput(event="UserPromptSubmit", workspace=workspace, prompt="go")


def test_a_hook_that_closed_its_output_is_waited_for_not_killed(workspace: Path) -> None:
    # Closing stdout and stderr is not exiting: a hook may redirect its output and go on
    # working, and its exit status is its verdict. The pause widens the window in which
    # a sweep on end-of-file would kill it, so the race shows on every run.
    hook = command_hook_for(workspace, "exec >/dev/null 2>&1; sleep 0.2; touch done")
    assert hook(prompt_input(workspace)) == HookOutcome()
    assert (workspace / "done").exists()


def test_a_hook_that_closed_its_output_but_runs_on_times_out(workspace: Path) -> None:
    config = CommandHookConfig(command="exec >/dev/null 2>&1; sleep 60", timeout_s=0.5)
    with pytest.raises(HookError, match=r"timed out after 0\.5 s and was killed"):
        command_hook(config, workspace)(prompt_input(workspace))


def test_a_touch_hook_succeeds_200_times_in_200(workspace: Path) -> None:
    # touch closes its stdout and stderr on its way out, a moment before it exits; a
    # sweep on end-of-file killed it there in 2 runs in 12. (The marker lies outside the
    # project: a file the command names in it would be a hook script, and a new one there
    # stops the hook.)
    hook = command_hook_for(workspace, "touch ../marker")
    failures = []
    for run in range(200):
        try:
            hook(prompt_input(workspace))
        except HookError as error:
            failures.append(f"run {run}: {error}")
    assert failures == []


def gone_or_zombie(pid: int) -> bool:
    """True once a process has exited (a zombie only awaits its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_updated_input_replaces_the_arguments(workspace: Path) -> None:
    body = "print(json.dumps({'updated_input': {'command': 'ls -la'}}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    checked = guard.before_call(parse("bash", **BASH_LS))
    assert isinstance(checked, ParsedCall)
    assert checked.arguments_dict() == {"command": "ls -la"}
    assert checked.call.arguments == '{"command":"ls"}'  # history keeps what the model sent


def test_updated_input_merges_over_the_other_arguments(workspace: Path) -> None:
    body = "print(json.dumps({'updated_input': {'content': 'redacted'}}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    checked = guard.before_call(parse("write_file", path="a.txt", content="secret"))
    assert isinstance(checked, ParsedCall)
    assert checked.arguments_dict() == {"path": "a.txt", "content": "redacted"}


def test_invalid_updated_input_is_a_hook_execution_error(workspace: Path) -> None:
    body = "print(json.dumps({'updated_input': {'command': 5}}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    result = assert_error(guard.before_call(parse("bash", **BASH_LS)), "hook_execution_error")
    assert "does not fit bash's arguments: command: Input should be a valid string" in (
        result.content
    )


def test_updated_input_is_checked_by_the_policy(workspace: Path) -> None:
    body = "print(json.dumps({'updated_input': {'path': '.git/hooks/pre-commit'}}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    result = assert_error(guard.before_call(parse("write_file", path="a.txt")), "permission_denied")
    assert ".git/" in result.content


def test_pre_tool_use_context_is_appended_to_the_result(workspace: Path) -> None:
    body = "print(json.dumps({'additional_context': 'CI is red on main'}))\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body))
    parsed = guard.before_call(parse("bash", **BASH_LS))
    assert isinstance(parsed, ParsedCall)
    result = guard.after_call(parsed, tool_success("a.txt"))
    assert result.content == "a.txt\n\n[hook context] CI is red on main"


# --- matchers -----------------------------------------------------------------------------


def test_matcher_limits_a_hook_to_matching_tools(workspace: Path) -> None:
    body = "sys.exit(2)\n"
    guard = auto_guard(registry_with(workspace, "PreToolUse", body, matcher="write_file|edit_file"))
    assert isinstance(guard.before_call(parse("bash", **BASH_LS)), ParsedCall)
    assert_error(guard.before_call(parse("write_file", path="a.txt")), "hook_blocked")


def test_matcher_must_match_the_whole_tool_name(workspace: Path) -> None:
    guard = auto_guard(registry_with(workspace, "PreToolUse", "sys.exit(2)\n", matcher="file"))
    assert isinstance(guard.before_call(parse("write_file", path="a.txt")), ParsedCall)


@pytest.mark.parametrize("matcher", [None, "", "*", ".*"])
def test_empty_or_star_matcher_matches_every_tool(workspace: Path, matcher: str | None) -> None:
    guard = auto_guard(registry_with(workspace, "PreToolUse", "sys.exit(2)\n", matcher=matcher))
    assert_error(guard.before_call(parse("read_file", path="a.txt")), "hook_blocked")


# --- PostToolUse outcomes -----------------------------------------------------------------


def test_updated_output_replaces_the_result_text(workspace: Path) -> None:
    body = (
        "data = json.load(sys.stdin)\n"
        "text = data['tool_result']['content'].replace('hunter2', '***')\n"
        "print(json.dumps({'updated_output': text}))\n"
    )
    guard = auto_guard(registry_with(workspace, "PostToolUse", body))
    result = guard.after_call(parse("bash", **BASH_LS), tool_success("password=hunter2"))
    assert result == tool_success("password=***")


def test_post_tool_use_context_is_appended(workspace: Path) -> None:
    body = "print(json.dumps({'additional_context': 'remember to run the tests'}))\n"
    guard = auto_guard(registry_with(workspace, "PostToolUse", body))
    result = guard.after_call(parse("bash", **BASH_LS), tool_success("ok"))
    assert result.content == "ok\n\n[hook context] remember to run the tests"


def test_post_tool_use_deny_withholds_the_result(workspace: Path) -> None:
    body = "sys.stderr.write('output holds a key'); sys.exit(2)\n"
    guard = auto_guard(registry_with(workspace, "PostToolUse", body))
    result = guard.after_call(parse("bash", **BASH_LS), tool_success("AKIA123"))
    assert result.content == (
        "Error [hook_blocked]: bash ran, but a PostToolUse hook withheld its result: "
        "output holds a key"
    )


def test_failing_post_tool_use_hook_withholds_the_result(workspace: Path) -> None:
    guard = auto_guard(registry_with(workspace, "PostToolUse", "print('{broken')\n"))
    result = guard.after_call(parse("bash", **BASH_LS), tool_success("AKIA123"))
    assert_error(result, "hook_execution_error")
    assert "AKIA123" not in result.content
    assert "bash ran" in result.content


def test_post_tool_use_continue_false_tells_the_model_to_stop(workspace: Path) -> None:
    body = "print(json.dumps({'continue': False, 'reason': 'budget spent'}))\n"
    guard = auto_guard(registry_with(workspace, "PostToolUse", body))
    result = guard.after_call(parse("bash", **BASH_LS), tool_success("ok"))
    assert (
        result.content == "ok\n\n[hook context] budget spent. Use no more tools; answer the user."
    )


# --- prompts and stopping -------------------------------------------------------------------


def test_user_prompt_submit_exit_2_blocks_the_prompt(workspace: Path) -> None:
    body = "sys.stderr.write('no prompts about prod'); sys.exit(2)\n"
    guard = auto_guard(registry_with(workspace, "UserPromptSubmit", body))
    with pytest.raises(PromptBlocked, match="no prompts about prod"):
        guard.on_prompt("deploy to prod")


def test_user_prompt_submit_context_is_appended_to_the_prompt(workspace: Path) -> None:
    body = (
        "prompt = json.load(sys.stdin)['prompt']\n"
        "print(json.dumps({'additional_context': f'({len(prompt)} chars)'}))\n"
    )
    guard = auto_guard(registry_with(workspace, "UserPromptSubmit", body))
    assert guard.on_prompt("hello") == "hello\n\n(5 chars)"


def test_failing_user_prompt_submit_hook_blocks_the_prompt(workspace: Path) -> None:
    guard = auto_guard(registry_with(workspace, "UserPromptSubmit", "sys.exit(3)\n"))
    with pytest.raises(PromptBlocked, match="exited with 3"):
        guard.on_prompt("hello")


def test_stop_hook_exit_2_forces_exactly_one_more_turn(workspace: Path) -> None:
    body = "sys.stderr.write('the tests were not run'); sys.exit(2)\n"
    guard = auto_guard(registry_with(workspace, "Stop", body))
    model = ScriptedModel([text_reply("done"), text_reply("really done")])
    runner = AgentRunner(model, make_tools(), guards=[guard], turn_guards=[guard])
    assert runner.run("fix it").final_text == "really done"
    follow_up = model.requests[1].messages[-1]
    assert follow_up == UserMessage("Stop hook feedback:\nthe tests were not run")
    model.assert_exhausted()


def test_stop_hook_reads_the_final_text_and_lets_the_run_end(workspace: Path) -> None:
    body = "assert json.load(sys.stdin)['final_text'] == 'done'\n"
    guard = auto_guard(registry_with(workspace, "Stop", body))
    assert guard.on_stop("done") is None


def test_stop_hook_continue_false_ends_the_run_even_after_a_block(workspace: Path) -> None:
    registry = HookRegistry(workspace)
    registry.add("Stop", lambda _: HookOutcome(decision="deny", reason="go on"))
    registry.add("Stop", lambda _: HookOutcome(continue_=False))
    assert auto_guard(registry).on_stop("done") is None


def test_failing_stop_hook_warns_and_lets_the_run_end(workspace: Path) -> None:
    log = EventLog()
    registry = registry_with(workspace, "Stop", "sys.exit(1)\n")
    guard = HookGuard(registry, None, events=EventBus([log]))
    assert guard.on_stop("done") is None
    (notice,) = log.events
    assert isinstance(notice, Notice)
    assert notice.level == "warning"
    assert "a Stop hook failed" in notice.text


# --- in the loop, from config -------------------------------------------------------------


def test_config_hook_exit_2_blocks_bash_and_the_model_reads_stderr(workspace: Path) -> None:
    command = script_hook(workspace.parent, "sys.stderr.write('use make, not rm'); sys.exit(2)\n")
    toml = f"""
[[hooks.PreToolUse]]
matcher = "bash"
command = {orjson.dumps(command).decode()}
timeout_s = 30
"""
    config = HooksConfig.model_validate(tomllib.loads(toml)["hooks"])
    guard = auto_guard(HookRegistry.from_config(config, workspace, command_hook))
    call = tool_call("call_1", "bash", '{"command": "rm -rf build"}')
    model = ScriptedModel([tool_reply(call), text_reply("ok")])
    AgentRunner(model, make_tools(), guards=[guard], turn_guards=[guard]).run("clean")
    tool_result = model.requests[1].messages[-1]
    assert isinstance(tool_result, ToolMessage)
    assert (
        tool_result.content
        == "Error [hook_blocked]: blocked by a PreToolUse hook: use make, not rm"
    )


def test_hooks_config_rejects_an_unknown_event() -> None:
    with pytest.raises(ValidationError, match="PreToolUsed"):
        HooksConfig.model_validate({"PreToolUsed": [{"command": "true"}]})


def test_hooks_config_rejects_a_bad_matcher_regex() -> None:
    with pytest.raises(ValidationError, match="not a valid regex"):
        HooksConfig.model_validate({"PreToolUse": [{"command": "true", "matcher": "(bash"}]})


def test_hooks_config_rejects_a_matcher_on_an_event_without_tools() -> None:
    with pytest.raises(ValidationError, match="Stop hooks have no tool name"):
        HooksConfig.model_validate({"Stop": [{"command": "true", "matcher": "bash"}]})


def test_command_hook_config_rejects_unknown_keys_and_bad_timeouts() -> None:
    with pytest.raises(ValidationError, match="timeout"):
        CommandHookConfig.model_validate({"command": "true", "timeout": 5})
    with pytest.raises(ValidationError, match="timeout_s"):
        CommandHookConfig(command="true", timeout_s=0)


# --- the registry in code -----------------------------------------------------------------


def test_code_hooks_run_in_order_and_see_updated_input(workspace: Path) -> None:
    seen: list[object] = []

    def rewrite(hook_input: HookInput) -> HookOutcome:
        return HookOutcome(updated_input={"command": "ls -1"})

    def record(hook_input: HookInput) -> HookOutcome:
        seen.append(hook_input.tool_input)
        return HookOutcome()

    registry = HookRegistry(workspace)
    registry.add("PreToolUse", rewrite)
    registry.add("PreToolUse", record, matcher="bash")
    auto_guard(registry).before_call(parse("bash", **BASH_LS))
    assert seen == [{"command": "ls -1"}]


def test_registry_rejects_unknown_events_and_matchers_on_tool_less_events(
    workspace: Path,
) -> None:
    registry = HookRegistry(workspace)
    with pytest.raises(ValueError, match="unknown hook event 'PostCompacted'"):
        registry.add("PostCompacted", lambda _: HookOutcome())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="PreCompact hooks have no tool name"):
        registry.add("PreCompact", lambda _: HookOutcome(), matcher="bash")


HOOK_SECRET = "hook-secret-value-42"


def redacting_registry(workspace: Path) -> HookRegistry:
    return HookRegistry(workspace, redaction=Redactor({HOOK_SECRET: "HOOK_TOKEN"}))


def test_a_redacting_registry_masks_a_code_hooks_stop_reason(workspace: Path) -> None:
    registry = redacting_registry(workspace)
    registry.add("Stop", lambda _: HookOutcome(decision="deny", reason=f"use {HOOK_SECRET}"))

    follow_up = HookGuard(registry, None).on_stop("done")

    assert follow_up == "Stop hook feedback:\nuse [REDACTED:HOOK_TOKEN]"


def test_a_redacting_registry_masks_a_failing_hooks_message(workspace: Path) -> None:
    def broken(hook_input: HookInput) -> HookOutcome:
        raise HookError(f"could not reach the server with {HOOK_SECRET}")

    registry = redacting_registry(workspace)
    registry.add("UserPromptSubmit", broken)

    with pytest.raises(PromptBlocked) as blocked:
        HookGuard(registry, None).on_prompt("hi")
    assert str(blocked.value).endswith("server with [REDACTED:HOOK_TOKEN]")


def test_fire_runs_compaction_hooks_and_returns_their_outcomes(workspace: Path) -> None:
    body = "print(json.dumps({'additional_context': json.load(sys.stdin)['event']}))\n"
    registry = registry_with(workspace, "PreCompact", body)
    registry.add("PostCompact", lambda _: HookOutcome(reason="not me"))
    outcomes = registry.fire("PreCompact", HookInput("PreCompact", workspace))
    assert outcomes == [HookOutcome(additional_context="PreCompact")]


def test_fire_raises_hook_error_for_a_failing_command(workspace: Path) -> None:
    registry = registry_with(workspace, "PostCompact", "sys.exit(1)\n")
    with pytest.raises(HookError, match="exited with 1"):
        registry.fire("PostCompact", HookInput("PostCompact", workspace))


def test_fire_rejects_an_input_for_another_event(workspace: Path) -> None:
    with pytest.raises(ValueError, match="HookInput for 'Stop'"):
        HookRegistry(workspace).fire("PreCompact", HookInput("Stop", workspace))


def test_command_that_cannot_start_is_a_hook_error(tmp_path: Path) -> None:
    hook = command_hook(CommandHookConfig(command="true"), tmp_path / "missing")
    with pytest.raises(HookError, match="could not start"):
        hook(HookInput("Stop", tmp_path))


def test_without_a_policy_hook_ask_is_a_denial(workspace: Path) -> None:
    registry = HookRegistry(workspace)
    registry.add("PreToolUse", lambda _: HookOutcome(decision="ask"))
    result = assert_error(
        HookGuard(registry, None).before_call(parse("bash", **BASH_LS)), "permission_denied"
    )
    assert "no permission policy" in result.content


def test_a_hook_printing_200_mb_fails_the_call_and_memory_stays_flat(
    workspace: Path, loopback: LoopbackServer
) -> None:
    config = workspace / ".agent_tutorial" / "config.toml"
    config.parent.mkdir()
    config.write_text('[[hooks.PreToolUse]]\ncommand = "head -c 200000000 /dev/zero"\n')
    loopback.queue(tool_stream([("call-1", "bash", {"command": "true"})]), text_stream("done"))

    cli = run_cli_measuring_peak_rss(
        workspace, loopback, "run", "--trust-project", "--chapter", "4", "-y", "--prompt", "go"
    )

    assert cli.returncode == 0
    result = loopback.requests[1]["messages"][-1]["content"]
    assert result.startswith("Error [hook_execution_error]")
    assert "more than 1,048,576 bytes on stdout" in result
    assert cli.peak_rss_bytes < 150 * 2**20
