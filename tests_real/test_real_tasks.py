"""Each task in a fresh workspace through the real CLI, against a real model (see
conftest.py). Per task, the agent's side of issue 16's bar: it called tools, it did not end
on a repeated identical call or an empty reply, it did not crash. Whether the task was done
is counted, and the last test asks for at least REAL_MIN_DONE of the six (default 3)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests_real.conftest import OUTCOMES, Outcome, RealServer
from tests_real.tasks import TASKS, Task


def run_agent(server: RealServer, workspace: Path, prompt: str) -> tuple[dict[str, Any], str]:
    """The JSON result and stderr of one `agent-tutorial run`."""
    home = workspace.parent / "home"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "none",
        "AGENT_TUTORIAL_MODEL": server.model,
        "AGENT_TUTORIAL_TEMPERATURE": "0",
        "AGENT_TUTORIAL_TOOL_CALLS": server.tool_calls,
        "AGENT_TUTORIAL_MAX_OUTPUT_TOKENS": server.max_output_tokens,
        "AGENT_TUTORIAL_REQUEST_TIMEOUT_S": str(server.timeout_s),
        "AGENT_TUTORIAL_MAX_RETRIES": "0",  # a slow answer is waited for, not asked again
    }
    command = [
        *(sys.executable, "-m", "agent_tutorial", "run", "--chapter", server.chapter),
        *("--permission-mode", "auto", "--max-turns", server.max_turns),
        *("--output-format", "json", "--prompt", prompt),
    ]
    done = subprocess.run(
        command,
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=server.timeout_s,
        check=False,
    )
    assert done.stdout.strip(), f"no JSON result; stderr:\n{done.stderr}"
    return json.loads(done.stdout), done.stderr


def keep(server: RealServer, task: Task, workspace: Path, result: dict[str, Any], err: str) -> None:
    if server.results is None:
        return
    folder = server.results / task.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result, indent=2))
    (folder / "stderr.txt").write_text(err)
    for session in (workspace / ".agent_tutorial" / "sessions").glob("*.jsonl"):
        shutil.copy(session, folder / session.name)


def ending(result: dict[str, Any]) -> str:
    if result["is_error"]:
        return f"error: {result.get('error', '')}"[:80]
    return f"answer: {' '.join(result['result'].split())}"[:80]


@pytest.mark.parametrize("task", TASKS, ids=[task.name for task in TASKS])
def test_task(real_server: RealServer, task: Task) -> None:
    # The same path in every run: the prompt names it, and a small model at temperature 0
    # answers a prompt that differs by one digit of a pytest folder differently.
    folder = real_server.workspaces / task.name
    shutil.rmtree(folder, ignore_errors=True)
    workspace = folder / "project"
    workspace.mkdir(parents=True)
    task.set_up(workspace)
    started = time.monotonic()

    result, err = run_agent(real_server, workspace, task.prompt)

    keep(real_server, task, workspace, result, err)
    answer = result["result"] or ""
    OUTCOMES.append(
        Outcome(
            task=task.name,
            done=not result["is_error"] and task.check(workspace, answer),
            tool_calls=result["tool_calls"],
            turns=result["num_turns"],
            seconds=time.monotonic() - started,
            prompt_tokens=result["usage"]["prompt_tokens"],
            ending=ending(result),
        )
    )
    assert "Traceback" not in err
    assert result["tool_calls"] > 0, "the agent ran no tool"
    assert "same call" not in result.get("error", ""), "ended on a repeated identical call"
    assert result["is_error"] or answer.strip(), "ended on an empty reply"


def test_enough_tasks_are_done() -> None:
    if len(OUTCOMES) < len(TASKS):
        pytest.skip("not every task ran")
    least = int(os.environ.get("REAL_MIN_DONE") or 3)
    done = [outcome.task for outcome in OUTCOMES if outcome.done]

    assert len(done) >= least, f"{len(done)} of {len(TASKS)} done: {done}"
