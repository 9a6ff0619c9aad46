"""What the sandbox cannot mount over, the bash tool undoes: a `.git` a command makes at the
top of a workspace inside a repository, a `.git` link a command replaces. Each through the
real bash tool in the real sandbox, and each both ways: what the user changes between
commands is theirs and stays (`git_watch`). Also how the repository folder is found
(`sandbox_git`).

Scratch folders live in /var/tmp: under /tmp a repository above the workspace would be
seen only through the extra mount that makes it visible again, which has tests of its own.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.adapters import git_watch, sandbox_git
from agent_tutorial.adapters.git_watch import (
    GitMarkerWatch,
    SubmoduleWatch,
    _open_up,
    _remove_submodule_git,
    git_marker_watch,
)
from agent_tutorial.adapters.sandbox import SandboxPolicy, sandbox_available
from agent_tutorial.adapters.sandbox_git import (
    Repository,
    enclosing_repository,
    git_hooks_folder,
    repository_at,
    submodule_markers,
)
from agent_tutorial.core.sandbox import SandboxMode
from agent_tutorial.core.tools import ToolDefinition
from agent_tutorial.features.bash import BashInput, BashSettings, bash_tool
from tests.memory import peak_memory

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
    ["rm .git && git init -q", "rm .git && ln -s ../decoy .git", "rm .git && echo x > .git"],
    ids=["a folder", "another link", "a file"],
)
def test_a_git_link_a_command_replaces_is_put_back(scratch: Path, replace: str) -> None:
    # The other link leads to a folder of the test's own (never a system folder: a mutant
    # that follows it must harm nothing but the test), whose rights must stay as they are.
    target = make_repository(scratch / "elsewhere")
    decoy = scratch / "decoy"
    decoy.mkdir(mode=0o755)
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
    assert mode_of(decoy) == 0o755


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
def test_an_empty_hooks_path_is_no_git_hooks_folder(scratch: Path) -> None:
    # Not the repository's top, which `top / ""` would be.
    top = scratch / "repository"
    make_repository(top)
    subprocess.run(["git", "-C", str(top), "config", "core.hooksPath", ""], check=True)

    assert git_hooks_folder(top) is None


@needs_git
def test_a_hooks_path_that_is_not_utf8_is_kept_by_its_bytes(scratch: Path) -> None:
    top = scratch / "repository"
    make_repository(top)
    setting = [b"git", b"-C", bytes(top), b"config", b"core.hooksPath", b"caf\xe9-hooks"]
    subprocess.run(setting, check=True)

    assert git_hooks_folder(top) == top.resolve() / os.fsdecode(b"caf\xe9-hooks")


def fake_git(scratch: Path, monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    """The only git on PATH: a Python `program`."""
    fake = scratch / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\n{program}")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))


def test_git_asked_for_the_hooks_folder_reads_nothing_of_the_agents_input(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A git that answers with what it reads: the agent's own input holds a folder's name.
    (scratch / "repository" / ".git").mkdir(parents=True)
    fake_git(scratch, monkeypatch, "import sys\nprint(sys.stdin.read())\n")
    reading, writing = os.pipe()
    os.write(writing, b"from-the-agents-input\n")
    os.close(writing)
    agents_input = os.dup(0)
    os.dup2(reading, 0)
    try:
        found = git_hooks_folder(scratch / "repository")
    finally:
        os.dup2(agents_input, 0)
        os.close(agents_input)
        os.close(reading)

    assert found is None


def test_a_git_that_does_not_answer_in_time_names_no_git_hooks_folder(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A git that would name `late-hooks` after a while: the agent does not wait for it.
    (scratch / "repository" / ".git").mkdir(parents=True)
    fake_git(scratch, monkeypatch, "import time\ntime.sleep(5)\nprint('late-hooks')\n")
    monkeypatch.setattr(sandbox_git, "_GIT_CONFIG_TIMEOUT_S", 0.5)

    assert git_hooks_folder(scratch / "repository") is None


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
    assert repository.git_dir == (main / "worktrees" / "linked").resolve()


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


@pytest.mark.parametrize("what", ["a dangling link", "a link loop", "a FIFO"])
def test_a_git_that_leads_to_no_folder_is_a_repository_with_nothing_to_protect(
    scratch: Path, what: str
) -> None:
    marker = scratch / ".git"
    if what == "a dangling link":
        marker.symlink_to(scratch / "nowhere")
    elif what == "a link loop":
        marker.symlink_to(marker)
    else:
        os.mkfifo(marker)

    repository = repository_at(scratch)

    assert repository == Repository(marker, ())
    assert submodule_markers(repository) == ()


def test_a_fifo_left_as_a_commondir_names_nothing_and_does_not_block(scratch: Path) -> None:
    git = (scratch / ".git").resolve()
    git.mkdir()
    os.mkfifo(git / "commondir")

    assert repository_at(scratch) == Repository(scratch / ".git", (git,), git)


def test_a_huge_git_file_is_read_no_further_than_its_start(scratch: Path) -> None:
    (scratch / "real").mkdir()
    (scratch / ".git").write_text("gitdir: real\n")
    os.truncate(scratch / ".git", 1 << 24)  # sparse: no disk is used
    with peak_memory() as peak:
        repository = repository_at(scratch)

    assert repository is not None
    assert repository.git_dir == (scratch / "real").resolve()
    assert peak.bytes < 1 << 20


def test_a_git_file_naming_a_folder_that_is_not_utf8_names_that_folder(scratch: Path) -> None:
    folder = scratch / os.fsdecode(b"caf\xe9")
    folder.mkdir()
    (scratch / ".git").write_bytes(b"gitdir: caf\xe9\n")

    repository = repository_at(scratch)

    assert repository is not None
    assert repository.folders == ((scratch / ".git").resolve(), folder.resolve())


# Which submodules are watched ------------------------------------------------------------


def add_gitlink(top: Path, path: str) -> None:
    cacheinfo = f"160000,{'1' * 40},{path}"
    subprocess.run(
        ["git", "-C", str(top), "update-index", "--add", "--cacheinfo", cacheinfo], check=True
    )


@needs_git
@pytest.mark.parametrize(("most", "depth"), [(2, 2), (3, 3)])
def test_no_more_repositories_are_read_for_submodules_than_the_most(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, most: int, depth: int
) -> None:
    # A chain: the top records a, a records b, b records c. Each repository read names one.
    top = scratch / "repository"
    folder = with_submodule(with_submodule(top, "a"), "b")
    add_gitlink(folder, "c")
    monkeypatch.setattr(sandbox_git, "_MAX_REPOSITORIES", most)

    markers = submodule_markers(Repository(top / ".git", (), (top / ".git").resolve()))

    assert markers == (top / "a/.git", top / "a/b/.git", top / "a/b/c/.git")[:depth]


@needs_git
def test_the_submodules_of_a_submodule_behind_a_link_are_not_read(scratch: Path) -> None:
    # git does not step past the link; a command can replace it, so its own .git is kept.
    top = scratch / "repository"
    make_repository(top)
    add_gitlink(top, "link/sub")
    add_gitlink(with_submodule(scratch / "elsewhere", "sub"), "deep")
    (top / "link").symlink_to(scratch / "elsewhere")

    repository = repository_at(top)

    assert repository is not None
    assert submodule_markers(repository) == (top / "link/sub/.git",)


@needs_git
def test_a_submodule_that_is_the_top_repository_again_is_read_once(scratch: Path) -> None:
    # b's .git names the top's own git directory; a, read after it, still counts.
    top = scratch / "repository"
    folder = with_submodule(top, "a")
    add_gitlink(folder, "deep")
    add_gitlink(top, "b")
    (top / "b").mkdir()
    (top / "b" / ".git").write_text("gitdir: ../.git\n")

    repository = repository_at(top)

    assert repository is not None
    assert submodule_markers(repository) == (top / "a/.git", top / "b/.git", top / "a/deep/.git")


@needs_git
def test_a_submodule_path_that_leads_out_or_is_absolute_is_passed_over(scratch: Path) -> None:
    # git records neither; a command could write an index that does. Same lengths as the
    # paths git recorded, so each entry stays whole.
    top = scratch / "repository"
    make_repository(top)
    for path in ("xabs/x", "xx/out", "z/sub"):
        add_gitlink(top, path)
    index = top / ".git" / "index"
    index.write_bytes(
        index.read_bytes().replace(b"xabs/x", b"/abs/x").replace(b"xx/out", b"../out")
    )

    repository = repository_at(top)

    assert repository is not None
    assert submodule_markers(repository) == (top / "z/sub/.git",)


# Undoing, in process -----------------------------------------------------------------------


def test_a_git_link_a_command_removed_is_put_back(scratch: Path) -> None:
    target = scratch / "elsewhere"
    target.mkdir()
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / ".git").symlink_to(target)
    watch = git_marker_watch(workspace)
    assert watch is not None
    (workspace / ".git").unlink()

    note = watch.undo_change()

    assert note == (
        f"the command replaced the .git link (to {target}); the agent removed what replaced it "
        "and put the link back"
    )
    assert (workspace / ".git").readlink() == target


def test_a_git_the_agent_cannot_remove_is_said_to_be_left(scratch: Path) -> None:
    # A name in /proc, which no one may remove, stands in for the .git a command made.
    watch = GitMarkerWatch(Path("/proc/self/status"), None, scratch)

    note = watch.undo_change()

    assert note is not None
    assert note.startswith(
        f"the command made a .git here, which shadows the repository at {scratch}, and it "
        "could not be removed: [Errno "
    )
    assert note.endswith("'status'; remove it before running git here")


@needs_git
@pytest.mark.parametrize("when", ["by the command", "before it"])
def test_a_link_made_as_a_submodules_git_is_removed_not_followed(scratch: Path, when: str) -> None:
    top = scratch / "repository"
    folder = with_submodule(top, populated=False)
    watch = SubmoduleWatch(top)
    if when == "before it":
        (folder / ".git").symlink_to(scratch / "nowhere")
    look = watch.look()
    assert look is not None
    if when == "by the command":
        (folder / ".git").symlink_to(scratch / "nowhere")

    notes = watch.undo_changes(look)

    if when == "by the command":
        assert notes == [
            f"the command made libs/sub/.git, which git run at {top} would obey as a "
            "submodule's repository; the agent removed it"
        ]
        assert not os.path.lexists(folder / ".git")
    else:
        assert notes == []
        assert (folder / ".git").readlink() == scratch / "nowhere"


def test_a_submodules_git_whose_folder_is_gone_is_said_to_be_left(scratch: Path) -> None:
    note = _remove_submodule_git(scratch, scratch / "libs" / "sub" / ".git")

    assert note == (
        f"the command made libs/sub/.git, which git run at {scratch} would obey as a "
        f"submodule's repository, and it could not be removed: {scratch / 'libs' / 'sub'}; "
        "remove it before running git there"
    )


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def shadow_without_rights(scratch: Path) -> list[Path]:
    """scratch/shadow holding objects/pack and refs, each without any rights; returns them."""
    folders = [scratch / "shadow" / "objects" / "pack", scratch / "shadow" / "refs"]
    for folder in folders:
        folder.mkdir(parents=True)
    folders.insert(1, folders[0].parent)
    for folder in folders:  # pack before objects: it could not be reached after
        folder.chmod(0)
    return folders


def open_up(scratch: Path) -> None:
    parent = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _open_up("shadow", parent)
    finally:
        os.close(parent)


def test_opening_up_gives_each_real_folder_its_owners_rights_and_nothing_else(
    scratch: Path,
) -> None:
    folders = shadow_without_rights(scratch)
    outside, beside = scratch / "outside", scratch / "beside"
    for folder in (outside, beside):
        folder.mkdir()
        folder.chmod(0o755)
    (scratch / "shadow" / "link").symlink_to(outside)

    open_up(scratch)

    assert [mode_of(folder) for folder in folders] == [0o700] * 3
    assert mode_of(outside) == mode_of(beside) == 0o755


def test_a_folder_whose_rights_cannot_be_given_back_is_passed_over(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As for a folder another user owns: chmod refuses it, and the others still get theirs.
    _pack, objects, refs = shadow_without_rights(scratch)
    real_chmod = os.chmod

    def chmod(path: Any, mode: int, **options: Any) -> None:
        if os.path.realpath(path, strict=True) == str(objects):
            raise PermissionError(errno.EPERM, "not the owner", path)
        real_chmod(path, mode, **options)

    monkeypatch.setattr(os, "chmod", chmod)

    open_up(scratch)

    assert (mode_of(objects), mode_of(refs)) == (0, 0o700)
    monkeypatch.undo()
    objects.chmod(0o700)  # for the scratch folder's removal, by a user other than root


def test_a_link_put_in_place_of_a_folder_being_removed_is_not_followed(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A confined process (an MCP server shares the workspace) swaps the .git folder the
    # agent saw for a link to a folder of the user's: its rights and contents stay.
    decoy = scratch / "decoy"
    decoy.mkdir(mode=0o755)
    (decoy / "kept").write_text("mine")
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / ".git").symlink_to(decoy)
    monkeypatch.setattr(git_watch, "_is_real_folder", lambda name, parent: True)

    with pytest.raises(NotADirectoryError):
        git_watch._remove(workspace / ".git")

    assert mode_of(decoy) == 0o755 and (decoy / "kept").read_text() == "mine"
    assert (workspace / ".git").is_symlink()


def test_opening_up_passes_over_a_link_among_the_folders(scratch: Path) -> None:
    folders = shadow_without_rights(scratch)
    decoy = scratch / "decoy"
    decoy.mkdir(mode=0o755)
    (folders[0] / "link").symlink_to(decoy)

    open_up(scratch)

    assert mode_of(decoy) == 0o755
