"""The shape the map promises, checked on the source so it cannot drift: the layers below,
composition only in the composition root, one error tree, and every imported distribution
declared.

The layers, each importing only from itself and the layers it names (`ALLOWED`):

    front ends    cli, __main__, commands/, repl, render, headless, layout, stream_wrap,
                  pastes, recap, session_picker, approval, run_summary, resuming, bench_report
                  -> composition, features, core          (no adapter: commands/process alone
                                                           reaches adapters/processes)
    composition   bootstrap, composition, conversation, config, project, folder_trust,
                  model_client, dotenv_file, profiles, mcp_config, mcp_session,
                  config_wording, config_origin (how a refused setting is said and where)
                  -> models, features, model adapters, OS adapters, core
    models        testing (ScriptedModel), demo/ (the offline demo model)
                  -> features, OS adapters, core
    features      features/**
                  -> OS adapters, core
    OS adapters   adapters/ filesystem, gitignore, shell, sandbox, sandbox_mounts, sandbox_git,
                  git_index, git_watch, processes, escapees, hook_runner, hook_scripts,
                  checkpoint_store, mcp_client, sandbox_launch, server_keeper: what the tools
                  use to reach files and processes (an MCP server is a process the MCP tools
                  reach)
                  -> core
    model adapters  adapters/ everything else: openai_chat, chat_stream, chat_wire,
                  bounded_transport, provider_errors, context_probe, text_calls,
                  text_call_stream, text_protocol, text_tool_calls
                  -> core
    core          core/**, the package's __init__
                  -> nothing outside core

A module the table does not place fails `test_every_module_has_a_place_in_the_map`: a new
one is placed on purpose, not by default.
"""

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
    "McpCallError",  # the MCP client's signal to an MCP tool, which makes it a tool error
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


# --- the layer map ----------------------------------------------------------------------

CORE, OS_ADAPTERS, MODEL_ADAPTERS = "core", "OS adapters", "model adapters"
FEATURES, MODELS, COMPOSITION, FRONT_END = "features", "models", "composition", "front ends"
OS_FACING = (
    "filesystem",
    "gitignore",
    "shell",
    "sandbox",
    "sandbox_mounts",
    "sandbox_git",
    "git_index",
    "git_watch",
    "processes",
    "escapees",
    "hook_runner",
    "hook_scripts",
    "checkpoint_store",
    "mcp_client",
    "sandbox_launch",
    "server_keeper",
)
TOP_LEVEL = {
    COMPOSITION: (
        "bootstrap",
        "composition",
        "conversation",
        "config",
        "project",
        "folder_trust",
        "model_client",
        "dotenv_file",
        "profiles",
        "config_wording",
        "config_origin",
        "mcp_config",
        "mcp_session",
    ),
    FRONT_END: (
        "cli",
        "__main__",
        "commands",
        "repl",
        "render",
        "headless",
        "layout",
        "stream_wrap",
        "pastes",
        "recap",
        "session_picker",
        "approval",
        "run_summary",
        "resuming",
        "bench_report",
        "rewinding",
        "rewind_picker",
        "diff_view",
        "modes",
        "terminal_keys",
        "artifact_view",
        "paging",
        "markdown_blocks",
        "prompt_layout",
    ),
    MODELS: ("testing", "demo"),
    FEATURES: ("features",),
    CORE: ("core",),
}
LAYER_OF_PREFIX = {
    "agent_tutorial.adapters": MODEL_ADAPTERS,
    **{f"agent_tutorial.adapters.{name}": OS_ADAPTERS for name in OS_FACING},
    **{f"agent_tutorial.{name}": layer for layer, names in TOP_LEVEL.items() for name in names},
}
"""Module prefix -> layer; the longest prefix that matches places a module."""
ALLOWED = {
    CORE: {CORE},
    OS_ADAPTERS: {CORE, OS_ADAPTERS},
    MODEL_ADAPTERS: {CORE, MODEL_ADAPTERS},
    FEATURES: {CORE, OS_ADAPTERS, FEATURES},
    MODELS: {CORE, OS_ADAPTERS, FEATURES, MODELS},
    COMPOSITION: {CORE, OS_ADAPTERS, MODEL_ADAPTERS, FEATURES, MODELS, COMPOSITION},
    FRONT_END: {CORE, FEATURES, COMPOSITION, FRONT_END},
}
"""Layer -> the layers its modules may import."""
ALLOWED_EXCEPTIONS = {("agent_tutorial.commands.process", "agent_tutorial.adapters.processes")}
"""Single edges across the map, each with its reason: `commands/process` is the front end's
process plumbing (subreaper, signals), not composition (see `PROCESS_FACADE`)."""


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str | None:
    """The layer of `module` (or of the module a `from X import name` names), by the
    longest prefix in the table; the package itself is core (its __init__ holds only
    the version)."""
    if module == "agent_tutorial":
        return CORE
    parts = module.split(".")
    for length in range(len(parts), 1, -1):
        layer = LAYER_OF_PREFIX.get(".".join(parts[:length]))
        if layer is not None:
            return layer
    return None


def package_imports(path: Path) -> Iterator[str]:
    """The package modules `path` imports, at the top or inside a function; for `from X
    import Y`, X.Y when that is a module of the package (`from agent_tutorial import
    repl` imports the REPL, not the package's __init__)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [_module_or_package(node.module, alias.name) for alias in node.names]
        else:
            continue
        yield from (name for name in names if name.split(".")[0] == "agent_tutorial")


def _module_or_package(package: str, name: str) -> str:
    candidate = ROOT.joinpath(*package.split("."), name)
    is_module = candidate.with_suffix(".py").is_file() or candidate.is_dir()
    return f"{package}.{name}" if is_module else package


def forbidden_imports(module: str, path: Path) -> list[str]:
    """The package modules `path` (the source of `module`) imports that its layer may not."""
    layer = layer_of(module)
    assert layer is not None, f"{module} has no place in the map"
    return [
        imported
        for imported in dict.fromkeys(package_imports(path))
        if layer_of(imported) not in ALLOWED[layer] and (module, imported) not in ALLOWED_EXCEPTIONS
    ]


PACKAGE_SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_place_in_the_map() -> None:
    unplaced = [
        module_name(path) for path in PACKAGE_SOURCES if layer_of(module_name(path)) is None
    ]

    assert unplaced == []


@pytest.mark.parametrize("path", PACKAGE_SOURCES, ids=lambda path: module_name(path))
def test_a_module_imports_only_from_the_layers_its_own_may(path: Path) -> None:
    assert forbidden_imports(module_name(path), path) == []


def planted(tmp_path: Path, module: str, source: str) -> Path:
    """`source` written where `module` would live under a copy of the package's name."""
    path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    assert module_name(path, tmp_path) == module
    return path


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("agent_tutorial.adapters.demo_model", "agent_tutorial.features.compaction"),
        ("agent_tutorial.adapters.filesystem", "agent_tutorial.features.skills"),
        ("agent_tutorial.config", "agent_tutorial.headless"),
        ("agent_tutorial.features.bench.report", "agent_tutorial.layout"),
        ("agent_tutorial.features.todos", "agent_tutorial.render"),
        ("agent_tutorial.features.skills", "agent_tutorial.repl"),
        ("agent_tutorial.features.sessions", "agent_tutorial.commands.edge"),
        ("agent_tutorial.features.bash", "agent_tutorial.adapters.openai_chat"),
        ("agent_tutorial.features.bash", "agent_tutorial.bootstrap"),
        ("agent_tutorial.core.loop", "agent_tutorial.adapters.shell"),
        ("agent_tutorial.adapters.shell", "agent_tutorial.adapters.openai_chat"),
        ("agent_tutorial.adapters.openai_chat", "agent_tutorial.adapters.shell"),
        ("agent_tutorial.testing", "agent_tutorial.config"),
        ("agent_tutorial.render", "agent_tutorial.adapters.filesystem"),
        ("agent_tutorial.repl", "agent_tutorial.demo"),
        ("agent_tutorial.commands.run", "agent_tutorial.adapters.processes"),
    ],
)
def test_a_planted_import_across_the_map_is_caught(
    tmp_path: Path, module: str, imported: str
) -> None:
    path = planted(tmp_path, module, f"def later():\n    import {imported}\n")

    assert forbidden_imports(module, path) == [imported]


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("agent_tutorial.adapters.shell", "agent_tutorial.adapters.sandbox"),
        ("agent_tutorial.adapters.text_tool_calls", "agent_tutorial.core.model"),
        ("agent_tutorial.features.bash", "agent_tutorial.adapters.shell"),
        ("agent_tutorial.features.bench.replay", "agent_tutorial.features.compaction"),
        ("agent_tutorial.demo.summary", "agent_tutorial.features.compaction"),
        ("agent_tutorial.config", "agent_tutorial.core.events"),
        ("agent_tutorial.model_client", "agent_tutorial.adapters.openai_chat"),
        ("agent_tutorial.bench_report", "agent_tutorial.layout"),
        ("agent_tutorial.render", "agent_tutorial.features.sessions"),
        ("agent_tutorial.cli", "agent_tutorial"),
        ("agent_tutorial.commands.process", "agent_tutorial.adapters.processes"),
    ],
)
def test_a_planted_import_the_map_allows_passes(tmp_path: Path, module: str, imported: str) -> None:
    """The other side of each line: the same kind of import, within what the layer may."""
    path = planted(tmp_path, module, f"from {imported} import something\n")

    assert forbidden_imports(module, path) == []


def test_a_module_imported_by_name_from_its_package_is_seen(tmp_path: Path) -> None:
    path = planted(tmp_path, "agent_tutorial.core.loop", "from agent_tutorial import repl\n")

    assert forbidden_imports("agent_tutorial.core.loop", path) == ["agent_tutorial.repl"]


def test_a_module_the_map_does_not_place_has_no_layer() -> None:
    assert layer_of("agent_tutorial.something_new") is None
    assert layer_of("agent_tutorial.adapters.something_new") == MODEL_ADAPTERS
    assert layer_of("agent_tutorial.features.anything.deeper") == FEATURES
