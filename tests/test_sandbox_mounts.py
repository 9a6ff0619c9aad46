"""Specification of the sandbox's mounts: what bubblewrap is told to show a command, decided
by real paths, read from `mount_arguments` itself (no sandbox is started: tests/test_sandbox.py
runs commands inside one)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent_tutorial.adapters.sandbox_mounts import SandboxPathError, mount_arguments
from agent_tutorial.core.sandbox import SandboxPolicy

SYSTEM = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def slash_tmp(policy: SandboxPolicy) -> list[str]:
    """The session's private folder as the command's /tmp."""
    return ["--bind", str(policy.private_tmp), "/tmp"]


@pytest.fixture
def policy(tmp_path: Path) -> Iterator[SandboxPolicy]:
    """workspace-write over an empty workspace, with an empty home; under the common umask,
    so that a folder's mode is the one the code asked for."""
    places = [tmp_path.resolve() / name for name in ("work", "tmp", "home")]
    for place in places:
        place.mkdir()
    workspace, private_tmp, home = places
    usual = os.umask(0o022)
    try:
        yield SandboxPolicy("workspace-write", False, workspace, private_tmp, home)
    finally:
        os.umask(usual)


def bind(path: Path) -> list[str]:
    return ["--bind", str(path), str(path)]


def read_only(path: Path) -> list[str]:
    return ["--ro-bind", str(path), str(path)]


def covered_folder(path: Path) -> list[str]:
    return ["--tmpfs", str(path), "--remount-ro", str(path)]


def covered_file(path: Path) -> list[str]:
    return ["--ro-bind", "/dev/null", str(path)]


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def after_the_writable_ones(policy: SandboxPolicy) -> list[str]:
    """The arguments after the system, /tmp (the private directory) and the workspace."""
    arguments = mount_arguments(policy)
    writable = [*SYSTEM, *slash_tmp(policy), *bind(policy.workspace)]
    assert arguments[: len(writable)] == writable
    return arguments[len(writable) :]


# --- the writable places ------------------------------------------------------------------


def test_workspace_write_shows_the_system_read_only_and_the_two_writable_places(
    policy: SandboxPolicy,
) -> None:
    state = policy.workspace / ".agent_tutorial"

    assert mount_arguments(policy) == [
        *SYSTEM,
        *slash_tmp(policy),
        *bind(policy.workspace),
        *read_only(state),
    ]
    assert state.is_dir() and mode_of(state) == 0o700


def test_read_only_writes_only_the_private_directory_and_creates_nothing(
    policy: SandboxPolicy,
) -> None:
    (policy.workspace / ".git").mkdir()

    arguments = mount_arguments(replace(policy, mode="read-only"))

    # The workspace is bound again, read-only: under /tmp the private /tmp would hide it.
    git = policy.workspace / ".git"
    assert arguments == [*SYSTEM, *slash_tmp(policy), *read_only(policy.workspace), *read_only(git)]
    assert sorted(path.name for path in policy.workspace.rglob("*")) == [".git"]


def test_a_workspace_reached_through_a_symlink_is_bound_at_its_real_path(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(policy.workspace)

    arguments = mount_arguments(replace(policy, workspace=link))

    assert bind(policy.workspace) == arguments[10:13]
    assert str(link) not in arguments


def test_the_whole_filesystem_as_a_writable_workspace_is_refused(policy: SandboxPolicy) -> None:
    with pytest.raises(SandboxPathError) as refused:
        mount_arguments(replace(policy, workspace=Path("/")))

    assert str(refused.value) == "the workspace is /: there would be nothing left to confine"


def test_the_whole_filesystem_may_be_a_read_only_workspace(policy: SandboxPolicy) -> None:
    arguments = mount_arguments(replace(policy, mode="read-only", workspace=Path("/")))

    assert arguments == [*SYSTEM, *slash_tmp(policy), *read_only(Path("/"))]


@pytest.mark.parametrize("what", ["workspace", "private temporary directory"])
def test_a_place_that_is_not_a_directory_is_refused_by_name(
    policy: SandboxPolicy, tmp_path: Path, what: str
) -> None:
    missing = tmp_path / "missing"
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")

    for path in (missing, not_a_folder):
        unusable = (
            replace(policy, workspace=path)
            if what == "workspace"
            else replace(policy, private_tmp=path)
        )
        with pytest.raises(SandboxPathError) as refused:
            mount_arguments(unusable)

        assert str(refused.value) == f"the {what} {str(path)!r} is not a directory"


# --- what stays read-only inside the workspace --------------------------------------------


def test_an_existing_state_folder_is_kept_as_it_is(policy: SandboxPolicy) -> None:
    state = policy.workspace / ".agent_tutorial"
    state.mkdir(mode=0o755)

    assert after_the_writable_ones(policy) == read_only(state)
    assert mode_of(state) == 0o755


def test_a_state_folder_that_is_a_symlink_is_protected_at_its_target(
    policy: SandboxPolicy,
) -> None:
    target = policy.workspace / "elsewhere"
    target.mkdir()
    (policy.workspace / ".agent_tutorial").symlink_to(target)

    assert after_the_writable_ones(policy) == read_only(target)


def test_a_state_folder_that_is_a_dangling_symlink_is_not_created(
    policy: SandboxPolicy,
) -> None:
    state = policy.workspace / ".agent_tutorial"
    state.symlink_to(policy.workspace / "nowhere")

    assert after_the_writable_ones(policy) == []
    assert not (policy.workspace / "nowhere").exists()


def test_a_state_folder_at_a_project_root_above_is_neither_created_nor_bound(
    policy: SandboxPolicy,
) -> None:
    inner = policy.workspace / "sub"
    inner.mkdir()

    arguments = mount_arguments(replace(policy, workspace=inner, project_root=policy.workspace))

    assert arguments == [*SYSTEM, *slash_tmp(policy), *bind(inner)]
    assert not (policy.workspace / ".agent_tutorial").exists()


def test_a_state_folder_whose_target_is_outside_the_workspace_is_not_bound(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (policy.workspace / ".agent_tutorial").symlink_to(outside)

    assert after_the_writable_ones(policy) == []


def test_the_whole_repository_folder_is_read_only_and_nothing_is_created_in_it(
    policy: SandboxPolicy,
) -> None:
    git = policy.workspace / ".git"
    git.mkdir()

    protected = after_the_writable_ones(policy)

    state = policy.workspace / ".agent_tutorial"
    assert protected == [*read_only(state), *read_only(git)]
    assert list(git.iterdir()) == []


def test_what_git_obeys_that_exists_is_kept_as_it_is(policy: SandboxPolicy) -> None:
    git = policy.workspace / ".git"
    (git / "hooks").mkdir(parents=True, mode=0o755)
    (git / "config").write_text("[core]\n")

    mount_arguments(policy)

    assert mode_of(git / "hooks") == 0o755
    assert (git / "config").read_text() == "[core]\n"


def test_a_git_file_is_read_only_itself(policy: SandboxPolicy) -> None:
    git = policy.workspace / ".git"
    git.write_text("gitdir: /elsewhere\n")

    assert after_the_writable_ones(policy)[3:] == read_only(git)


def test_links_in_the_repository_folder_are_neither_followed_nor_created(
    policy: SandboxPolicy,
) -> None:
    git = policy.workspace / ".git"
    git.mkdir()
    for name in ("hooks", "info", "config"):
        (git / name).symlink_to(policy.workspace / f"no-{name}")

    assert after_the_writable_ones(policy)[3:] == read_only(git)
    assert sorted(path.name for path in policy.workspace.iterdir()) == [".agent_tutorial", ".git"]
    assert sorted(path.name for path in git.iterdir()) == ["config", "hooks", "info"]


def test_a_link_in_the_repository_folder_to_outside_is_not_bound_on_its_own(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    git = policy.workspace / ".git"
    git.mkdir()
    outside = tmp_path / "shared-hooks"
    outside.mkdir()
    (git / "hooks").symlink_to(outside)

    # The link is inside the read-only folder; what it points to is outside the workspace,
    # read-only anyway.
    assert after_the_writable_ones(policy)[3:] == read_only(git)


def record_submodules(top: Path, *paths: str) -> None:
    """Make `top` a repository whose index records a submodule at each of `paths`."""
    subprocess.run(["git", "init", "-q", str(top)], check=True, capture_output=True)
    lines = "".join(f"160000 {'1' * 40}\t{path}\n" for path in paths)
    git_index = ["git", "-C", str(top), "update-index", "--add", "--index-info"]
    subprocess.run(git_index, input=lines, text=True, check=True)


@needs_git
def test_each_submodules_git_file_or_folder_is_read_only_but_not_its_git_dir_again(
    policy: SandboxPolicy,
) -> None:
    # `git status` at the top steps into each: a .git file re-pointed, or a .git folder's
    # config, would run a command there.
    workspace = policy.workspace
    record_submodules(workspace, "b", "libs/a", "libs/unpopulated")
    (workspace / ".git" / "modules" / "a").mkdir(parents=True)
    (workspace / "libs" / "a").mkdir(parents=True)
    (workspace / "libs" / "a" / ".git").write_text("gitdir: ../../.git/modules/a\n")
    subprocess.run(["git", "init", "-q", str(workspace / "b")], check=True)

    protected = after_the_writable_ones(policy)

    state, git = workspace / ".agent_tutorial", workspace / ".git"
    submodules = [*read_only(workspace / "b" / ".git"), *read_only(workspace / "libs/a/.git")]
    assert protected == [*read_only(state), *read_only(git), *submodules]


@needs_git
def test_a_submodules_own_submodules_are_bound_and_one_behind_a_link_is_not(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    top = policy.workspace
    record_submodules(top, "link/sub", "work/sub")
    record_submodules(top / "work" / "sub", "deep")
    subprocess.run(["git", "init", "-q", str(top / "work" / "sub" / "deep")], check=True)
    (tmp_path / "elsewhere" / "sub" / ".git").mkdir(parents=True)
    (top / "link").symlink_to(tmp_path / "elsewhere")  # git does not step into it either

    arguments = after_the_writable_ones(policy)

    state, git = top / ".agent_tutorial", top / ".git"
    submodules = [*read_only(top / "work/sub/.git"), *read_only(top / "work/sub/deep/.git")]
    assert arguments == [*read_only(state), *read_only(git), *submodules]


def test_a_repository_above_a_workspace_under_tmp_is_seen_again_read_only(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    # Under /tmp the private /tmp would hide the repository above the workspace; git run
    # in the workspace must find it.
    top = tmp_path.resolve()
    (top / ".git").mkdir()

    arguments = mount_arguments(policy)

    state = policy.workspace / ".agent_tutorial"
    assert arguments == [
        *SYSTEM,
        *slash_tmp(policy),
        *read_only(top),
        *bind(policy.workspace),
        *read_only(state),
        *read_only(top / ".git"),
    ]


def test_a_git_dir_holding_the_workspace_is_skipped_and_its_common_dir_still_bound(
    policy: SandboxPolicy,
) -> None:
    # `gitdir: ..` names the folder holding the workspace: binding it read-only would make
    # the workspace read-only; what follows it (its commondir) is still bound.
    workspace = policy.workspace
    (workspace / ".git").write_text("gitdir: ..\n")
    (workspace.parent / "commondir").write_text(f"{workspace.name}/common\n")
    (workspace / "common").mkdir()

    protected = after_the_writable_ones(policy)

    state = workspace / ".agent_tutorial"
    assert protected == [
        *read_only(state),
        *read_only(workspace / ".git"),
        *read_only(workspace / "common"),
    ]


# --- the secrets --------------------------------------------------------------------------


def test_a_secret_folder_is_covered_by_an_empty_one_and_a_secret_file_by_dev_null(
    policy: SandboxPolicy,
) -> None:
    (policy.home / ".ssh").mkdir()
    (policy.home / ".netrc").write_text("machine x password y\n")

    secrets = after_the_writable_ones(policy)[3:]

    assert secrets == [*covered_folder(policy.home / ".ssh"), *covered_file(policy.home / ".netrc")]


def test_the_secrets_are_covered_in_read_only_too(policy: SandboxPolicy) -> None:
    (policy.home / ".ssh").mkdir()

    arguments = mount_arguments(replace(policy, mode="read-only"))

    assert arguments[-4:] == covered_folder(policy.home / ".ssh")


def test_the_secrets_are_the_homes_listed_ones_then_the_others_then_the_state_env(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    key = tmp_path / "key.pem"
    key.write_text("")
    (policy.home / ".aws").mkdir()
    state = policy.workspace / ".agent_tutorial"
    (state / "checkpoints").mkdir(parents=True)  # copies of files the workspace lost
    (state / ".env").write_text("OPENAI_API_KEY=x\n")

    secrets = after_the_writable_ones(replace(policy, also_hidden=(key,)))[3:]

    assert secrets == [
        *covered_folder(policy.home / ".aws"),
        *covered_file(key),
        *covered_file(state / ".env"),
        *covered_folder(state / "checkpoints"),
    ]


def test_a_secret_reached_through_a_symlink_is_covered_once_at_its_real_path(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    real = tmp_path / "keys"
    real.mkdir()
    (policy.home / ".ssh").symlink_to(real)
    (policy.home / ".gnupg").symlink_to(real)

    assert after_the_writable_ones(policy)[3:] == covered_folder(real)


def test_a_secret_that_is_a_dangling_symlink_is_not_covered(policy: SandboxPolicy) -> None:
    (policy.home / ".netrc").symlink_to(policy.home / "nothing")

    assert after_the_writable_ones(policy)[3:] == []


def test_a_home_reached_through_a_symlink_has_its_secrets_covered_at_their_real_paths(
    policy: SandboxPolicy, tmp_path: Path
) -> None:
    (policy.home / ".ssh").mkdir()
    link = tmp_path / "home-link"
    link.symlink_to(policy.home)

    assert after_the_writable_ones(replace(policy, home=link))[3:] == covered_folder(
        policy.home / ".ssh"
    )


def test_a_visible_path_under_tmp_is_shown_again_read_only_and_others_are_not(
    policy: SandboxPolicy,
) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as under_tmp:
        hidden_by_the_private_tmp = Path(under_tmp).resolve()
        inside = policy.workspace / "src"
        inside.mkdir()
        visible = (hidden_by_the_private_tmp, Path("/usr/bin"), inside, Path("/tmp/no-such"))

        arguments = mount_arguments(replace(policy, visible=visible))

    shown = [*SYSTEM, *slash_tmp(policy), *read_only(hidden_by_the_private_tmp)]
    assert arguments[: len(shown)] == shown
    assert str(Path("/usr/bin")) not in arguments  # seen through the read-only root already
    assert str(inside) not in arguments and "/tmp/no-such" not in arguments
