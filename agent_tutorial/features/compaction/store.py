"""Where chapter 8 writes: artifact ids, the `.agent_tutorial/artifacts` directory, and
files published atomically and exclusively, so a persisted result or transcript is never
half-written, never overwrites anything and never lands outside the workspace.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from agent_tutorial.core.tools import WholeOutput
from agent_tutorial.features.compaction.errors import (
    ArtifactConflictError,
    ArtifactPathError,
    CompactionError,
)
from agent_tutorial.features.state_folder import open_state_folder

STATE_DIRECTORY = ".agent_tutorial"
ARTIFACTS_DIRECTORY = "artifacts"
ARTIFACTS_RELATIVE_PATH = f"{STATE_DIRECTORY}/{ARTIFACTS_DIRECTORY}"

_ARTIFACT_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_MAX_ID_LENGTH = 96
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class ArtifactReference:
    """Where one published artifact lives and how many bytes it holds."""

    path: Path
    relative_path: str
    original_bytes: int


ArtifactContent: TypeAlias = bytes | WholeOutput
"""What an artifact holds: bytes in memory, or a tool's whole output streamed from its spool."""


def validate_artifact_id(artifact_id: str) -> str:
    """Return `artifact_id` if it is a lowercase slug of at most 96 characters."""
    if len(artifact_id) > _MAX_ID_LENGTH or not _ARTIFACT_ID.fullmatch(artifact_id):
        raise ArtifactPathError(
            f"artifact id {artifact_id!r} must match ^[a-z0-9]+(-[a-z0-9]+)*$ "
            f"and be at most {_MAX_ID_LENGTH} characters"
        )
    return artifact_id


def _uuid_hex() -> str:
    return uuid.uuid4().hex


class ArtifactStore:
    """Publishes files into `<workspace>/.agent_tutorial/artifacts/`.

    Directories are opened one level at a time with `O_NOFOLLOW`, so a symlinked or
    non-directory `.agent_tutorial` or `artifacts` is refused instead of followed. With
    `shown_absolute` (the project root holding the state folder lies above the tools'
    boundary) a reference names its file by absolute path, which the read tools take.
    """

    def __init__(
        self,
        workspace: Path,
        id_generator: Callable[[], str] | None = None,
        *,
        shown_absolute: bool = False,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        self._id_generator = id_generator or _uuid_hex
        self._shown_absolute = shown_absolute

    def new_id(self) -> str:
        return validate_artifact_id(self._id_generator())

    def reference(self, name: str, original_bytes: int) -> ArtifactReference:
        path = self.workspace / STATE_DIRECTORY / ARTIFACTS_DIRECTORY / name
        shown = str(path) if self._shown_absolute else f"{ARTIFACTS_RELATIVE_PATH}/{name}"
        return ArtifactReference(path=path, relative_path=shown, original_bytes=original_bytes)

    def publish(
        self, files: Sequence[tuple[str, ArtifactContent]]
    ) -> tuple[ArtifactReference, ...]:
        """Write every (name, bytes) pair, or none of them: on any failure the files this
        call already published are removed again."""
        directory = self._open_artifacts_directory()
        published: list[str] = []
        try:
            for name, data in files:
                self._publish_one(directory, name, data)
                published.append(name)
            _sync_directory(directory)
        except BaseException:
            for name in published:
                with suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=directory)
            raise
        finally:
            os.close(directory)
        return tuple(self.reference(name, _size(data)) for name, data in files)

    def _publish_one(self, directory: int, name: str, data: ArtifactContent) -> None:
        relative = f"{ARTIFACTS_RELATIVE_PATH}/{name}"
        temporary = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            _write_durably(directory, temporary, data)
            _link_exclusively(directory, temporary, name, relative)
        except OSError as error:
            raise CompactionError(
                f"could not write {relative}: {error.strerror or error}"
            ) from error
        finally:
            with suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=directory)

    def _open_artifacts_directory(self) -> int:
        state = _open_state_folder(self.workspace)
        try:
            return _open_real_subdirectory(state, ARTIFACTS_DIRECTORY, ARTIFACTS_RELATIVE_PATH)
        finally:
            os.close(state)


def _open_state_folder(root: Path) -> int:
    try:
        return open_state_folder(root)
    except (FileNotFoundError, NotADirectoryError) as error:
        if root.is_dir():  # the state folder's name is a file
            raise ArtifactPathError(
                f"{STATE_DIRECTORY} must be a real directory inside the workspace "
                "(not a symlink or a file)"
            ) from error
        raise ArtifactPathError(f"workspace {str(root)!r} is not a directory") from error
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ArtifactPathError(
                f"{STATE_DIRECTORY} must be a real directory inside the workspace "
                "(not a symlink or a file)"
            ) from error
        shown = STATE_DIRECTORY
        raise CompactionError(f"could not open {shown}: {error.strerror or error}") from error


def _open_real_subdirectory(parent: int, name: str, shown_as: str) -> int:
    """Open (creating if needed) a directory entry that must be a real directory."""
    try:
        os.mkdir(name, 0o700, dir_fd=parent)
    except FileExistsError:
        pass
    except OSError as error:
        raise CompactionError(f"could not create {shown_as}: {error.strerror or error}") from error
    try:
        return os.open(name, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ArtifactPathError(
                f"{shown_as} must be a real directory inside the workspace "
                "(not a symlink or a file)"
            ) from error
        raise CompactionError(f"could not open {shown_as}: {error.strerror or error}") from error


def _sync_directory(directory: int) -> None:
    """Make the new directory entries durable too."""
    try:
        os.fsync(directory)
    except OSError as error:
        shown = ARTIFACTS_RELATIVE_PATH
        raise CompactionError(f"could not sync {shown}: {error.strerror or error}") from error


def _size(data: ArtifactContent) -> int:
    return len(data) if isinstance(data, bytes) else data.total_bytes


def _write_durably(directory: int, name: str, data: ArtifactContent) -> None:
    descriptor = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=directory)
    with os.fdopen(descriptor, "wb") as file:
        for chunk in [data] if isinstance(data, bytes) else data.chunks():
            file.write(chunk)  # a spooled output goes over a chunk at a time
        file.flush()
        os.fsync(file.fileno())


def _link_exclusively(directory: int, source: str, name: str, shown_as: str) -> None:
    # A hard link publishes the complete file under its name and fails if the name
    # exists: an atomic rename that never replaces anything.
    try:
        os.link(source, name, src_dir_fd=directory, dst_dir_fd=directory)
    except FileExistsError as error:
        raise ArtifactConflictError(
            f"{shown_as} already exists; artifacts are never overwritten"
        ) from error


def tool_result_file_name(artifact_id: str) -> str:
    return f"tool-result-{artifact_id}.txt"


def transcript_file_name(artifact_id: str) -> str:
    return f"transcript-{artifact_id}.jsonl"
