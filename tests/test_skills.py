"""Chapter 7: skill discovery, broken-manifest reporting, the catalog and load_skill."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.skills import (
    MAX_CATALOG_BYTES,
    MAX_SKILL_BYTES,
    SkillRegistry,
    load_skill_tool,
)

EXAMPLE_SKILLS = Path(__file__).resolve().parents[1] / ".agent_tutorial.example" / "skills"


def manifest(name: str, description: str = "Does a thing.", body: str = "Do it well.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def write_skill(
    workspace: Path, directory: str, text: str | bytes, location: str = "skills"
) -> Path:
    path = workspace / location / directory / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def only_problem(workspace: Path) -> str:
    registry = SkillRegistry.discover(workspace)
    assert registry.skills == ()
    [problem] = registry.problems
    return str(problem)


def load(registry: SkillRegistry, name: str) -> ToolResult:
    arguments = f'{{"name": "{name}"}}'
    return ToolRegistry([load_skill_tool(registry)]).run(tool_call("c1", "load_skill", arguments))


# --- discovery -------------------------------------------------------------------------


def test_skill_in_workspace_skills_directory_is_found(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy", "Ship a release.", "Step one.\n"))
    [skill] = SkillRegistry.discover(workspace).skills
    assert (skill.name, skill.description, skill.body) == (
        "deploy",
        "Ship a release.",
        "Step one.\n",
    )
    assert skill.path == Path("skills/deploy/SKILL.md")


def test_skill_in_agent_tutorial_directory_is_found(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy"), location=".agent_tutorial/skills")
    [skill] = SkillRegistry.discover(workspace).skills
    assert skill.path == Path(".agent_tutorial/skills/deploy/SKILL.md")


def test_skills_from_both_locations_are_merged_in_name_order(workspace: Path) -> None:
    write_skill(workspace, "zeta", manifest("zeta"))
    write_skill(workspace, "alpha", manifest("alpha"), location=".agent_tutorial/skills")
    assert SkillRegistry.discover(workspace).names() == ["alpha", "zeta"]


def test_agent_tutorial_skill_wins_a_name_clash_and_the_clash_is_reported_once(
    workspace: Path,
) -> None:
    write_skill(workspace, "deploy", manifest("deploy", "Project version."))
    write_skill(
        workspace, "deploy", manifest("deploy", "Local version."), location=".agent_tutorial/skills"
    )
    registry = SkillRegistry.discover(workspace)
    [skill] = registry.skills
    assert skill.description == "Local version."
    assert [str(problem) for problem in registry.problems] == [
        "skills/deploy/SKILL.md: shadowed by .agent_tutorial/skills/deploy/SKILL.md"
    ]


def test_workspace_without_skills_has_an_empty_registry(workspace: Path) -> None:
    registry = SkillRegistry.discover(workspace)
    assert (registry.skills, registry.problems, registry.catalog_text()) == ((), (), "")


def test_directory_without_manifest_is_not_a_skill(workspace: Path) -> None:
    (workspace / "skills" / "notes").mkdir(parents=True)
    (workspace / "skills" / "README.md").write_text("not a skill")
    registry = SkillRegistry.discover(workspace)
    assert (registry.skills, registry.problems) == ((), ())


def test_broken_manifest_is_skipped_and_others_still_load(workspace: Path) -> None:
    write_skill(workspace, "good", manifest("good"))
    write_skill(workspace, "bad", "no front matter here\n")
    registry = SkillRegistry.discover(workspace)
    assert registry.names() == ["good"]
    assert [problem.path for problem in registry.problems] == [Path("skills/bad/SKILL.md")]


def test_byte_order_mark_and_crlf_line_ends_are_accepted(workspace: Path) -> None:
    text = "\ufeff---\r\nname: deploy\r\ndescription: Ship it.\r\n---\r\nBody.\r\n"
    write_skill(workspace, "deploy", text)
    [skill] = SkillRegistry.discover(workspace).skills
    assert (skill.name, skill.description) == ("deploy", "Ship it.")


def test_extra_front_matter_fields_are_ignored(workspace: Path) -> None:
    write_skill(workspace, "deploy", "---\nname: deploy\ndescription: x\nlicense: MIT\n---\nBody\n")
    assert SkillRegistry.discover(workspace).names() == ["deploy"]


# --- broken manifests ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Just prose.\n", "no front matter: the file must start with a '---' line"),
        ("", "no front matter"),
        ("---\nname: deploy\ndescription: x\n", "front matter is not closed by a '---' line"),
        ("---\nname: [deploy\ndescription: x\n---\nBody\n", "front matter is not valid YAML"),
        ("---\n- deploy\n---\nBody\n", "front matter must be a mapping"),
        ("---\n---\nBody\n", "front matter must be a mapping"),
        ("---\ndescription: x\n---\nBody\n", "front matter has no 'name'"),
        ("---\nname: deploy\n---\nBody\n", "front matter has no 'description'"),
        ("---\nname: 42\ndescription: x\n---\nBody\n", "'name' must be a non-empty string"),
        ("---\nname: deploy\ndescription: ''\n---\nBody\n", "'description' must be a non-empty"),
        ("---\nname: deploy\ndescription: [a, b]\n---\nBody\n", "'description' must be a non"),
        (manifest("deploy", "x" * 1_025), "description is longer than 1024 characters"),
        (manifest("deploy", body="  \n\n"), "no instructions after the front matter"),
        ("---\nx: " + "[" * 1_100 + "\n---\nBody\n", "nested too deeply"),
        ("---\nname: !!python/object:os.system {}\n---\nBody\n", "not valid YAML"),
    ],
    ids=[
        "no-front-matter",
        "empty-file",
        "unclosed",
        "bad-yaml",
        "list",
        "empty-front-matter",
        "no-name",
        "no-description",
        "name-not-text",
        "blank-description",
        "description-not-text",
        "long-description",
        "empty-body",
        "deep-nesting",
        "unsafe-tag",
    ],
)
def test_broken_manifest_is_reported_with_its_reason(
    workspace: Path, text: str, reason: str
) -> None:
    write_skill(workspace, "deploy", text)
    problem = only_problem(workspace)
    assert problem.startswith("skills/deploy/SKILL.md: ")
    assert reason in problem


@pytest.mark.parametrize(
    "name",
    ["Deploy", "deploy_app", "deploy--app", "-deploy", "deploy-", "deploy app", "dé", "a" * 65],
)
def test_name_that_is_not_a_slug_is_rejected(workspace: Path, name: str) -> None:
    write_skill(workspace, "deploy", manifest(f'"{name}"'))
    assert f"name {name!r} is not a slug" in only_problem(workspace)


@pytest.mark.parametrize("name", ["a", "deploy", "deploy-app-2", "9lives", "a" * 64])
def test_slug_names_up_to_64_characters_are_accepted(workspace: Path, name: str) -> None:
    write_skill(workspace, name, manifest(name))
    assert SkillRegistry.discover(workspace).names() == [name]


def test_name_must_match_its_directory(workspace: Path) -> None:
    write_skill(workspace, "release", manifest("deploy"))
    assert "name 'deploy' does not match its directory 'release'" in only_problem(workspace)


def test_too_large_manifest_is_refused(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy", body="x" * MAX_SKILL_BYTES))
    assert "too large: over 64 KiB" in only_problem(workspace)


def test_manifest_of_exactly_the_size_limit_is_accepted(workspace: Path) -> None:
    head = manifest("deploy", body="")
    write_skill(workspace, "deploy", head + "x" * (MAX_SKILL_BYTES - len(head)))
    assert SkillRegistry.discover(workspace).names() == ["deploy"]


def test_manifest_with_nul_bytes_is_binary(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy").encode() + b"\0\1\2")
    assert "binary file" in only_problem(workspace)


def test_manifest_that_is_not_utf8_is_binary(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy", "caf\xe9").encode("latin-1"))
    assert "binary file" in only_problem(workspace)


def test_manifest_that_is_a_directory_is_unreadable(workspace: Path) -> None:
    (workspace / "skills" / "deploy" / "SKILL.md").mkdir(parents=True)
    assert "unreadable: not a regular file" in only_problem(workspace)


def test_dangling_manifest_symlink_is_unreadable(workspace: Path) -> None:
    directory = workspace / "skills" / "deploy"
    directory.mkdir(parents=True)
    (directory / "SKILL.md").symlink_to(directory / "missing.md")
    assert "unreadable: not a regular file" in only_problem(workspace)


def test_each_problem_is_reported_once(workspace: Path) -> None:
    write_skill(workspace, "one", "broken")
    write_skill(workspace, "two", manifest("other"))
    registry = SkillRegistry.discover(workspace)
    paths = [problem.path for problem in registry.problems]
    assert paths == [Path("skills/one/SKILL.md"), Path("skills/two/SKILL.md")]


# --- symlinks --------------------------------------------------------------------------


@pytest.fixture
def outside(workspace: Path) -> Path:
    """A valid skill directory next to the workspace, not inside it."""
    directory = workspace.parent / "outside" / "deploy"
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text(manifest("deploy"), encoding="utf-8")
    return directory


def test_manifest_symlink_out_of_the_workspace_is_refused(workspace: Path, outside: Path) -> None:
    directory = workspace / "skills" / "deploy"
    directory.mkdir(parents=True)
    (directory / "SKILL.md").symlink_to(outside / "SKILL.md")
    assert "refused: it resolves outside the project" in only_problem(workspace)


def test_skill_directory_symlink_out_of_the_workspace_is_refused(
    workspace: Path, outside: Path
) -> None:
    (workspace / "skills").mkdir()
    (workspace / "skills" / "deploy").symlink_to(outside, target_is_directory=True)
    problem = only_problem(workspace)
    assert problem == "skills/deploy/SKILL.md: refused: it resolves outside the project"


def test_skills_root_symlink_out_of_the_workspace_is_refused(
    workspace: Path, outside: Path
) -> None:
    (workspace / "skills").symlink_to(outside.parent, target_is_directory=True)
    assert only_problem(workspace) == "skills: refused: it resolves outside the project"


def test_symlink_within_the_workspace_is_followed(workspace: Path) -> None:
    source = workspace / "docs" / "deploy.md"
    source.parent.mkdir()
    source.write_text(manifest("deploy"), encoding="utf-8")
    (workspace / "skills" / "deploy").mkdir(parents=True)
    (workspace / "skills" / "deploy" / "SKILL.md").symlink_to(source)
    assert SkillRegistry.discover(workspace).names() == ["deploy"]


# --- the catalog -----------------------------------------------------------------------


def test_catalog_lists_names_and_descriptions_but_not_bodies(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy", "Ship a release.", "SECRET STEPS\n"))
    write_skill(workspace, "review", manifest("review", "Review a diff."))
    catalog = SkillRegistry.discover(workspace).catalog_text()
    lines = catalog.splitlines()
    assert "load_skill" in lines[0]
    assert lines[1:] == ["- deploy: Ship a release.", "- review: Review a diff."]
    assert "SECRET" not in catalog


def test_catalog_puts_a_multiline_description_on_one_line(workspace: Path) -> None:
    text = "---\nname: deploy\ndescription: |\n  Ship a\n  release.\n---\nBody\n"
    write_skill(workspace, "deploy", text)
    assert SkillRegistry.discover(workspace).catalog_text().endswith("- deploy: Ship a release.")


def test_catalog_shows_at_most_100_entries_and_counts_the_rest(workspace: Path) -> None:
    for number in range(130):
        write_skill(workspace, f"s{number:03}", manifest(f"s{number:03}", "x"))
    lines = SkillRegistry.discover(workspace).catalog_text().splitlines()
    entries = [line for line in lines if line.startswith("- ")]
    assert len(entries) == 100
    assert entries[-1] == "- s099: x"
    assert lines[-1] == "(30 more skills are not listed here to keep this short.)"


def test_catalog_stays_within_8000_bytes_and_counts_the_rest(workspace: Path) -> None:
    for number in range(40):
        name = f"s{number:02}"
        write_skill(workspace, name, manifest(name, "é" * 400))  # 800 bytes each
    catalog = SkillRegistry.discover(workspace).catalog_text()
    shown = catalog.count("\n- ")
    assert len(catalog.encode("utf-8")) <= MAX_CATALOG_BYTES
    assert shown == 9  # 10 entries would need 8,000+ bytes for the entries alone
    assert catalog.endswith(f"({40 - shown} more skills are not listed here to keep this short.)")


def test_catalog_that_fits_has_no_left_out_line(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy"))
    assert "not listed" not in SkillRegistry.discover(workspace).catalog_text()


# --- load_skill ------------------------------------------------------------------------


def test_load_skill_returns_the_body(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy", body="Step one.\nStep two.\n"))
    result = load(SkillRegistry.discover(workspace), "deploy")
    assert not result.is_error
    assert result.content == "# Skill: deploy\nDirectory: skills/deploy\n\nStep one.\nStep two."


def test_load_skill_with_unknown_name_lists_known_names(workspace: Path) -> None:
    write_skill(workspace, "deploy", manifest("deploy"))
    write_skill(workspace, "review", manifest("review"))
    result = load(SkillRegistry.discover(workspace), "ship")
    assert result.error_code == "unknown_skill"
    assert (
        result.content
        == "Error [unknown_skill]: no skill named 'ship'; known skills: deploy, review"
    )


def test_load_skill_without_any_skills_says_so(workspace: Path) -> None:
    result = load(SkillRegistry.discover(workspace), "deploy")
    assert result.content.endswith("there are no skills in this workspace")


def test_load_skill_has_read_effect() -> None:
    assert load_skill_tool(SkillRegistry()).effect == "read"


# --- the shipped example ---------------------------------------------------------------


def test_example_skill_is_valid(workspace: Path) -> None:
    shutil.copytree(EXAMPLE_SKILLS, workspace / ".agent_tutorial" / "skills")
    registry = SkillRegistry.discover(workspace)
    assert registry.problems == ()
    assert registry.names() == ["python-tests"]
    assert "pytest" in load(registry, "python-tests").content
