"""Where the lessons are and how a test loads one in-process (shared by the lesson tests)."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

LESSONS = Path(__file__).resolve().parents[1] / "chapters"
OFFLINE = LESSONS / "offline"
CHAPTERS = range(1, 10)


def lesson_path(chapter: int) -> Path:
    return LESSONS / f"ch{chapter:02d}.py"


def changed_lines(before: str, after: str) -> list[str]:
    """The lines `diff` adds or removes going from text `before` to text `after` (difflib, no
    context): the size of a lesson step, as the diff budgets and the guides count it."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def load_lesson(chapter: int) -> ModuleType:
    """A fresh module object of lesson `chapter`. Its workspace is the current directory at
    load time (the `workspace` fixture's), and its registries start empty, as in a new run."""
    spec = importlib.util.spec_from_file_location(f"lesson{chapter}", lesson_path(chapter))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_offline_server() -> ModuleType:
    """`chapters/offline/lesson_server.py`, which imports its sibling `lesson_scripts`."""
    if str(OFFLINE) not in sys.path:
        sys.path.insert(0, str(OFFLINE))
    return importlib.import_module("lesson_server")
