"""Six small real tasks (issue 16): each a fresh project, one prompt, and a check of the
outcome on disk or in the answer. What a learner's first session with a local model asks."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

Check = Callable[[Path, str], bool]
"""Whether the task was done, from the workspace after the run and the final answer."""


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    check: Check
    files: dict[str, str] = field(default_factory=dict)

    def set_up(self, workspace: Path) -> None:
        for name, text in self.files.items():
            path = workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def answer_names(*words: str) -> Check:
    """The answer mentions each of `words` as a whole word (a number, a path)."""
    return lambda _workspace, answer: all(
        re.search(rf"(?<![\w/.]){re.escape(word)}(?![\w/])", answer) for word in words
    )


def file_holds(name: str, text: str) -> Check:
    def check(workspace: Path, _answer: str) -> bool:
        path = workspace / name
        return path.is_file() and path.read_text().strip() == text

    return check


def passes_untouched(test_file: str, original: str) -> Check:
    def check(workspace: Path, _answer: str) -> bool:
        if (workspace / test_file).read_text() != original:
            return False
        run = subprocess.run(
            [sys.executable, test_file], cwd=workspace, capture_output=True, timeout=60
        )
        return run.returncode == 0

    return check


TEST_CALC = "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('ok')\n"

TASKS = (
    Task(
        "count-files",
        "How many Python files are in this project, subfolders included? Answer with the number.",
        answer_names("4"),
        {
            "main.py": "from utils.helpers import greet\n\nprint(greet('you'))\n",
            "utils/__init__.py": "",
            "utils/helpers.py": "def greet(name):\n    return f'hello {name}'\n",
            "tests/test_helpers.py": "from utils.helpers import greet\n",
            "README.md": "# A small project\n",
            "notes.txt": "remember the milk\n",
            "data.json": '{"items": [1, 2, 3]}\n',
        },
    ),
    Task(
        "read-value",
        "Which port does config/settings.ini set? Answer with the number.",
        answer_names("8731"),
        {
            "config/settings.ini": "[server]\nhost = 127.0.0.1\nport = 8731\nworkers = 4\n",
            "README.md": "Settings live in config/.\n",
        },
    ),
    Task(
        "create-file",
        "Create a file named hello.txt that contains exactly this text: Hello, world",
        file_holds("hello.txt", "Hello, world"),
    ),
    Task(
        "fix-bug",
        "Running `python3 test_calc.py` fails. Fix the bug in calc.py so that it passes; "
        "do not change test_calc.py.",
        passes_untouched("test_calc.py", TEST_CALC),
        {"calc.py": "def add(a, b):\n    return a - b\n", "test_calc.py": TEST_CALC},
    ),
    Task(
        "run-script",
        "Run report.py with python3 and tell me the total it prints.",
        answer_names("650"),
        {"report.py": "total = sum(n * n for n in range(1, 13))\nprint(f'total: {total}')\n"},
    ),
    Task(
        "find-definition",
        "In which file is the function parse_header defined? Answer with its path.",
        answer_names("lib/parsing.py"),
        {
            "app/main.py": "from lib.parsing import parse_header\n\nprint(parse_header('a: b'))\n",
            "lib/__init__.py": "",
            "lib/parsing.py": "def parse_header(line):\n    name, _, value = line.partition(':')\n"
            "    return name.strip(), value.strip()\n",
            "lib/text.py": "def shout(text):\n    return text.upper()\n",
        },
    ),
)
