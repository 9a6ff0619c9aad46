"""Start-up stays light: `--help`, `--version` and a one-shot run import only what they use.

These are structural checks on what gets imported (`python -X importtime`), not timings;
the timings are in `make bench` (benchmarks/bench_startup.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_API_KEY
from tests.loopback import LoopbackServer, text_stream

# What --help and --version must not pay for: the SDK and its HTTP client, settings
# parsing, the REPL's line editor, rich (typer's plain help needs none of them) and the
# ctypes that only `run` needs, to adopt orphaned processes.
NOT_FOR_HELP = (
    "openai",
    "httpx2",
    "pydantic",
    "pydantic_settings",
    "prompt_toolkit",
    "rich",
    "ctypes",
)


def imported_modules(*args: str, cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    """Every module `agent-tutorial ARGS` imported, read from `-X importtime` on stderr."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agent_tutorial", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_no_heavy_library(flag: str, workspace: Path) -> None:
    modules = imported_modules(flag, cwd=workspace)

    assert "typer" in top_level(modules)  # the parse worked: the CLI itself was imported
    assert top_level(modules).isdisjoint(NOT_FOR_HELP)


def test_a_one_shot_run_imports_neither_the_repl_nor_markdown(
    workspace: Path, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))
    env = {
        "OPENAI_BASE_URL": loopback.base_url,
        "OPENAI_API_KEY": TEST_API_KEY,
        "AGENT_TUTORIAL_MODEL": "loopback-model",
    }

    modules = top_level(imported_modules("run", "-c", "2", "-p", "hi", cwd=workspace, env=env))

    assert "openai" in modules
    assert modules.isdisjoint({"prompt_toolkit", "markdown_it", "pygments"})


def test_a_demo_run_does_not_import_the_sdk(workspace: Path) -> None:
    (workspace / "notes.md").write_text("hello\n")

    modules = top_level(
        imported_modules("run", "-c", "1", "--model", "demo", "-p", "hi", cwd=workspace)
    )

    assert "agent_tutorial" in modules
    assert modules.isdisjoint({"openai", "httpx2", "prompt_toolkit"})
