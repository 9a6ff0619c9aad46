"""The shape the map promises, checked on the source so it cannot drift: composition only
in the composition root, one error tree, and every imported distribution declared."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import pkgutil
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent_tutorial
from agent_tutorial.core import errors
from agent_tutorial.core.errors import AgentTutorialError

PACKAGE = Path(agent_tutorial.__file__).parent
ROOT = PACKAGE.parent
FRONT_ENDS = [PACKAGE / "cli.py", PACKAGE / "repl.py", *sorted((PACKAGE / "commands").glob("*.py"))]
PROCESS_FACADE = PACKAGE / "commands" / "process.py"
"""The one front-end module that reaches the process adapter (subreaper, signals): process
plumbing, not composition."""


def imported_modules(path: Path) -> Iterator[str]:
    """Every module `path` imports, at the top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


@pytest.mark.parametrize("path", [p for p in FRONT_ENDS if p != PROCESS_FACADE], ids=str)
def test_a_front_end_imports_no_adapter(path: Path) -> None:
    adapters = [
        name for name in imported_modules(path) if name.startswith("agent_tutorial.adapters")
    ]

    assert adapters == []


@pytest.mark.parametrize("path", FRONT_ENDS, ids=str)
def test_a_front_end_asks_no_capability(path: Path) -> None:
    """`Capability.X in profile` is asked in `bootstrap` alone (the map's principle 3)."""
    assert "Capability" not in names_used(path)


def test_the_import_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    """The other side of the line: a lazy adapter import is found, not only top-level ones."""
    source = tmp_path / "front.py"
    source.write_text("def f():\n    from agent_tutorial.adapters.shell import run\n")

    assert list(imported_modules(source)) == ["agent_tutorial.adapters.shell"]


def all_modules() -> Iterator[object]:
    for info in pkgutil.walk_packages([str(PACKAGE)], "agent_tutorial."):
        yield importlib.import_module(info.name)


def exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in all_modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == getattr(module, "__name__", None)
            ):
                found[name] = value
    return found


OUTSIDE_THE_TREE = {
    "ToolPairingError",  # public as a ValueError (DESIGN.md)
    "ToolFailure",  # a tool's signal to the registry, which turns it into a tool error
    "SearchTimeout",  # grep's signal to itself
    "InvalidPattern",  # a ValueError: grep's pattern argument is invalid
    "UnexpectedModelCall",  # testing.ScriptedModel's AssertionError
    "TerminationRequested",  # SIGTERM/SIGHUP raised as KeyboardInterrupt
    # The bounded transport's signals, raised inside httpx's reads; the adapter turns each
    # into a ModelError (an httpx error would be retried by the SDK).
    "ReplyOverLimit",
    "DeadlinePassed",
    "TooManyBytes",
    "CompressedReply",
}


def test_every_error_a_user_can_meet_derives_from_the_one_root() -> None:
    strays = {
        name
        for name, cls in exception_classes().items()
        if not issubclass(cls, AgentTutorialError)
        and not name.startswith("_")
        and name not in OUTSIDE_THE_TREE
    }

    assert strays == set()


def test_the_tree_in_core_errors_names_every_error_under_the_root() -> None:
    drawn = set(
        re.findall(
            r"\b[A-Z][A-Za-z]+(?:Error|Failed|Exceeded|CutOff|Blocked|"
            r"Interrupted|Continue)\b",
            errors.__doc__ or "",
        )
    )
    under_root = {
        name for name, cls in exception_classes().items() if issubclass(cls, AgentTutorialError)
    }

    assert under_root - drawn == set()


def test_a_path_the_model_gave_is_a_tell_the_model_error_not_a_value_error() -> None:
    from agent_tutorial.core.paths import ProtectedPathError, WorkspacePathError

    assert not issubclass(WorkspacePathError, ValueError)
    assert issubclass(ProtectedPathError, AgentTutorialError)


def distributions_imported_by(paths: list[Path]) -> dict[str, set[str]]:
    """Top-level module -> the files that import it, for every third-party import."""
    first_party = {"agent_tutorial", "chapters", "tests"}
    imported: dict[str, set[str]] = {}
    for path in paths:
        for name in imported_modules(path):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in first_party:
                imported.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return imported


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    """What a user's install gets: the dependencies and the optional extras, not `dev`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [deps for name, deps in project["optional-dependencies"].items() if name != "dev"]
    requirements = [*project["dependencies"], *(req for deps in extras for req in deps)]
    return {canonical(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0]) for req in requirements}


def test_every_distribution_the_package_imports_is_declared() -> None:
    """`import httpx2` is satisfied today only because the SDK needs it too; declared, it
    cannot vanish with a change of SDK version."""
    owners = importlib.metadata.packages_distributions()
    sources = [*PACKAGE.rglob("*.py"), *(ROOT / "chapters").glob("*.py")]
    declared = declared_distributions()
    undeclared = {
        module: sorted(files)
        for module, files in distributions_imported_by(sources).items()
        # A module not installed here (matplotlib, an extra) must be named as it installs.
        if not {canonical(dist) for dist in owners.get(module, [module])} & declared
    }

    assert undeclared == {}
