"""The agent's state folder, `.agent_tutorial/` at the project root, made in this one place:
a real folder (never a symlink's target) with a `.gitignore` that keeps sessions, artifacts,
history and `.env` out of the user's repository, sharing only what a team would."""

from __future__ import annotations

import errno
import os
import secrets
from contextlib import suppress
from pathlib import Path

from agent_tutorial.core.paths import STATE_DIR

GITIGNORE_NAME = ".gitignore"
STATE_GITIGNORE = """\
# Written by agent-tutorial: what it keeps here (sessions, artifacts, history, .env)
# stays out of git. Shared: this file, config.toml, skills/ and the .env template.
/*
!/.gitignore
!/config.toml
!/skills/
!/.env.example
"""
"""Anchored patterns (`/*`): only the folder's own entries are ignored, so every file at
any depth under `skills/` stays visible."""

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def open_state_folder(root: Path) -> int:
    """A descriptor of `root/.agent_tutorial`, made (mode 0700) if missing, with its
    `.gitignore` written if it has none. The caller closes it. Raises `OSError`: ELOOP or
    ENOTDIR when the name is a symlink or a file."""
    parent = os.open(root, _DIRECTORY_FLAGS)
    try:
        with suppress(FileExistsError):
            os.mkdir(STATE_DIR, 0o700, dir_fd=parent)
        folder = os.open(STATE_DIR, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
    finally:
        os.close(parent)
    # The ignore file is a courtesy: a folder it cannot be written in still serves the run.
    with suppress(OSError):
        write_gitignore_once(folder)
    return folder


def ensure_state_folder(root: Path) -> Path:
    """`root/.agent_tutorial`, made as `open_state_folder` makes it."""
    os.close(open_state_folder(root))
    return root / STATE_DIR


def write_gitignore_once(folder: int) -> bool:
    """Write `STATE_GITIGNORE` as `.gitignore` in the folder `folder` opens, unless an
    entry of that name exists (the user's own is left alone). Whole or not at all: the text
    goes to a temporary file that is then linked to the name, which fails if it exists.
    True if this call wrote it."""
    if _exists(GITIGNORE_NAME, folder):
        return False
    temporary = f".gitignore.{secrets.token_hex(6)}.tmp"
    descriptor = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder
    )
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(STATE_GITIGNORE.encode())
            file.flush()
            os.fsync(file.fileno())
        os.link(temporary, GITIGNORE_NAME, src_dir_fd=folder, dst_dir_fd=folder)
    except FileExistsError:  # another run wrote it first
        return False
    finally:
        os.unlink(temporary, dir_fd=folder)
    return True


def _exists(name: str, folder: int) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError as error:
        if error.errno == errno.ENOENT:
            return False
        raise
    return True
