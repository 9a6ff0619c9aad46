"""The lessons agree with their guides and the package where issue 20 found they did not:
each rule is checked in-process, on the lesson's own functions, on both sides of its line."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import stat
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent_tutorial.core.hooks import CommandHookConfig
from tests.lesson_support import CHAPTERS, lesson_path, load_lesson

FILE_TOOL_CHAPTERS = range(2, 9)
SECRETS = {
    "OPENAI_API_KEY": "sk-lesson-secret-1",
    "GITHUB_TOKEN": "ghp-lesson-secret-2",
    "DB_PASSWORD": "lesson-secret-3",
    "AWS_CREDENTIALS": "lesson-secret-4",
    "my_secret": "lesson-secret-5",  # the rule ignores case
    "MONKEY_BUSINESS": "lesson-secret-6",  # "KEY" anywhere in the name counts, as in the package
}


def bash(lesson: ModuleType, chapter: int, command: str) -> str:
    """The bash tool's result: lesson 1 takes the call's JSON, later lessons checked arguments."""
    if chapter == 1:
        return str(lesson.run_bash(json.dumps({"command": command})))
    return str(lesson.run_bash({"command": command}))


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


# --- bash never sees a secret ----------------------------------------------------------------


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_bash_gets_no_variable_whose_name_looks_secret(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, chapter: int
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KE_Y_SPLIT", "shown-1")  # one past the rule: no word in the name
    monkeypatch.setenv("LESSON_SETTING", "shown-2")
    lesson = load_lesson(chapter)

    output = bash(lesson, chapter, "env")

    assert not [value for value in SECRETS.values() if value in output]
    assert "KE_Y_SPLIT=shown-1" in output and "LESSON_SETTING=shown-2" in output
    assert os.environ["OPENAI_API_KEY"] == SECRETS["OPENAI_API_KEY"]  # the lesson keeps its key


@pytest.mark.parametrize("chapter", [1, 8])
def test_bash_never_sees_what_the_env_file_holds(workspace: Path, chapter: int) -> None:
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / ".env").write_text("OPENAI_API_KEY=sk-from-the-file-77\n")
    lesson = load_lesson(chapter)

    assert lesson.endpoint()[2] == "sk-from-the-file-77"
    assert "sk-from-the-file-77" not in bash(lesson, chapter, "env")


# --- .agent_tutorial/.env ----------------------------------------------------------------------


def write_env_file(workspace: Path, text: str) -> None:
    (workspace / ".agent_tutorial").mkdir(exist_ok=True)
    (workspace / ".agent_tutorial" / ".env").write_text(text)


@pytest.mark.parametrize("chapter", [1, 8])  # the same function in every lesson
def test_the_env_file_fills_only_what_the_environment_lacks(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, chapter: int
) -> None:
    write_env_file(
        workspace,
        "# a comment\nexport OPENAI_MODEL='file-model'\nOPENAI_API_KEY=\"sk-file\"\n"
        "OPENAI_BASE_URL = http://file.example/v1\nAGENT_TUTORIAL_MODEL=\n",
    )
    lesson = load_lesson(chapter)
    assert lesson.endpoint() == ("file-model", "http://file.example/v1", "sk-file")

    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    assert lesson.endpoint() == ("env-model", "http://file.example/v1", "sk-file")


@pytest.mark.parametrize("chapter", [1, 8])
def test_the_env_file_never_redirects_a_key_from_the_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, chapter: int
) -> None:
    write_env_file(workspace, "OPENAI_BASE_URL=http://attacker.example/v1\nOPENAI_MODEL=m\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-own")
    lesson = load_lesson(chapter)

    assert lesson.endpoint() == ("m", None, "sk-users-own")

    monkeypatch.setenv("OPENAI_BASE_URL", "http://chosen.example/v1")  # the user's own choice
    assert lesson.endpoint() == ("m", "http://chosen.example/v1", "sk-users-own")


@pytest.mark.parametrize("chapter", [1, 8])
def test_without_model_or_endpoint_the_lesson_says_what_to_set(
    workspace: Path, capsys: pytest.CaptureFixture[str], chapter: int
) -> None:
    lesson = load_lesson(chapter)

    assert lesson.main(["--prompt", "go"]) == 2
    assert capsys.readouterr().err == (
        "error: no model or endpoint: set OPENAI_MODEL and OPENAI_API_KEY\n"
    )


# --- .git/ is closed to the file tools from chapter 2 ----------------------------------------


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
@pytest.mark.parametrize(
    "path", [".git/hooks/pre-commit", ".GIT/config", "vendor/lib/.git/config", "hooks/x"]
)
def test_no_file_tool_writes_into_git(workspace: Path, chapter: int, path: str) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "hooks").symlink_to(".git/hooks")  # the real path decides, not the name
    lesson = load_lesson(chapter)

    with pytest.raises(lesson.ToolError) as refused:
        lesson.write_file({"path": path, "content": "x"})
    assert refused.value.code == "protected_path"
    with pytest.raises(lesson.ToolError, match=r"\.git/"):
        lesson.edit_file({"path": ".git/config", "old_text": "core", "new_text": "x"})
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
@pytest.mark.parametrize("path", [".gitignore", ".github/workflows/ci.yml", "git/notes.txt"])
def test_names_that_only_start_like_git_are_written(
    workspace: Path, chapter: int, path: str
) -> None:
    lesson = load_lesson(chapter)

    assert lesson.write_file({"path": path, "content": "kept"}).startswith("Wrote 4 bytes")
    assert (workspace / path).read_text() == "kept"


# --- the agent's own folder opens one part at a time -----------------------------------------


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
def test_tools_read_skills_from_chapter_7_and_artifacts_from_chapter_8_only(
    workspace: Path, chapter: int
) -> None:
    state = workspace / ".agent_tutorial"
    for part in ("artifacts", "skills"):
        (state / part).mkdir(parents=True)
        (state / part / "kept.txt").write_text(f"{part} text\n")
    (state / ".env").write_text("OPENAI_API_KEY=sk-never-read\n")
    lesson = load_lesson(chapter)

    def reads(path: str) -> bool:
        try:
            return "text" in lesson.read_file({"path": path})
        except lesson.ToolError as error:
            assert error.code == "protected_path"
            return False

    assert reads(".agent_tutorial/skills/kept.txt") == (chapter >= 7)
    assert reads(".agent_tutorial/artifacts/kept.txt") == (chapter >= 8)
    assert not reads(".agent_tutorial/.env")


@pytest.mark.parametrize("chapter", range(1, 8))
def test_no_lesson_names_a_later_chapters_folder(chapter: int) -> None:
    source = lesson_path(chapter).read_text()
    assert "artifacts" not in source
    assert chapter >= 7 or "skills" not in source


# --- file modes --------------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
@pytest.mark.parametrize("old_mode", [0o755, 0o600, 0o640])
def test_write_and_edit_keep_the_mode_of_the_file_they_replace(
    workspace: Path, chapter: int, old_mode: int
) -> None:
    script = workspace / "run.sh"
    script.write_text("echo one\n")
    script.chmod(old_mode)
    lesson = load_lesson(chapter)

    lesson.edit_file({"path": "run.sh", "old_text": "one", "new_text": "two"})
    assert (script.read_text(), mode(script)) == ("echo two\n", old_mode)
    lesson.write_file({"path": "run.sh", "content": "echo three\n"})
    assert (script.read_text(), mode(script)) == ("echo three\n", old_mode)
    assert sorted(path.name for path in workspace.iterdir()) == ["run.sh"]  # no temp left


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_new_file_gets_the_umasks_default_mode(workspace: Path, chapter: int, umask: int) -> None:
    lesson = load_lesson(chapter)
    previous = os.umask(umask)
    try:
        lesson.write_file({"path": "sub/new.txt", "content": "fresh"})
    finally:
        os.umask(previous)

    assert mode(workspace / "sub" / "new.txt") == 0o666 & ~umask


# --- grep's glob, read_file's offset -----------------------------------------------------------


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
def test_greps_glob_without_a_slash_matches_file_names_at_any_depth(
    workspace: Path, chapter: int
) -> None:
    for name in ("top.py", "pkg/mid.py", "pkg/deep/low.py", "pkg/notes.txt"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("needle\n")
    lesson = load_lesson(chapter)

    def files(**arguments: Any) -> list[str]:
        found = lesson.grep({"pattern": "needle", **arguments}).splitlines()
        return [line.split(":")[0] for line in found]

    assert files(glob="*.py") == ["pkg/deep/low.py", "pkg/mid.py", "top.py"]
    assert files(glob="*.txt") == ["pkg/notes.txt"]
    assert files(glob="*.py", path="pkg") == ["pkg/deep/low.py", "pkg/mid.py"]
    assert files(glob="deep/*.py", path="pkg") == ["pkg/deep/low.py"]
    assert lesson.grep({"pattern": "needle", "glob": "*.rs"}) == "No matches."


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
def test_an_offset_past_the_end_says_so_and_the_last_line_still_reads(
    workspace: Path, chapter: int
) -> None:
    (workspace / "three.txt").write_text("one\ntwo\nthree\n")
    (workspace / "empty.txt").write_text("")
    lesson = load_lesson(chapter)

    assert lesson.read_file({"path": "three.txt", "offset": 3}) == "     3\tthree"
    with pytest.raises(lesson.ToolError) as past:
        lesson.read_file({"path": "three.txt", "offset": 4})
    assert (past.value.code, str(past.value)) == (
        "offset_past_end",
        "offset 4 is past the end of three.txt (3 lines)",
    )
    assert lesson.read_file({"path": "empty.txt"}) == "(empty.txt is empty)"


# --- a tool call written as text (issue 16) ----------------------------------------------------

GLOB_CALL = '{"name": "glob", "arguments": {"pattern": "*.py"}}'


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
@pytest.mark.parametrize(
    "text",
    [GLOB_CALL, f"\n  {GLOB_CALL}\n", f"```json\n{GLOB_CALL}\n```", f"```\n{GLOB_CALL}\n```"],
    ids=["bare", "spaced", "json-fence", "plain-fence"],
)
def test_a_call_written_as_text_becomes_a_real_tool_call(
    workspace: Path, chapter: int, text: str
) -> None:
    lesson = load_lesson(chapter)
    offered = () if chapter < 6 else (lesson.TOOLS,)

    call = lesson.call_written_as_text(text, *offered)

    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "glob", "arguments": '{"pattern": "*.py"}'}


@pytest.mark.parametrize("chapter", FILE_TOOL_CHAPTERS)
@pytest.mark.parametrize(
    "text",
    [
        '{"name": "nope", "arguments": {}}',  # a tool the lesson does not offer
        '{"name": "glob", "arguments": "*.py"}',  # arguments that are not an object
        '{"name": ["glob"], "arguments": {}}',
        '{"name": "glob", "arguments": {"pattern": "*.py"}',  # cut short
        f"Here is the call: {GLOB_CALL}",  # prose around it: an answer
        f"```json\n{GLOB_CALL}",  # an open fence
        "[1, 2]",
        "",
    ],
)
def test_other_text_stays_an_answer(workspace: Path, chapter: int, text: str) -> None:
    lesson = load_lesson(chapter)
    offered = () if chapter < 6 else (lesson.TOOLS,)

    assert lesson.call_written_as_text(text, *offered) is None


def test_a_subagent_cannot_call_task_by_writing_it(workspace: Path) -> None:
    lesson = load_lesson(6)
    lesson.add_task_tool(None, "model")  # registers task; the client is only used when it runs
    child = {name: tool for name, tool in lesson.TOOLS.items() if name != "task"}
    task = '{"name": "task", "arguments": {"description": "d", "prompt": "p"}}'

    assert lesson.call_written_as_text(task, lesson.TOOLS) is not None
    assert lesson.call_written_as_text(task, child) is None


# --- chapter 7: your private skill wins --------------------------------------------------------


def write_skill(folder: Path, description: str, body: str) -> None:
    (folder / "release-notes").mkdir(parents=True)
    (folder / "release-notes" / "SKILL.md").write_text(
        f"---\nname: release-notes\ndescription: {description}\n---\n\n{body}\n"
    )


@pytest.mark.parametrize("chapter", [7, 8])
def test_a_private_skill_shadows_the_committed_one_of_the_same_name(
    workspace: Path, chapter: int
) -> None:
    write_skill(workspace / "skills", "The committed way.", "COMMITTED-BODY")
    write_skill(workspace / ".agent_tutorial" / "skills", "My private way.", "PRIVATE-BODY")
    (workspace / "skills" / "other").mkdir()
    (workspace / "skills" / "other" / "SKILL.md").write_text(
        "---\nname: other\ndescription: Only committed.\n---\nOTHER-BODY\n"
    )
    lesson = load_lesson(chapter)

    lesson.discover_skills()

    prompt = lesson.system_prompt()
    assert "- release-notes: My private way." in prompt
    assert "- other: Only committed." in prompt
    assert "committed way" not in prompt
    body = lesson.load_skill({"name": "release-notes"})
    assert "PRIVATE-BODY" in body and "COMMITTED-BODY" not in body
    assert "Directory: .agent_tutorial/skills/release-notes" in body


# --- chapter 8: artifacts ----------------------------------------------------------------------


def test_chapter_8_tells_the_model_it_can_read_artifacts(workspace: Path) -> None:
    for chapter in (7, 8):
        lesson = load_lesson(chapter)
        prompt = lesson.system_prompt()
        told = ".agent_tutorial/artifacts" in prompt and "read_file" in prompt
        assert told == (chapter == 8)


def artifact_names(workspace: Path) -> list[str]:
    folder = workspace / ".agent_tutorial" / "artifacts"
    return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


def test_an_unusable_artifact_folder_gives_every_call_of_the_batch_a_paired_error(
    workspace: Path,
) -> None:
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / "artifacts").write_text("a file, not a folder")
    lesson = load_lesson(8)

    results = lesson.persist_large_results(["x" * 40_000, "small"])

    assert len(results) == 2
    assert all(r.startswith("Error [tool_result_processing_error]: ") for r in results)
    assert all("x" * 100 not in result for result in results)


def test_a_result_at_the_threshold_stays_inline_and_nothing_is_saved(workspace: Path) -> None:
    lesson = load_lesson(8)

    assert lesson.persist_large_results(["x" * 30_000]) == ["x" * 30_000]
    assert artifact_names(workspace) == []


@contextlib.contextmanager
def file_size_limit(limit_bytes: int) -> Iterator[None]:
    """A real write limit, as a full disk or a quota gives: past it a write fails (EFBIG;
    Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_an_artifact_cut_short_by_a_failed_write_never_appears(workspace: Path) -> None:
    lesson = load_lesson(8)

    with file_size_limit(20_000):
        results = lesson.persist_large_results(["x" * 40_000, "small"])

    assert [r.split(":")[0] for r in results] == ["Error [tool_result_processing_error]"] * 2
    assert "File too large" in results[0]
    assert artifact_names(workspace) == []  # no half file under any name, no temporary left


def test_an_artifact_appears_whole_under_its_final_name(workspace: Path) -> None:
    lesson = load_lesson(8)

    (block,) = lesson.persist_large_results(["y" * 40_000])

    (name,) = artifact_names(workspace)
    assert name.startswith("tool-result-") and name.endswith(".txt")
    assert f"path: .agent_tutorial/artifacts/{name}\n" in block
    assert (workspace / ".agent_tutorial" / "artifacts" / name).read_text() == "y" * 40_000
    assert "y" * 100 in lesson.read_file({"path": f".agent_tutorial/artifacts/{name}"})


# --- constants shared with the package, and the one kept apart on purpose ------------------------


def test_a_hooks_default_time_limit_is_the_packages(workspace: Path) -> None:
    package_default = CommandHookConfig.model_fields["timeout_s"].default

    assert [load_lesson(chapter).HOOK_TIMEOUT_S for chapter in range(4, 9)] == [package_default] * 5


@pytest.mark.parametrize("chapter", [1, 8])
def test_bash_keeps_20000_characters_from_each_end(workspace: Path, chapter: int) -> None:
    """On purpose not the package's 15,000 bytes per end: string slicing reads simply, and
    chapter 8 can persist an output well past its 30,000 B threshold."""
    lesson = load_lesson(chapter)

    whole = bash(lesson, chapter, "head -c 40000 /dev/zero | tr '\\0' a")
    cut = bash(lesson, chapter, "head -c 40001 /dev/zero | tr '\\0' b")

    assert whole == "a" * 40_000 + "\n[exit code 0]"
    assert cut == "b" * 20_000 + "\n[... 1 characters left out ...]\n" + "b" * 20_000 + (
        "\n[exit code 0]"
    )
