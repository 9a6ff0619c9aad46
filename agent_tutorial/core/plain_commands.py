"""Chapter 3: which bash commands an allow rule may cover, because they do what they say.

An allow rule is a regex over the command line, and a regex sees text, not what the shell
and the program will do with it. `^git (status|diff|log)` matches `git status; rm -rf ~`,
`git log --output=Makefile` (git writes the log into any file), `git -c core.pager=sh log`
and `git log $(...)`. So an allow rule covers only a *plain* command: one command (nothing
chained, piped, redirected or substituted), its words as written (no variable, glob or
brace expansion that could turn into an option), no environment set in front of it, not
run through another program (`env`, `nice`, `bash -c`), and no option that makes it write a
file or, for git, obey other configuration. Anything else
falls back to the mode's question, which is the safe mistake: a user who meant it says yes.

Every rule here is a small pure function of the command text, so it can be tested (and
mutated) without a shell; none of them decides alone that a command is harmless.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# What lets one bash command line run more than the command at its start: separators,
# pipes, background `&`, redirections (`> .git/hooks/x`) and substitutions. Quoted text is
# not parsed out, so `git log --format='%h|%s'` also asks, which is the safe mistake.
SHELL_CHAINING = re.compile(r"[;&|<>`\n\r]|\$\(")

_EXPANDING = frozenset("$*?[{")
"""Characters that make bash rewrite a word outside single quotes: `$X`, `${X:---output=F}`,
globs (a file named `--output=F` matched by `*`) and braces (`--{out,}put=F`)."""
_SHELL_PIECES = re.compile(
    r"""\\.|'[^']*'|"(?P<double>(?:\\.|[^"\\])*)"|(?P<plain>[^\\'"]+)|.""", re.DOTALL
)
"""A command line as bash reads its quoting: an escaped character, a single-quoted string
(nothing expands), a double-quoted one (`$` expands), plain text, or a quote left open (the
command then cannot be split, and is not plain anyway)."""
_ESCAPED = re.compile(r"\\.", re.DOTALL)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
"""`GIT_DIR=elsewhere git log`: the command runs with an environment the rule never saw."""
COMMAND_RUNNERS = frozenset(
    {
        *("env", "command", "builtin", "exec", "eval", "time", "nice", "nohup", "timeout"),
        *("stdbuf", "ionice", "chrt", "taskset", "setsid", "flock", "watch", "xargs"),
        *("sudo", "doas", "su", "runuser", "sg", "chroot", "nsenter", "unshare", "fakeroot"),
        *("strace", "ltrace", "script", "unbuffer", "busybox", "systemd-run", "firejail"),
        *("sh", "bash", "dash", "zsh", "ksh", "fish"),
    }
)
"""Programs that run the command their arguments name. A pattern may match that command
(`git status` in `env GIT_CONFIG_PARAMETERS=… git status`, `nice git -c core.fsmonitor=…
status`, `bash -c 'git …'`), which then escapes every check below: the first word is what
they look at."""

_OUTPUT_OPTION = "--output"
_LONGEST_OUTPUT_OPTION = "--output-directory"
_HARMLESS_OUTPUT_PREFIX = "--output-indicator-"
"""`git diff --output-indicator-new=+` sets a character, not a file."""
_GIT_SHORT_OUTPUT = re.compile(r"-[abcdefhikmpqrstuvwxz]*o")
"""Git's `-o DIR` (format-patch, archive), alone or at the end of a bundle of flags that take
no value (`-ko`); `-Sfoo` (a value) or `-O<file>` (an order file it reads) is not."""
_HARMLESS_GIT_OPTIONS = frozenset(
    {
        "--no-pager",
        "-P",
        "--paginate",
        "-p",
        "--no-optional-locks",
        "--no-replace-objects",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
    }
)
"""Git's options before the subcommand that change neither where it works nor what
configuration it obeys; any other (`-c`, `-C`, `--exec-path`, `--git-dir`, `--work-tree`,
`--config-env`, `--bare`, ...) can make it run or write what the rule never saw."""


def why_not_plain(command: str) -> str | None:
    """Why an allow rule cannot cover `command` (None: it is plain, the rule may cover it)."""
    if SHELL_CHAINING.search(command):
        return "it chains, pipes, redirects or substitutes another command"
    if has_unquoted_expansion(command):
        return "the shell would expand part of it ($, a glob or braces)"
    words = command_words(command)
    if not words:
        return "it cannot be split into words as the shell would"
    if _ASSIGNMENT.match(words[0]):
        return f"it sets the environment first ({words[0]!r})"
    if words[0].rpartition("/")[2] in COMMAND_RUNNERS:
        return f"it runs another command through {words[0]!r}"
    option = git_global_option(words) or file_writing_option(words)
    if option is not None:
        return f"its option {option!r} could make it write a file or obey other settings"
    return None


def has_unquoted_expansion(command: str) -> bool:
    """Whether bash would expand something in `command`: `$` outside single quotes, or a
    glob or brace character outside any quotes. A backslash keeps the next character."""
    for piece in _SHELL_PIECES.finditer(command):
        double_quoted, unquoted = piece.group("double"), piece.group("plain")
        if double_quoted is not None and any("$" in part for part in _ESCAPED.split(double_quoted)):
            return True
        if unquoted is not None and not _EXPANDING.isdisjoint(unquoted):
            return True
    return False


def command_words(command: str) -> tuple[str, ...] | None:
    """The words bash would pass, quotes removed; None for text it cannot split (an
    unclosed quote). Only meaningful for a command with no expansion left in it."""
    try:
        return tuple(shlex.split(command))
    except ValueError:
        return None


def file_writing_option(words: Sequence[str]) -> str | None:
    """The first option that makes the command write a file it names: `--output=F`,
    `--output F`, `--output-directory`, an abbreviation git accepts (`--outp=F`), and for
    git the short `-o`. Words after `--` count too: an option that takes a value can eat
    the `--` (`git log --grep -- --output=F` greps for `--` and writes F)."""
    is_git = _is_git(words)
    for word in words[1:]:
        if is_output_option(word) or (is_git and _GIT_SHORT_OUTPUT.match(word)):
            return word
    return None


def is_output_option(word: str) -> bool:
    """`--output…` in any spelling a parser of long options accepts: the name itself, a
    longer name that starts with it, or a prefix of one (`--out`), with or without `=`."""
    name = word.partition("=")[0]
    if name.startswith(_HARMLESS_OUTPUT_PREFIX):
        return False
    if name.startswith(_OUTPUT_OPTION):
        return True
    return len(name) > len("--") and _LONGEST_OUTPUT_OPTION.startswith(name)


def git_global_option(words: Sequence[str]) -> str | None:
    """For a git command, the first option before its subcommand that is not known to be
    harmless (`git -c core.pager=sh log`, `git -C elsewhere status`)."""
    if not _is_git(words):
        return None
    for word in words[1:]:
        if not word.startswith("-"):
            return None
        if word not in _HARMLESS_GIT_OPTIONS:
            return word
    return None


def _is_git(words: Sequence[str]) -> bool:
    return bool(words) and words[0].rpartition("/")[2] == "git"
