"""Browsing what chapter 8 saved: list, find, read and prune the files in
`.agent_tutorial/artifacts/` (persisted tool results and transcripts).

Only regular files whose names match the artifact patterns are ever touched; symlinks and
anything outside the real artifacts directory are ignored.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent_tutorial.core.errors import EXIT_USAGE, AgentTutorialError

ARTIFACT_NAME = re.compile(
    r"^(?P<kind>tool-result|transcript)-(?P<id>[a-z0-9]+(?:-[a-z0-9]+)*)\.(?:txt|jsonl)$"
)
DURATION = re.compile(r"^(?P<amount>\d+)(?P<unit>[smhdw])$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class ArtifactLookupError(AgentTutorialError):
    """No artifact (or more than one) matches what the user asked for (exit code 2)."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True, slots=True)
class ArtifactInfo:
    kind: Literal["tool-result", "transcript"]
    id: str
    path: Path
    relative_path: str
    size: int
    modified: float


def artifacts_dir(project_root: Path) -> Path:
    return project_root / ".agent_tutorial" / "artifacts"


def list_artifacts(project_root: Path) -> list[ArtifactInfo]:
    """Every artifact, newest first (ties by name)."""
    directory = artifacts_dir(project_root)
    # Both levels must be real directories, as ArtifactStore requires when it writes:
    # through a symlinked `.agent_tutorial`, prune would delete files outside the project.
    if any(path.is_symlink() or not path.is_dir() for path in (directory.parent, directory)):
        return []
    found = [info for entry in directory.iterdir() if (info := _describe(project_root, entry))]
    return sorted(found, key=lambda info: (-info.modified, info.path.name))


def _describe(project_root: Path, entry: Path) -> ArtifactInfo | None:
    match = ARTIFACT_NAME.match(entry.name)
    if match is None or entry.is_symlink() or not entry.is_file():
        return None
    stat = entry.stat()
    kind: Literal["tool-result", "transcript"] = (
        "transcript" if match["kind"] == "transcript" else "tool-result"
    )
    return ArtifactInfo(
        kind=kind,
        id=match["id"],
        path=entry,
        relative_path=entry.relative_to(project_root).as_posix(),
        size=stat.st_size,
        modified=stat.st_mtime,
    )


def find_artifact(project_root: Path, reference: str) -> ArtifactInfo:
    """By id, unique id prefix, file name or the path shown in a preview."""
    artifacts = list_artifacts(project_root)
    name = Path(reference).name
    exact = [info for info in artifacts if reference == info.id or name == info.path.name]
    if exact:
        return exact[0]
    matches = [info for info in artifacts if info.id.startswith(reference)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ArtifactLookupError(f"no artifact matches {reference!r}; see `artifacts list`")
    raise ArtifactLookupError(
        f"{reference!r} matches {len(matches)} artifacts; give more of the id"
    )


def parse_age(text: str) -> float:
    """`7d` → seconds. Units: s, m, h, d, w."""
    match = DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"age must look like 30m, 12h, 7d or 2w, got {text!r}")
    return int(match["amount"]) * UNIT_SECONDS[match["unit"]]


def artifacts_older_than(
    project_root: Path, age_seconds: float, now: float | None = None
) -> list[ArtifactInfo]:
    cutoff = (time.time() if now is None else now) - age_seconds
    return [info for info in list_artifacts(project_root) if info.modified < cutoff]


def delete_artifacts(artifacts: list[ArtifactInfo]) -> int:
    """Delete the given artifact files; returns how many bytes were freed."""
    freed = 0
    for info in artifacts:
        info.path.unlink(missing_ok=True)
        freed += info.size
    return freed
