"""Chapter 3: which bash commands an allow rule may cover (`core.plain_commands`), each rule
on both sides of its line, in-process so `make mutate` can judge them."""

from __future__ import annotations

import pytest

from agent_tutorial.core.plain_commands import (
    _HARMLESS_GIT_OPTIONS,
    COMMAND_RUNNERS,
    command_words,
    file_writing_option,
    git_global_option,
    has_unquoted_expansion,
    is_output_option,
    why_not_plain,
)

PLAIN = [
    "git status",
    "git status --short",
    "git log",
    "git log -1 --format=%h",
    "git log --oneline -5 -- src/app.py",
    "git diff --stat HEAD~1",
    "git diff --output-indicator-new=+",
    "git --no-pager log -p",
    "git -P diff",
    "/usr/bin/git log",
    "git log -S foo",
    "git log -O order.txt",
    "git log --format='%h %s'",
    'git log --format="%h %s"',
    "ls -o",
    "grep -o foo README.md",
    "make test",
]


@pytest.mark.parametrize("command", PLAIN)
def test_a_plain_command_may_be_covered(command: str) -> None:
    assert why_not_plain(command) is None


@pytest.mark.parametrize(
    "command",
    [
        "git log -1 --format=x --output=Makefile",
        "git log -1 --output Makefile",
        "git log --outp=Makefile",
        "git log --out=Makefile",
        "git log --o=Makefile",
        "git log --output-directory=out",
        "git diff --output=../x HEAD",
        "git diff-tree -p --output=x HEAD",
        "git format-patch -o out -1",
        "git format-patch -oout -1",
        "git format-patch -ko out -1",
        "git archive -o x.tar HEAD",
        'git log "--output=Makefile"',
        "git log '--output=Makefile'",
        "git log --out''put=Makefile",
        "git log --out\\put=Makefile",
        "sort --output=x data",
        "git log --grep -- --output=Makefile",
        "git log -- '--output=x'",  # a path, but the safe mistake is cheap here
    ],
)
def test_an_option_that_writes_a_file_is_not_plain(command: str) -> None:
    reason = why_not_plain(command)
    assert reason is not None and "could make it write a file" in reason


@pytest.mark.parametrize(
    "command",
    [
        "git -c core.pager=sh log",
        "git -c core.fsmonitor=./x status",
        "git -C ../other log",
        "git --exec-path=. log",
        "git --git-dir=elsewhere log",
        "git --work-tree=/ status",
        "git --config-env=core.pager=X log",
        "git --bare log",
        "git --no-pager -c a=b log",
    ],
)
def test_a_git_option_before_the_subcommand_that_changes_what_it_obeys_is_not_plain(
    command: str,
) -> None:
    assert why_not_plain(command) is not None


@pytest.mark.parametrize(
    "command",
    [
        "git status; rm -rf ~",
        "git status && rm x",
        "git status || rm x",
        "git log | sh",
        "git log & rm x",
        "git log > x",
        "git log < x",
        "git log $(rm x)",
        "git log `rm x`",
        "git status\nrm x",
        "git status\rrm x",
        "git log --format='%h|%s'",  # quoted text is not parsed out: the safe mistake
    ],
)
def test_a_chained_command_is_not_plain(command: str) -> None:
    assert why_not_plain(command) == "it chains, pipes, redirects or substitutes another command"


@pytest.mark.parametrize(
    "command",
    [
        "git log ${X:---output=Makefile}",
        "git log $OPTS",
        'git log "$OPTS"',
        "git log *",
        "git log --outp?t=Makefile",
        "git log --[o]utput=Makefile",
        "git log --{out,}put=Makefile",
    ],
)
def test_a_command_the_shell_would_expand_is_not_plain(command: str) -> None:
    assert why_not_plain(command) == "the shell would expand part of it ($, a glob or braces)"


def test_a_command_with_an_unclosed_quote_is_not_plain() -> None:
    assert why_not_plain("git log 'oops") == "it cannot be split into words as the shell would"
    assert why_not_plain("") == "it cannot be split into words as the shell would"


def test_a_command_that_sets_its_environment_is_not_plain() -> None:
    assert why_not_plain("GIT_DIR=elsewhere git log") == (
        "it sets the environment first ('GIT_DIR=elsewhere')"
    )
    assert why_not_plain("git log --author=x=y") is None


@pytest.mark.parametrize(
    "command",
    [
        # git's -c, handed over in the environment: an unanchored rule `git status` matches.
        "env GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=touch pwned'\" git status",
        "nice git -c core.fsmonitor=x status",
        "timeout 5 git -c diff.external=x diff",
        "bash -c 'git -c core.fsmonitor=x status'",
        "/usr/bin/env git status",
    ],
)
def test_a_command_run_through_another_program_is_not_plain(command: str) -> None:
    runner = command.split()[0]
    assert why_not_plain(command) == f"it runs another command through {runner!r}"


@pytest.mark.parametrize("runner", sorted(COMMAND_RUNNERS))
def test_every_command_runner_is_named(runner: str) -> None:
    assert why_not_plain(f"{runner} git status") == f"it runs another command through {runner!r}"
    assert why_not_plain(f"git status {runner}") is None  # a word after the command is data


@pytest.mark.parametrize(
    ("command", "expanded"),
    [
        ("'$HOME'", False),
        ('"$HOME"', True),
        ("\\$HOME", False),
        ('"\\$HOME"', False),
        ("'*'", False),
        ('"*"', False),
        ("*", True),
        ("a?", True),
        ("[a]", True),
        ("{a,b}", True),
        ("'it''s'", False),
        ('"a"*', True),
        ("'a'$b", True),
        ("plain words", False),
        ("\\a$b", True),  # the backslash keeps only the next character
        ("\\**", True),
        ('"\\\\$HOME"', True),  # an escaped backslash, then `$`
        ('"a\\"$b"', True),  # an escaped quote does not end the string
        ("'a\\'$b", True),  # no escapes in single quotes: it ended before `$`
        ("X$b", True),
        ("'open $b", True),
        ('"open', False),
        ("end\\", False),
        ("a\n*", True),
    ],
)
def test_expansion_is_seen_only_outside_the_quotes_that_stop_it(
    command: str, expanded: bool
) -> None:
    assert has_unquoted_expansion(command) is expanded


@pytest.mark.parametrize(
    ("word", "writes"),
    [
        ("--output", True),
        ("--output=x", True),
        ("--output-directory=x", True),
        ("--output-file", True),
        ("--outp=x", True),
        ("--o", True),
        ("--", False),
        ("-o", False),  # short options are git's business (below)
        ("--oneline", False),
        ("--outputs", True),
        ("--output-indicator-new=+", False),
        ("--output-indicator-old", False),
        ("--out-of-date", False),
        ("output=x", False),
    ],
)
def test_an_output_option_is_known_in_every_spelling(word: str, writes: bool) -> None:
    assert is_output_option(word) is writes


@pytest.mark.parametrize(
    ("words", "found"),
    [
        (("git", "log", "-o", "x"), "-o"),
        (("git", "log", "-ox"), "-ox"),
        (("git", "log", "-ko"), "-ko"),
        (("git", "log", "-So"), None),
        (("git", "log", "-O", "x"), None),
        (("git", "log", "-l5o"), None),
        (("git", "log", "--", "-o"), "-o"),
        (("git", "log", "--grep", "--", "--output=x"), "--output=x"),
        (("ls", "-o"), None),
        (("ls", "--output=x"), "--output=x"),
        (("/usr/bin/git", "log", "-o"), "-o"),
        (("legit", "log", "-o"), None),
        (("git",), None),
    ],
)
def test_file_writing_options_are_found_anywhere_in_the_command(
    words: tuple[str, ...], found: str | None
) -> None:
    assert file_writing_option(words) == found


@pytest.mark.parametrize(
    ("words", "found"),
    [
        (("git", "-c", "a=b", "log"), "-c"),
        (("git", "--no-pager", "-C", "x", "log"), "-C"),
        (("git", "--no-pager", "log", "-C"), None),  # after the subcommand: find copies
        (("git", "log", "-c"), None),
        (("git", "--no-optional-locks", "status"), None),
        (("gitx", "-c", "a=b", "log"), None),
        (("git",), None),
        ((), None),
    ],
)
def test_git_options_before_the_subcommand_are_checked_against_the_harmless_ones(
    words: tuple[str, ...], found: str | None
) -> None:
    assert git_global_option(words) == found


def test_command_words_are_what_the_shell_passes() -> None:
    assert command_words("git log '--out''put=x' a\\ b") == ("git", "log", "--output=x", "a b")
    assert command_words('git log "unclosed') is None


@pytest.mark.parametrize("option", sorted(_HARMLESS_GIT_OPTIONS))
def test_each_harmless_git_option_keeps_a_git_command_plain(option: str) -> None:
    assert why_not_plain(f"git {option} log -3") is None
    assert why_not_plain(f"git {option} -c a=b log") is not None
