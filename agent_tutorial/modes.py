"""The modes a user can see and change while working: the permission mode, which Shift-Tab
cycles in the REPL and which applies from the next tool call, and the sandbox's, shown
beside it. The policy deciding each call reads its mode every time, so changing it there
is all a new mode needs; the REPL also keeps it for the agents `/clear` and `/resume` build.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from pydantic import ValidationError
from rich.table import Table
from rich.text import Text

from agent_tutorial.config import STATE_DIR, user_config_path
from agent_tutorial.core.hooks import HookGuard
from agent_tutorial.core.loop import AgentRunner
from agent_tutorial.core.permissions import PermissionMode, PermissionPolicy, PermissionRule
from agent_tutorial.core.sandbox import SandboxPolicy
from agent_tutorial.core.text import printable

PERMISSION_MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
"""`ask → accept-edits → auto → ask`, the order Shift-Tab goes round."""

MODE_STYLES = {"ask": "", "accept-edits": "fg:ansiyellow", "auto": "fg:ansired bold"}
"""The toolbar's colour for each: the more runs unasked, the louder."""


def next_permission_mode(mode: PermissionMode) -> PermissionMode:
    return PERMISSION_MODES[(PERMISSION_MODES.index(mode) + 1) % len(PERMISSION_MODES)]


def permission_policy(runner: AgentRunner) -> PermissionPolicy | None:
    """The policy that decides the runner's tool calls (chapter 3 on), alone among its
    guards or inside chapter 4's hook guard; None before chapter 3."""
    for guard in runner.guards:
        if isinstance(guard, PermissionPolicy):
            return guard
        if isinstance(guard, HookGuard) and guard.policy is not None:
            return guard.policy
    return None


def sandbox_row(sandbox: SandboxPolicy | None) -> str:
    """`/context`'s row: `workspace-write, network off`, or that bash runs unconfined."""
    if sandbox is None or not sandbox.confined:
        return "off: bash runs unconfined"
    return sandbox.describe()


def sandbox_text(sandbox: SandboxPolicy | None) -> str:
    """`sandbox workspace-write`, `sandbox read-only +net` or `sandbox off`."""
    if sandbox is None or not sandbox.confined:
        return "sandbox off"
    return f"sandbox {sandbox.mode}{' +net' if sandbox.network else ''}"


def rule_sources(rules: Sequence[PermissionRule]) -> list[str]:
    """Where each rule came from: the user's config file or the project's. The two files'
    rules are added up, the user's first; a rule the user's file holds is taken as its."""
    user_file = user_config_path()
    user_rules = _rules_in(user_file)
    project_file = f"{STATE_DIR}/config.toml"
    shown_user_file = _home_relative(user_file)
    return [shown_user_file if rule in user_rules else project_file for rule in rules]


def _rules_in(path: Path) -> list[PermissionRule]:
    """The rules a config file holds; none if it cannot be read (loading said why)."""
    try:
        with path.open("rb") as file:
            values = tomllib.load(file)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    table = values.get("permissions")
    rules = table.get("rules") if isinstance(table, dict) else None
    try:
        return [PermissionRule.model_validate(rule) for rule in rules or ()]
    except ValidationError:
        return []


def _home_relative(path: Path) -> str:
    home = Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def permissions_table(policy: PermissionPolicy, width: int) -> Table:
    """The mode, then each rule (strictest first, as they apply: deny, ask, allow) with
    the file it came from."""
    table = Table(title="permissions", box=None, show_header=False, title_justify="left")
    table.add_column(style="bold", max_width=max(12, width // 3))
    table.add_column()
    table.add_row("mode", f"{policy.mode} (Shift-Tab changes it)")
    sources = rule_sources(policy.rules)
    ranked = sorted(
        zip(policy.rules, sources, strict=True), key=lambda pair: _RANK[pair[0].behavior]
    )
    if not ranked:
        table.add_row("rules", "none")
    for rule, source in ranked:
        pattern = "any" if rule.pattern is None else printable(repr(rule.pattern))
        table.add_row(rule.behavior, Text(f"{printable(rule.tool)} {pattern}  from {source}"))
    return table


_RANK = {"deny": 0, "ask": 1, "allow": 2}
