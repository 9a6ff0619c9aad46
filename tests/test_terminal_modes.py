"""Issue 29, item 4: modes you can see and change. The REPL's toolbar shows the permission
mode and the sandbox's; Shift-Tab cycles `ask → accept-edits → auto → ask`, applying from
the next tool call; `/context` lists both; `/permissions` shows the rules and their files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agent_tutorial.core.permissions import PermissionRule
from agent_tutorial.modes import next_permission_mode, rule_sources, sandbox_text
from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
SHIFT_TAB = "\x1b[Z"


def toolbar(terminal: Terminal) -> str:
    return terminal.toolbar()


def wait_for_toolbar(terminal: Terminal, text: str) -> None:
    terminal.wait_for(lambda: text in toolbar(terminal).split(), f"{text!r} in the toolbar")


def test_shift_tab_goes_round_the_three_modes() -> None:
    assert next_permission_mode("ask") == "accept-edits"
    assert next_permission_mode("accept-edits") == "auto"
    assert next_permission_mode("auto") == "ask"


@pytest.mark.parametrize("columns", [80, 40])
def test_the_toolbar_shows_the_mode_and_shift_tab_cycles_it(
    make_terminal: MakeTerminal, columns: int
) -> None:
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()
    wait_for_toolbar(terminal, "ask")  # on the line right under the prompt

    seen: list[str] = []
    for _ in range(3):
        terminal.type(SHIFT_TAB)
        expected = {"ask": "accept-edits", "accept-edits": "auto", "auto": "ask"}[
            seen[-1] if seen else "ask"
        ]
        wait_for_toolbar(terminal, expected)
        seen.append(expected)

    assert seen == ["accept-edits", "auto", "ask"]
    assert len(toolbar(terminal)) <= columns
    assert terminal.cursor_line().strip() == "›"  # the key typed nothing into the prompt


def test_the_toolbar_shows_the_sandbox_mode_when_it_has_room(make_terminal: MakeTerminal) -> None:
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off", columns=80)
    terminal.wait_for_prompt()

    terminal.wait_for(lambda: "sandbox off" in toolbar(terminal), "the sandbox in the toolbar")


def write_call(path: str) -> list[tuple[str, str, dict[str, object] | str]]:
    return [("w1", "write_file", {"path": path, "content": "made\n"})]


def test_a_mode_chosen_with_shift_tab_applies_to_the_next_tool_call(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(write_call("notes.txt")), text_stream("written"))
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off")
    terminal.wait_for_prompt()

    terminal.type(SHIFT_TAB)
    wait_for_toolbar(terminal, "accept-edits")
    terminal.enter("write it")
    terminal.wait_for_text("written")

    assert (workspace / "notes.txt").read_text() == "made\n"
    assert "wants permission" not in terminal.text()


def test_without_shift_tab_the_same_call_asks(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(write_call("notes.txt")), text_stream("not written"))
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off")
    terminal.wait_for_prompt()

    terminal.enter("write it")
    terminal.wait_for_text("wants permission")
    terminal.type("n")
    terminal.enter("")
    terminal.wait_for_text("not written")

    assert not (workspace / "notes.txt").exists()


def test_a_mode_chosen_with_shift_tab_outlives_clear(make_terminal: MakeTerminal) -> None:
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off")
    terminal.wait_for_prompt()
    terminal.type(SHIFT_TAB + SHIFT_TAB)
    wait_for_toolbar(terminal, "auto")

    terminal.enter("/clear")
    terminal.wait_for_text("new session")
    terminal.wait_for_prompt()

    wait_for_toolbar(terminal, "auto")


@pytest.mark.parametrize("columns", [80, 40])
def test_context_lists_the_permission_mode_and_the_sandbox(
    make_terminal: MakeTerminal, columns: int
) -> None:
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()
    terminal.type(SHIFT_TAB)
    wait_for_toolbar(terminal, "accept-edits")

    terminal.enter("/context")
    terminal.wait_for_text("tokens so far")

    rows = [line.split() for line in terminal.lines()]
    [mode_row] = [row for row in rows if row[:1] == ["permission"]]
    [sandbox_row] = [row for row in rows if row[:1] == ["sandbox"]]
    assert mode_row[1:] in (
        ["mode", "accept-edits", "(Shift-Tab", "changes", "it)"],
        ["accept-edits", "(Shift-Tab"],
    )  # at 40 columns the label wraps
    assert sandbox_row[1:4] == ["off:", "bash", "runs"]


def test_permissions_shows_each_rule_with_the_file_it_came_from(
    make_terminal: MakeTerminal, workspace: Path
) -> None:
    user_config = workspace.parent / "home" / ".config" / "agent-tutorial" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(
        '[[permissions.rules]]\ntool = "bash"\npattern = "rm -rf"\nbehavior = "deny"\n'
    )
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / "config.toml").write_text(
        '[[permissions.rules]]\ntool = "write_file"\nbehavior = "ask"\n'
    )
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off")
    terminal.wait_for_prompt()

    terminal.enter("/permissions")
    terminal.wait_for_text("write_file")

    shown = terminal.flat_text()
    assert "mode ask (Shift-Tab changes it)" in shown
    assert "deny bash 'rm -rf' from ~/home/.config/agent-tutorial/config.toml" in shown
    assert "ask write_file any from .agent_tutorial/config.toml" in shown


def test_a_rule_the_user_file_does_not_hold_is_the_projects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    user_file = tmp_path / ".config" / "agent-tutorial" / "config.toml"
    user_file.parent.mkdir(parents=True)
    user_file.write_text('[[permissions.rules]]\ntool = "bash"\nbehavior = "deny"\n')
    mine = PermissionRule(tool="bash", behavior="deny")
    theirs = PermissionRule(tool="bash", behavior="ask")

    assert rule_sources([mine, theirs]) == [
        "~/.config/agent-tutorial/config.toml",
        ".agent_tutorial/config.toml",
    ]


def test_the_sandbox_text_names_the_mode_and_the_network(tmp_path: Path) -> None:
    from agent_tutorial.core.sandbox import SandboxPolicy

    def policy(mode: str, network: bool) -> SandboxPolicy:
        return SandboxPolicy(
            mode=mode,  # type: ignore[arg-type]
            network=network,
            workspace=tmp_path,
            private_tmp=tmp_path,
            home=tmp_path,
        )

    assert sandbox_text(None) == "sandbox off"
    assert sandbox_text(policy("off", False)) == "sandbox off"
    assert sandbox_text(policy("read-only", False)) == "sandbox read-only"
    assert sandbox_text(policy("workspace-write", True)) == "sandbox workspace-write +net"
