"""Folder trust: which project roots the user trusts, with which powerful settings.

A project's `.agent_tutorial/config.toml` and `.env` may hold settings that run code or
widen power (`config.POWERFUL_SETTINGS`); they apply only once the user trusts the folder,
as Codex CLI loads a project's config only for a trusted project and Claude Code asks
"trust this folder?". `agent-tutorial trust` (or a yes in the REPL) records the project's
real path with a hash of those settings' text in the user's own config folder,
`$XDG_CONFIG_HOME/agent-tutorial/trusted-projects.json`; a later change to them no longer
matches, and the folder is untrusted until trusted again. The hash covers the settings
and the project files a hook command names (`adapters.hook_scripts`): a changed
`hooks/guard.py` untrusts the folder as a changed hook command does.

Nothing in a project can set trust: the store lives with the user's config, is written
atomically (a temporary file, fsync, rename) with mode 0600, and one that is a symlink,
belongs to another user or others may write is refused rather than read or replaced.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import orjson

from agent_tutorial.config import ConfigError, user_config_path, value_sha256

TRUST_FILE = "trusted-projects.json"
FORMAT_VERSION = 1
MAX_STORE_BYTES = 4 * 1024 * 1024
"""Far more than any number of trusted folders needs; a larger file is refused, not read."""


class TrustStoreError(ConfigError):
    """The trust store cannot be used as it stands (exit code 2): the message says why."""


def trust_store_path() -> Path:
    return user_config_path().parent / TRUST_FILE


def is_trusted(root: Path, settings_digest: str) -> bool:
    """Whether the user trusts the project at `root` with exactly these powerful settings."""
    entry = _read_store(trust_store_path()).get(_key(root))
    return isinstance(entry, dict) and entry.get("settings_sha256") == settings_digest


def record_trust(
    root: Path, settings_digest: str, powerful: Mapping[str, Any] | None = None
) -> Path:
    """Trust the project at `root` with these powerful settings; returns the store's path.
    With `powerful` given, each setting's own hash is kept too, so a later run can say
    which one changed (`changed_since_trusted`)."""
    path = trust_store_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _locked(path.parent):
        projects = _read_store(path)
        projects[_key(root)] = {
            "settings_sha256": settings_digest,
            "each_sha256": setting_digests(powerful or {}),
        }
        data = {"format_version": FORMAT_VERSION, "projects": projects}
        _replace_atomically(path, orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def changed_since_trusted(root: Path, powerful: Mapping[str, Any]) -> list[str]:
    """The powerful settings (a hook script among them) that differ from those the user
    last trusted at `root`: changed, added or gone. None when the folder was never trusted
    (or trusted before settings were hashed one by one)."""
    entry = _read_store(trust_store_path()).get(_key(root))
    recorded = entry.get("each_sha256") if isinstance(entry, dict) else None
    if not isinstance(recorded, dict) or not recorded:
        return []
    now = setting_digests(powerful)
    return [
        name for name in dict.fromkeys([*now, *recorded]) if now.get(name) != recorded.get(name)
    ]


def setting_digests(powerful: Mapping[str, Any]) -> dict[str, str]:
    """Each powerful setting by name, with a hash of its value (as `ProjectSettings.digest`
    hashes them all)."""
    return {name: value_sha256(value) for name, value in powerful.items()}


def _key(root: Path) -> str:
    """The project's real path as the store's key: the text itself when it is UTF-8,
    otherwise its bytes in hex (JSON holds no lone surrogates; no real path starts with
    `bytes:`, so the two forms never meet)."""
    real = os.fsencode(root.resolve())
    try:
        return real.decode("utf-8")
    except UnicodeDecodeError:
        return f"bytes:{real.hex()}"


def _read_store(path: Path) -> dict[str, Any]:
    """The trusted projects by key; none when there is no store yet."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return {}
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refused(path, "it is a symlink") from None
        raise TrustStoreError(f"cannot read {path}: {error.strerror or error}") from None
    with os.fdopen(descriptor, "rb") as file:
        _check_ownership(path, os.fstat(descriptor))
        data = file.read(MAX_STORE_BYTES + 1)
    if len(data) > MAX_STORE_BYTES:
        raise _refused(path, f"it is larger than {MAX_STORE_BYTES:,} bytes")
    try:
        store = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise _refused(path, f"it is not valid JSON ({error})") from None
    projects = store.get("projects") if isinstance(store, dict) else None
    if not isinstance(projects, dict):
        raise _refused(path, 'it has no "projects" object')
    return projects


def _check_ownership(path: Path, info: os.stat_result) -> None:
    """Only the user's own regular file, writable by nobody else, says what they trust."""
    if not stat.S_ISREG(info.st_mode):
        raise _refused(path, "it is not a regular file")
    if info.st_uid != os.geteuid():
        raise _refused(path, f"it belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o022:
        raise _refused(path, f"others may write it (mode {stat.S_IMODE(info.st_mode):o})")


def _refused(path: Path, why: str) -> TrustStoreError:
    return TrustStoreError(
        f"the trust store {path} is refused: {why}. Remove it (agent-tutorial trust writes "
        "a new one) or make it your own file, mode 600."
    )


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Two `trust` commands at once would each write what they read, losing one entry."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _replace_atomically(path: Path, data: bytes) -> None:
    """Readers see the old store or the new one, never a mix; a store that turned into a
    symlink or someone else's file meanwhile is refused, not replaced."""
    with suppress(FileNotFoundError):
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise _refused(path, "it is a symlink")
        _check_ownership(path, info)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(temporary, flags, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(path)
    except OSError as error:
        with suppress(FileNotFoundError):
            temporary.unlink()
        raise TrustStoreError(f"cannot write {path}: {error.strerror or error}") from None
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    with suppress(OSError):  # make the rename durable where the system allows
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
