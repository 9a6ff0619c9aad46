"""Shared fixtures: a loopback OpenAI-compatible server and a scratch workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loopback import LoopbackServer


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory, made the current directory, with no endpoint settings
    leaking in from the developer's environment."""
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "AGENT_TUTORIAL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    return root
