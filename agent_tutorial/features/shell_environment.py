"""The environment bash gets: ours without the variables whose names look secret (Codex's
shell environment policy) or whose values are URLs with a password (`HTTPS_PROXY=
http://user:password@proxy`, a base URL with one), except those the user lets through by
name.

The agent's own API key is always among the hidden ones, whatever its variable is called,
so a command cannot print it into the conversation or the session log.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from agent_tutorial.features.redaction import looks_secret, url_password


def shell_environment(
    environ: Mapping[str, str], *, include: Collection[str] = (), hidden: Collection[str] = ()
) -> dict[str, str]:
    """`environ` without secret-looking variables, URLs with a password and those in
    `hidden`, unless named in `include` (exact, case-sensitive names)."""
    return {
        name: value
        for name, value in environ.items()
        if name in include or not (looks_secret(name) or name in hidden or url_password(value))
    }
