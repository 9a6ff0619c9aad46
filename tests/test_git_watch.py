"""What the sandbox cannot mount over, the bash tool undoes: a `.git` a command makes at the
top of a workspace inside a repository, a `.git` link a command replaces. Each through the
real bash tool in the real sandbox, and each both ways: what the user changes between
commands is theirs and stays (`git_watch`). Also how the repository folder is found
(`sandbox_git`).

Scratch folders live in /var/tmp: under /tmp a repository above the workspace would be
seen only through the extra mount that makes it visible again, which has tests of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_tutorial.adapters.git_watch import SubmoduleWatch, git_marker_watch
from agent_tutorial.adapters.sandbox import SandboxPolicy, sandbox_available
from agent_tutorial.adapters.sandbox_git import (
    enclosing_repository,
    git_hooks_folder,
    repository_at,
)
from agent_tutorial.core.sandbox import SandboxMode
from agent_tutorial.core.tools import ToolDefinition
from agent_tutorial.features.bash import BashInput, BashSettings, bash_tool

UNAVAILABLE = sandbox_available()
needs_sandbox = pytest.mark.skipif(
    UNAVAILABLE is not None, reason=f"no sandbox on this system: {UNAVAILABLE}"
)
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def scratch() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="git-watch-", dir="/var/tmp"))
    (base / "tmp").mkdir()
    try:
        yield base
    finally:
        shutil.rmtree(base)


def bash_in(
    workspace: Path, scratch: Path, mode: SandboxMode = "workspace-write"
) -> ToolDefinition:
    policy = SandboxPolicy(
        mode=mode, network=False, workspace=workspace, private_tmp=scratch / "tmp", home=scratch
    )
    return bash_tool(workspace, BashSettings(sandbox=policy))


def run(tool: ToolDefinition, command: str) -> str:
    result = tool.handler(BashInput(command=command))
    return result.content


def make_repository(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder / ".git"


# A .git made in a subfolder of a repository ------------------------------------------------


@needs_sandbox
@needs_git
def test_a_git_a_command_makes_in_a_subfolder_is_removed_and_said(scratch: Path) -> None:
    make_repository(scratch / "repository")
    workspace = scratch / "repository" / "src"
    workspace.mkdir()
    bash = bash_in(workspace, scratch)

    output = run(bash, "git init -q && chmod 000 .git/objects && echo made")

    assert output.startswith("made\n")
    assert output.endswith(
        f"[sandbox] the command made a .git here, which would shadow the repository at "
        f"{scratch / 'repository'} for git run here later; the agent removed it"
    )
    assert not os.path.lexists(workspace / ".git")


@needs_sandbox
@needs_git
@pytest.mark.parametrize("where", ["the workspace's top", "a submodule"])
def test_a_git_the_user_makes_between_commands_is_left_alone(scratch: Path, where: str) -> None:
    top = scratch / "repository"
    if where == "a submodule":
        workspace, folder = top, with_submodule(top, populated=False)
    else:
        make_repository(top)
        workspace = folder = top / "src"
        workspace.mkdir()
    bash = bash_in(workspace, scratch)
    make_repository(folder)  # the user, outside the sandbox, after the session began

    output = run(bash, "echo hello")

    assert "[sandbox]" not in output
    assert (folder / ".git").is_dir()


@needs_sandbox
@needs_git
def test_a_workspace_outside_any_repository_keeps_the_git_a_command_makes(
    scratch: Path,
) -> None:
    workspace = scratch / "plain"
    workspace.mkdir()
    bash = bash_in(workspace, scratch)

    output = run(bash, "git init -q && echo made")

    assert "[sandbox]" not in output
    assert (workspace / ".git").is_dir()


# A .git link --------------------------------------------------------------------------------


@needs_sandbox
@needs_git
@pytest.mark.parametrize(
    "replace",
    ["rm .git && git init -q", "rm .git && ln -s /var/tmp .git", "rm .git && echo x > .git"],
    ids=["a folder", "another link", "a file"],
)
def test_a_git_link_a_command_replaces_is_put_back(scratch: Path, replace: str) -> None:
    target = make_repository(scratch / "elsewhere")
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / ".git").symlink_to(target)
    bash = bash_in(workspace, scratch)

    output = run(bash, replace)
    again = run(bash, "true")

    assert output.endswith(
        f"[sandbox] the command replaced the .git link (to {target}); the agent removed what "
        "replaced it and put the link back"
    )
    assert (workspace / ".git").readlink() == target
    assert "[sandbox]" not in again


@needs_sandbox
@needs_git
def test_a_git_link_the_user_changes_between_commands_is_left_alone(scratch: Path) -> None:
    target = make_repository(scratch / "elsewhere")
    other = make_repository(scratch / "other")
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / ".git").symlink_to(target)
    bash = bash_in(workspace, scratch)
    (workspace / ".git").unlink()
    (workspace / ".git").symlink_to(other)

    output = run(bash, "true")

    assert "[sandbox]" not in output
    assert (workspace / ".git").readlink() == other


@needs_sandbox
@needs_git
def test_read_only_and_an_ordinary_git_folder_need_no_watch(scratch: Path) -> None:
    make_repository(scratch / "repository")
    workspace = scratch / "repository" / "src"
    workspace.mkdir()

    assert git_marker_watch(workspace) is not None
    assert git_marker_watch(scratch / "repository") is None
    output = run(bash_in(workspace, scratch, "read-only"), "git init -q; echo done")
    assert "[sandbox] the command made" not in output
    assert not os.path.lexists(workspace / ".git")  # read-only: it could not make one


# A submodule's .git ---------------------------------------------------------------------------


def with_submodule(top: Path, path: str = "libs/sub", *, populated: bool = True) -> Path:
    """A repository at `top` whose index records a submodule at `path` (its own `.git`
    folder there when `populated`, else an empty folder); returns the submodule's folder."""
    make_repository(top)
    commit = "1" * 40
    cacheinfo = f"160000,{commit},{path}"
    subprocess.run(
        ["git", "-C", str(top), "update-index", "--add", "--cacheinfo", cacheinfo], check=True
    )
    folder = top / path
    folder.mkdir(parents=True)
    if populated:
        make_repository(folder)
    return folder


@needs_sandbox
@needs_git
def test_a_git_put_in_a_submodules_place_by_moving_its_folder_is_removed_and_said(
    scratch: Path,
) -> None:
    # The submodule's .git is read-only, but the folder holding it can be moved away.
    top = scratch / "repository"
    with_submodule(top)
    bash = bash_in(top, scratch)

    output = run(bash, "mv libs moved && mkdir -p libs/sub && git init -q libs/sub && echo made")

    assert output.startswith("made\n")
    assert output.endswith(
        f"[sandbox] the command made libs/sub/.git, which git run at {top} would obey as a "
        "submodule's repository; the agent removed it"
    )
    assert not os.path.lexists(top / "libs" / "sub" / ".git")
    assert (top / "moved" / "sub" / ".git").is_dir()  # the submodule's own, moved with it


@needs_sandbox
@needs_git
def test_a_git_made_where_a_submodule_has_none_is_removed(scratch: Path) -> None:
    top = scratch / "repository"
    with_submodule(top, populated=False)
    bash = bash_in(top, scratch)

    output = run(bash, "echo 'gitdir: ../../evil' > libs/sub/.git; echo x > libs/sub/f")

    assert "[sandbox] the command made libs/sub/.git" in output
    assert sorted(path.name for path in (top / "libs" / "sub").iterdir()) == ["f"]


@needs_sandbox
@needs_git
def test_a_link_on_a_submodules_way_is_never_followed_to_remove_what_it_leads_to(
    scratch: Path,
) -> None:
    # git does not step into a submodule behind a link, and the agent must not delete
    # through one what lies outside the workspace.
    top = scratch / "repository"
    with_submodule(top)
    outside = make_repository(scratch / "outside" / "sub")
    bash = bash_in(top, scratch)

    output = run(bash, f"mv libs moved && ln -s {scratch / 'outside'} libs && echo linked")

    assert output.startswith("linked\n")
    assert "[sandbox] the command made" not in output
    assert outside.is_dir()


@needs_sandbox
@needs_git
def test_a_submodules_own_git_moved_back_by_a_later_command_is_left_alone(
    scratch: Path,
) -> None:
    # Behind a link for one command (git does not look there), then back: the .git is the
    # submodule's own, which the agent must not take for one a command made.
    top = scratch / "repository"
    folder = with_submodule(top)
    (scratch / "elsewhere").mkdir()
    bash = bash_in(top, scratch)

    away = run(bash, f"mv libs moved && ln -s {scratch / 'elsewhere'} libs && echo away")
    back = run(bash, "rm libs && mv moved libs && echo back")

    assert "[sandbox] the command made" not in away + back
    assert (folder / ".git" / "HEAD").is_file()


@needs_sandbox
@needs_git
def test_a_git_made_once_a_link_on_a_submodules_way_is_gone_is_removed(scratch: Path) -> None:
    # While the link is there nothing is stepped into; the next command replaces it.
    top = scratch / "repository"
    with_submodule(top)
    (scratch / "elsewhere").mkdir()
    bash = bash_in(top, scratch)

    run(bash, f"mv libs moved && ln -s {scratch / 'elsewhere'} libs")
    output = run(bash, "rm libs && mkdir -p libs/sub && git init -q libs/sub && echo made")

    assert "[sandbox] the command made libs/sub/.git" in output
    assert not os.path.lexists(top / "libs" / "sub" / ".git")


@needs_git
def test_a_repository_without_submodules_or_no_repository_needs_no_watch(scratch: Path) -> None:
    make_repository(scratch / "repository")
    (scratch / "plain").mkdir()

    assert SubmoduleWatch(scratch / "repository").look() is None
    assert SubmoduleWatch(scratch / "plain").look() is None


@needs_git
def test_the_watch_holds_the_submodules_in_the_workspace_and_theirs_in_turn(
    scratch: Path,
) -> None:
    top = scratch / "repository"
    inner = with_submodule(top, "src/sub")
    subprocess.run(
        [
            "git",
            "-C",
            str(inner),
            "update-index",
            "--add",
            "--cacheinfo",
            f"160000,{'2' * 40},deep",
        ],
        check=True,
    )
    (top / "other").mkdir()
    subprocess.run(
        ["git", "-C", str(top), "update-index", "--add", "--cacheinfo", f"160000,{'3' * 40},other"],
        check=True,
    )

    look = SubmoduleWatch(top / "src").look()

    assert look is not None and look.top == top
    assert sorted(look.before) == [inner / ".git", inner / "deep" / ".git"]
    assert look.before[inner / "deep" / ".git"] is None  # not made yet: watched all the same


# Finding the repository folder ----------------------------------------------------------------


@needs_git
@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (".githooks", "repository/.githooks"),
        ("tools/hooks", "repository/tools/hooks"),
        ("{scratch}/shared-hooks", "shared-hooks"),
        ("~/home-hooks", "home-hooks"),
    ],
    ids=["relative", "deeper", "absolute", "home"],
)
def test_the_git_hooks_folder_is_core_hooks_path_from_the_top(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, setting: str, expected: str
) -> None:
    top = scratch / "repository"
    make_repository(top)
    (top / "src").mkdir()
    monkeypatch.setenv("HOME", str(scratch))
    monkeypatch.setenv("GIT_DIR", str(scratch / "elsewhere"))  # the folder says where
    value = setting.format(scratch=scratch)
    set_hooks_path = ["git", "-C", str(top), "config", "core.hooksPath", value]
    subprocess.run(set_hooks_path, check=True, env={})  # not through the GIT_DIR above

    assert git_hooks_folder(top / "src") == scratch / expected


@needs_git
def test_no_hooks_path_or_no_repository_is_no_git_hooks_folder(scratch: Path) -> None:
    make_repository(scratch / "repository")
    (scratch / "plain").mkdir()

    assert git_hooks_folder(scratch / "repository") is None
    assert git_hooks_folder(scratch / "plain") is None


@needs_git
def test_a_git_file_names_its_git_directory_and_common_directory(scratch: Path) -> None:
    main = make_repository(scratch / "main")
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-C",
            str(main.parent),
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ],
        check=True,
    )
    subprocess.run(
        ["git", "-C", str(main.parent), "worktree", "add", "-q", str(scratch / "linked")],
        check=True,
    )

    repository = repository_at(scratch / "linked")

    assert repository is not None
    assert repository.folders == (
        (scratch / "linked" / ".git").resolve(),
        (main / "worktrees" / "linked").resolve(),
        main.resolve(),
    )


@pytest.mark.parametrize(
    "content", ["", "not a pointer\n", "gitdir:\n", "gitdir: missing\n", "\n\n"]
)
def test_a_git_file_that_points_nowhere_names_only_itself(scratch: Path, content: str) -> None:
    (scratch / ".git").write_text(content)

    repository = repository_at(scratch)

    assert repository is not None
    assert repository.folders == ((scratch / ".git").resolve(),)


def test_no_git_is_no_repository_and_the_nearest_above_is_the_enclosing_one(
    scratch: Path,
) -> None:
    (scratch / "a" / ".git").mkdir(parents=True)
    (scratch / "a" / "b" / ".git").mkdir(parents=True)
    (scratch / "a" / "b" / "c").mkdir()

    assert repository_at(scratch / "a" / "b" / "c") is None
    enclosing = enclosing_repository(scratch / "a" / "b" / "c")
    assert enclosing is not None
    assert enclosing.top == scratch / "a" / "b"


@needs_sandbox
@pytest.mark.parametrize("pointer", ["gitdir: .\n", "gitdir: ..\n"], ids=["itself", "parent"])
def test_a_git_file_naming_a_folder_holding_the_workspace_leaves_it_writable(
    scratch: Path, pointer: str
) -> None:
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / ".git").write_text(pointer)
    bash = bash_in(workspace, scratch)

    output = run(bash, "echo ok > ok.txt && echo x > .git")

    assert (workspace / "ok.txt").read_text() == "ok\n"
    assert "Device or resource busy" in output or "Read-only file system" in output
    assert (workspace / ".git").read_text() == pointer
