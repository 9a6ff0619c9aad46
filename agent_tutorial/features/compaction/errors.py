"""The compaction error family, which every layer raises.

ProcessorError (the loop turns it into paired tool errors)
 └─ CompactionError         compaction could not do its work
     ├─ ArtifactPathError   an unsafe artifact id or directory
     └─ ArtifactConflictError   the artifact already exists
"""

from __future__ import annotations

from agent_tutorial.core.loop import ProcessorError


class CompactionError(ProcessorError):
    """Compaction could not do its work; nothing it had started to write is left behind."""


class ArtifactPathError(CompactionError):
    """An artifact id or directory is unsafe: a bad id, or a symlink, file or escape."""


class ArtifactConflictError(CompactionError):
    """An artifact with that name already exists; artifacts are never overwritten."""
