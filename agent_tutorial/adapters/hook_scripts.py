"""The project files a hook command runs, and what they hold (chapter 4).

A hook such as `python3 hooks/guard.py` runs outside the sandbox, as the user, so trusting
its command alone trusts whatever `hooks/guard.py` holds when it runs: a sandboxed command
or a file tool could rewrite it. So every word of a hook command that names an existing
regular file inside the project root (resolved from the root, where hooks run) is a *hook
script*: folder trust hashes it with the settings, the hook runner checks it is unchanged
right before each run, and the file tools refuse to write it.

Not counted: a file the command writes by redirection (`>> hooks.log`), and anything in
`.agent_tutorial/` (out of every command's and tool's reach already). A file that appears
later where the command names one counts as a change: `touch marker` as a hook fails once
`marker` exists (write it outside the project, or under `.agent_tutorial/`).

A word that is itself a command line is read too (`bash -c 'python3 hooks/guard.py'`), and
a module run with `-m` names its file (`python3 -m hooks.guard`: `hooks/guard.py`). What is
not seen: a script reached another way (`cd hooks && python3 guard.py`, `$VAR/guard.py`,
a file the script imports: the sandbox and the file tools keep the folder holding a script
out of reach, not what it imports from elsewhere). Name the script itself in the command,
from the project root, for it to be covered. A program a hook runs from the project
(`hook_program_folders`: a virtual environment's interpreter) is not hashed; its folder is
kept out of reach instead.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_tutorial.core.hooks import HooksConfig
from agent_tutorial.core.paths import STATE_DIR
from agent_tutorial.core.text import encodable

SCRIPT_SETTING = "hook script"
"""How a hook script is named among the powerful settings folder trust hashes and shows."""
MISSING = "missing"
"""The digest of a script that is gone (or no longer a regular file)."""


def hook_script_paths(project_root: Path, hooks: HooksConfig) -> tuple[Path, ...]:
    """The real paths of the hook scripts of a session's hooks: the files no tool or
    sandboxed command may write, since they run outside the sandbox. Each appears once, in
    the order the hooks name them; a script outside `project_root` is not included."""
    commands = [hook.command for entries in hooks.root.values() for hook in entries]
    return scripts_of(project_root, commands)


def hook_program_folders(
    project_root: Path, hooks: HooksConfig, search_path: str
) -> tuple[Path, ...]:
    """The folders in the project holding a program a hook runs from there, which the
    script hash does not cover: one named through a link out of the project
    (`.venv/bin/python`), or a bare name found on `search_path` in the project (`python3`
    in an activated `.venv/bin`). What such a program loads lies beside it (a virtual
    environment's `site-packages` and `.pth` files, which Python runs as it starts), so
    the topmost folder below the project root (`.venv`) is kept with the scripts: no file
    tool or sandboxed command may write it."""
    root = project_root.resolve()
    commands = [hook.command for entries in hooks.root.values() for hook in entries]
    found = (
        _program_folder(root, word, search_path)
        for command in commands
        for word in named_files(command)
    )
    return tuple(dict.fromkeys(folder for folder in found if folder is not None))


def _program_folder(root: Path, word: str, search_path: str) -> Path | None:
    """The topmost folder in `root` holding the program `word` runs, when it runs one
    from there that is not a hook script itself (see `hook_program_folders`)."""
    program = _program(root, word, search_path)
    if program is None or not os.access(program, os.X_OK):
        return None
    # As named, not resolved: `.venv/bin/python` leads out of the project, `.venv` stays.
    named = Path(os.path.normpath(program))
    if not named.is_relative_to(root) or len(named.relative_to(root).parts) < 2:
        return None
    topmost = root / named.relative_to(root).parts[0]
    # A link: what it leads to is protected (the link itself is a known limit).
    return None if topmost.name == STATE_DIR else topmost


def _program(root: Path, word: str, search_path: str) -> Path | None:
    """The path `word` runs a program from, as the hook's shell in `root` finds it: by
    path when it holds a `/` (not a hook script, which is hashed and protected already),
    else on `search_path`."""
    if "\0" in word:
        return None
    if "/" not in word:
        found = shutil.which(word, path=search_path)
        return None if found is None else root / found
    if _script(root, word) is not None:
        return None
    return root / Path(word).expanduser()


def hook_snapshot(project_root: Path, hooks: HooksConfig) -> dict[str, dict[str, str]]:
    """Each hook command with the digests of its scripts now: what the hook runner holds
    them to for the rest of the process."""
    commands = [hook.command for entries in hooks.root.values() for hook in entries]
    return {
        command: script_digests(project_root, scripts_of(project_root, [command]))
        for command in commands
    }


def scripts_of(project_root: Path, commands: Iterable[str]) -> tuple[Path, ...]:
    """The hook scripts the commands name (see the module's docstring)."""
    root = project_root.resolve()
    found = (_script(root, word) for command in commands for word in named_files(command))
    return tuple(dict.fromkeys(path for path in found if path is not None))


def named_files(command: str) -> Iterator[str]:
    """What may name a file in `command`: each of its words, the words of a word that is a
    command line itself (`bash -c 'python3 hooks/guard.py'`; each level is shorter, so this
    ends), and the files of a module run with `-m` (`hooks/guard.py` for `-m hooks.guard`)."""
    words = read_words(command)
    for index, word in enumerate(words):
        yield word
        if index > 0 and words[index - 1] == "-m":
            module = word.replace(".", "/")
            yield from (f"{module}.py", f"{module}/__main__.py")
        if any(character.isspace() for character in word):
            yield from named_files(word)


def read_words(command: str) -> list[str]:
    """The words of a hook command as bash splits them, less the files it writes by
    redirection (`>> hooks.log` changes with every run, and is no script); by spaces if it
    cannot be split (bash would then fail on it anyway, but a name in it still counts)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return command.split()
    redirected = {index + 1 for index, word in enumerate(words) if ">" in word}
    return [word for index, word in enumerate(words) if index not in redirected]


def _script(root: Path, word: str) -> Path | None:
    """The real path of the regular file `word` names from `root`, if it lies inside and
    outside the state folder (which no command or tool may write anyway, and where a hook
    may keep what it writes)."""
    if "\0" in word:  # no path holds one (and pathlib would raise ValueError)
        return None
    try:
        real = (root / Path(word).expanduser()).resolve()
        info = real.stat()  # a name that leads nowhere fails here
    except (OSError, RuntimeError):  # missing, unreadable, a loop of links
        return None
    if not stat.S_ISREG(info.st_mode) or not real.is_relative_to(root):
        return None
    if real.is_relative_to(root / STATE_DIR):
        return None
    return real


def script_digests(project_root: Path, scripts: Sequence[Path]) -> dict[str, str]:
    """Each script by its path relative to the project root (a byte that is not UTF-8 shown
    as `\\xe9`, so the name can be hashed, stored and shown), with the SHA-256 of what it
    holds now (`MISSING` when it is gone)."""
    root = project_root.resolve()
    return {encodable(path.relative_to(root).as_posix()): file_digest(path) for path in scripts}


def file_digest(path: Path) -> str:
    """The SHA-256 of a regular file's bytes, read from the descriptor whose type was
    checked; `MISSING` when there is no regular file there to read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return MISSING
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        return MISSING
    with os.fdopen(descriptor, "rb") as file:
        return hashlib.file_digest(file, hashlib.sha256).hexdigest()


def changed_scripts(project_root: Path, command: str, trusted: Mapping[str, str]) -> list[str]:
    """The scripts of `command` that differ from `trusted` (changed, gone, or new: a file
    that now exists where the command names one), by relative path."""
    now = script_digests(project_root, scripts_of(project_root, [command]))
    return sorted(name for name in {*now, *trusted} if now.get(name) != trusted.get(name))


def trusted_script_settings(project_root: Path, hooks_values: Iterable[Any]) -> dict[str, str]:
    """The hook scripts of a project's hook settings as read from its files (not yet
    validated), as `hook script NAME` → digest entries for folder trust to hash and show."""
    commands = [command for value in hooks_values for command in _raw_commands(value)]
    digests = script_digests(project_root, scripts_of(project_root, commands))
    return {f"{SCRIPT_SETTING} {name}": digest for name, digest in digests.items()}


def _raw_commands(hooks: Any) -> list[str]:
    """The `command` of every hook in a `[hooks]` table as read; other shapes have none
    (validation reports them once the folder is trusted)."""
    if not isinstance(hooks, Mapping):
        return []
    entries = [entry for value in hooks.values() if isinstance(value, list) for entry in value]
    return [
        entry["command"]
        for entry in entries
        if isinstance(entry, Mapping) and isinstance(entry.get("command"), str)
    ]
