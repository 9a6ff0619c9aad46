"""Chapter 8's numbers live in `CompactionSettings` (settings.py), the one place their
defaults are: no other compaction module holds a numeric literal but 0 and 1 (and so -1),
except the facts listed here, which belong to a format or to the operating system and are
no choice of the chapter's."""

from __future__ import annotations

import ast
from pathlib import Path

import agent_tutorial.features.compaction as compaction

PACKAGE = Path(compaction.__file__).parent

FACTS = {
    ("layers.py", 2): "_MARKER = -2: a unit number that is no group, beside _LEAD = -1",
    ("persist.py", 0b1100_0000): "UTF-8: the two top bits that mark a continuation byte...",
    ("persist.py", 0b1000_0000): "...and their value in one",
    ("store.py", 96): "an artifact id's longest form, the rule ids read back are held to",
    ("store.py", 6): "random bytes in a temporary file's name",
    ("store.py", 0o700): "the artifacts directory: the owner's alone",
    ("store.py", 0o600): "an artifact file: the owner's alone",
}


def numeric_literals(path: Path) -> list[tuple[int | float, int]]:
    """Every int or float literal in `path` (bools aside) with its line."""
    literals: list[tuple[int | float, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            assert isinstance(node.value, int | float)
            literals.append((node.value, node.lineno))
    return literals


def test_no_compaction_module_but_the_settings_holds_a_number_of_its_own() -> None:
    found = [
        f"{path.name}:{line}: {value!r}"
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name != "settings.py"
        for value, line in numeric_literals(path)
        if value not in (0, 1) and (path.name, value) not in FACTS
    ]

    assert found == [], "put these in CompactionSettings, each with a docstring"


def test_every_fact_listed_is_still_there() -> None:
    """A fact whose literal is gone is an allowance that no longer needs to exist."""
    present = {
        (path.name, value) for path in PACKAGE.glob("*.py") for value, _ in numeric_literals(path)
    }

    assert set(FACTS) - present == set()


def test_the_scan_sees_a_number(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('LIMIT = 3\nSHARE = 0.75\nFLAG = True\nNAME = "x 9"\nOFF = -1\n')

    assert numeric_literals(module) == [(3, 1), (0.75, 2), (1, 5)]
