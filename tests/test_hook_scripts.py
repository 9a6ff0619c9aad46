"""Chapter 4: hooks run only what was trusted (issue 27, item 2). The project files a hook
command names are hashed with the trusted settings, re-checked before each run, never
written by the file tools; hooks run in the project root, not where the agent started."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.filesystem import Workspace
from agent_tutorial.adapters.hook_runner import CommandHook, command_hooks_in
from agent_tutorial.adapters.hook_scripts import (
    MISSING,
    changed_scripts,
    file_digest,
    hook_program_folders,
    hook_script_paths,
    hook_snapshot,
    read_words,
    script_digests,
    scripts_of,
    trusted_script_settings,
)
from agent_tutorial.adapters.sandbox import sandbox_available
from agent_tutorial.config import read_project_settings
from agent_tutorial.core.hooks import CommandHookConfig, HookError, HookInput, HooksConfig
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.paths import ProtectedPathError
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.builtin_tools import file_tools
from agent_tutorial.folder_trust import changed_since_trusted, record_trust
from tests.conftest import RunCli, write_state
from tests.contracts import tool_reply_for
from tests.loopback import LoopbackServer, text_stream, tool_stream

PYTHON = shlex.quote(sys.executable)
SANDBOX_MISSING = sandbox_available()
GUARD = "hooks/guard.py"
ALLOWING_GUARD = "import sys\nsys.stdin.read()\n"
# What an attacker writes into the guard: it runs outside the sandbox, as the user.
EVIL_GUARD = "import pathlib\npathlib.Path('pwned').write_text('ran outside the sandbox')\n"


def guard_command() -> str:
    return f"{PYTHON} {GUARD}"


def write_guard(root: Path, source: str = ALLOWING_GUARD) -> Path:
    script = root / GUARD
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(source)
    return script


def hooks_toml(event: str = "PreToolUse", command: str | None = None) -> str:
    return f"[[hooks.{event}]]\ncommand = '{command or guard_command()}'\n"


def prompt_input(workspace: Path) -> HookInput:
    return HookInput(event="UserPromptSubmit", workspace=workspace, prompt="go")


# --- which files a command names -----------------------------------------------------


def test_a_word_naming_a_file_inside_the_project_is_a_script(workspace: Path) -> None:
    script = write_guard(workspace)
    (workspace / "data.json").write_text("{}")

    found = scripts_of(workspace, [f"{PYTHON} {GUARD} --config data.json"])

    assert found == (script.resolve(), (workspace / "data.json").resolve())


@pytest.mark.parametrize(
    "command",
    [
        "python3 hooks/missing.py",  # no such file
        "python3 hooks",  # a folder
        "python3 ../outside.py",  # outside the project
        "jq . >> hooks/log.txt",  # written by redirection
        "jq . 2>hooks/log.txt",
        "cat .agent_tutorial/hook.py",  # the state folder: out of reach already
        "hooks.guard x -m",  # -m names the module after it
        "cd hooks && python3 guard.py",  # not from the project root: a known limit
    ],
)
def test_a_word_that_is_no_script_inside_the_project_is_not_counted(
    workspace: Path, command: str
) -> None:
    write_guard(workspace)
    (workspace / "hooks" / "log.txt").write_text("")
    (workspace.parent / "outside.py").write_text("")
    write_state(workspace, "hook.py", "")

    assert scripts_of(workspace, [command]) == ()


@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'python3 hooks/guard.py'",
        'sh -c "exec python3 hooks/guard.py --strict"',
        "sh -c \"bash -c 'python3 hooks/guard.py'\"",
        "python3 -m hooks.guard",
        "-m hooks.guard",
        "sh -c 'python3 -m hooks.guard'",
    ],
)
def test_a_script_in_a_quoted_command_line_or_run_as_a_module_is_found(
    workspace: Path, command: str
) -> None:
    script = write_guard(workspace)

    assert scripts_of(workspace, [command]) == (script.resolve(),)


def test_a_package_run_as_a_module_names_its_main(workspace: Path) -> None:
    main = workspace / "hooks" / "__main__.py"
    main.parent.mkdir()
    main.write_text("")

    assert scripts_of(workspace, ["python3 -m hooks"]) == (main.resolve(),)


@pytest.mark.parametrize("name", ["hooks/guard.py", "hooks/my guard.py", "hooks/g+uard@2.py"])
def test_a_quoted_or_odd_name_is_read_as_bash_reads_it(workspace: Path, name: str) -> None:
    script = workspace / name
    script.parent.mkdir()
    script.write_text("")

    assert scripts_of(workspace, [f"python3 {shlex.quote(name)} x"]) == (script.resolve(),)
    assert scripts_of(workspace, [f'python3 "{name}"']) == (script.resolve(),)


def test_a_script_reached_through_a_symlink_or_an_absolute_path_is_its_real_file(
    workspace: Path,
) -> None:
    script = write_guard(workspace)
    (workspace / "link.py").symlink_to(script)

    found = scripts_of(workspace, [f"python3 link.py {script} ./hooks/../hooks/guard.py"])

    assert found == (script.resolve(),)


def test_a_script_named_from_home_or_with_odd_bytes_is_found_or_passed_over(
    workspace: Path,
) -> None:
    # The fixture's HOME is the project's parent folder.
    script = write_guard(workspace)
    (workspace / "loop").symlink_to(workspace / "loop")

    assert scripts_of(workspace, [f"python3 ~/{workspace.name}/{GUARD}"]) == (script.resolve(),)
    assert scripts_of(workspace, ["python3 hooks/gu\0ard.py loop"]) == ()


def test_a_symlink_out_of_the_project_is_not_a_script(workspace: Path) -> None:
    (workspace.parent / "elsewhere.py").write_text("")
    (workspace / "link.py").symlink_to(workspace.parent / "elsewhere.py")

    assert scripts_of(workspace, ["python3 link.py"]) == ()


def test_a_command_the_shell_cannot_split_still_names_its_scripts(workspace: Path) -> None:
    script = write_guard(workspace)

    assert scripts_of(workspace, [f"python3 {GUARD} 'unclosed"]) == (script.resolve(),)


def test_redirection_targets_are_left_out_of_the_words() -> None:
    assert read_words("a x.py >> log b 2>err c") == ["a", "x.py", ">>", "b", "2", ">", "c"]
    assert read_words("a < input.json") == ["a", "<", "input.json"]


def test_the_session_function_lists_every_hooks_scripts_once(workspace: Path) -> None:
    script = write_guard(workspace)
    (workspace / "hooks" / "stop.sh").write_text("")
    hooks = HooksConfig.model_validate(
        {
            "PreToolUse": [{"command": guard_command()}],
            "Stop": [{"command": "sh hooks/stop.sh"}, {"command": f"python3 {GUARD}"}],
        }
    )

    paths = hook_script_paths(workspace, hooks)

    assert paths == (script.resolve(), (workspace / "hooks" / "stop.sh").resolve())
    assert hook_script_paths(workspace, HooksConfig()) == ()


def test_a_digest_is_of_the_bytes_and_missing_for_no_regular_file(workspace: Path) -> None:
    script = write_guard(workspace, "a")
    first = file_digest(script)
    script.write_text("b")

    assert first != file_digest(script)
    assert file_digest(workspace / "nothing") == MISSING
    assert file_digest(workspace) == MISSING
    os.mkfifo(workspace / "fifo")  # a script swapped for a pipe must not hang the check
    assert file_digest(workspace / "fifo") == MISSING
    assert script_digests(workspace, [script.resolve()]) == {GUARD: file_digest(script)}


def test_a_changed_gone_or_new_script_is_a_change_and_an_untouched_one_is_not(
    workspace: Path,
) -> None:
    script = write_guard(workspace)
    command = f"python3 {GUARD} hooks/later.py"
    trusted = script_digests(workspace, scripts_of(workspace, [command]))

    assert changed_scripts(workspace, command, trusted) == []
    (workspace / "hooks" / "later.py").write_text("")
    assert changed_scripts(workspace, command, trusted) == ["hooks/later.py"]
    (workspace / "hooks" / "later.py").unlink()
    script.write_text("changed")
    assert changed_scripts(workspace, command, trusted) == [GUARD]
    script.unlink()
    assert changed_scripts(workspace, command, trusted) == [GUARD]


def test_trust_sees_the_scripts_of_hooks_as_read_from_the_files(workspace: Path) -> None:
    script = write_guard(workspace)
    raw = {"PreToolUse": [{"command": f"python3 {GUARD}"}, {"no": "command"}], "Stop": "odd"}

    settings = trusted_script_settings(workspace, [raw, "not a table"])

    assert settings == {f"hook script {GUARD}": file_digest(script)}


# --- folder trust covers the scripts --------------------------------------------------


def test_the_trust_digest_changes_with_a_hook_script(workspace: Path) -> None:
    script = write_guard(workspace)
    write_state(workspace, "config.toml", hooks_toml())
    before = read_project_settings(workspace)

    script.write_text(EVIL_GUARD)
    after = read_project_settings(workspace)

    assert f"hook script {GUARD}" in before.powerful
    assert before.digest != after.digest
    assert read_project_settings(workspace).digest == after.digest


def test_a_script_of_hooks_in_the_project_env_is_covered_too(workspace: Path) -> None:
    write_guard(workspace)
    hooks = '{"PreToolUse": [{"command": "python3 hooks/guard.py"}]}'
    write_state(workspace, ".env", f"AGENT_TUTORIAL_HOOKS='{hooks}'\n")

    assert f"hook script {GUARD}" in read_project_settings(workspace).powerful


def test_a_changed_hook_script_untrusts_the_folder_and_the_line_names_it(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    script = write_guard(workspace, "open('hook-ran', 'a').write('x')\n")
    write_state(workspace, "config.toml", hooks_toml("UserPromptSubmit"))
    assert run_cli("trust").exit_code == 0
    loopback.queue(text_stream("one"), text_stream("two"))

    unchanged = run_cli("run", "-c", "4", "-p", "hi")
    script.write_text(EVIL_GUARD)
    changed = run_cli("run", "-c", "4", "-p", "hi")

    assert unchanged.exit_code == 0 and "not trusted" not in unchanged.stderr
    assert (workspace / "hook-ran").read_text() == "x"
    assert changed.exit_code == 0, changed.stderr
    assert f"project settings not trusted, ignored: hooks, hook script {GUARD} " in changed.stderr
    assert f"(changed since trusted: hook script {GUARD}; `agent-tutorial" in changed.stderr
    assert not (workspace / "pwned").exists()


def test_the_line_names_only_the_script_that_changed(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    write_guard(workspace)
    (workspace / "hooks" / "stop.py").write_text("")
    config = hooks_toml() + f"[[hooks.Stop]]\ncommand = '{PYTHON} hooks/stop.py'\n"
    write_state(workspace, "config.toml", config)
    assert run_cli("trust").exit_code == 0
    (workspace / "hooks" / "stop.py").write_text("print('changed')")
    loopback.queue(text_stream("done"))

    result = run_cli("run", "-c", "4", "-p", "hi")

    assert "(changed since trusted: hook script hooks/stop.py; `agent" in result.stderr


def test_a_folder_never_trusted_names_no_change(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    write_guard(workspace)
    write_state(workspace, "config.toml", hooks_toml())
    loopback.queue(text_stream("done"))

    result = run_cli("run", "-c", "4", "-p", "hi")

    assert f"ignored: hooks, hook script {GUARD} (`agent-tutorial trust` applies" in result.stderr


def test_a_script_whose_real_name_is_not_utf8_is_named_with_an_escape(
    run_cli: RunCli, workspace: Path
) -> None:
    # The command is UTF-8 (TOML is), but a link in it may lead to a name that is not.
    odd = Path(os.fsdecode(bytes(workspace) + b"/hooks/caf\xe9.py"))
    odd.parent.mkdir()
    odd.write_text("")
    (workspace / "hooks" / "guard.py").symlink_to(odd)
    write_state(workspace, "config.toml", hooks_toml())

    settings = read_project_settings(workspace)
    trusted = run_cli("trust")

    assert "hook script hooks/caf\\xe9.py" in settings.powerful
    assert settings.digest  # hashable: no lone surrogate reaches the JSON encoder
    assert trusted.exit_code == 0, trusted.stderr
    digest = settings.powerful["hook script hooks/caf\\xe9.py"]
    assert f"  hook script hooks/caf\\xe9.py: sha256 {digest[:12]}…\n" in trusted.stdout


# --- the runner re-checks before each run -----------------------------------------------


def test_a_hook_whose_script_changed_since_it_was_made_is_not_run(workspace: Path) -> None:
    script = write_guard(workspace, "open('ran', 'a').write('x')\n")
    hook = CommandHook(CommandHookConfig(command=guard_command()), workspace)

    hook(prompt_input(workspace))
    hook(prompt_input(workspace))
    script.write_text(EVIL_GUARD)

    with pytest.raises(HookError, match=rf"was not run: {GUARD} changed since the session"):
        hook(prompt_input(workspace))
    assert (workspace / "ran").read_text() == "xx"
    assert not (workspace / "pwned").exists()


def test_a_later_session_holds_hooks_to_the_first_sessions_snapshot(workspace: Path) -> None:
    # `/clear` builds the hooks again; they must not trust what a command wrote meanwhile.
    write_guard(workspace)
    hooks = HooksConfig.model_validate({"UserPromptSubmit": [{"command": guard_command()}]})
    snapshot = hook_snapshot(workspace, hooks)
    write_guard(workspace, EVIL_GUARD)

    hook = command_hooks_in(workspace, snapshot)(hooks.root["UserPromptSubmit"][0], workspace)

    with pytest.raises(HookError, match="was not run"):
        hook(prompt_input(workspace))
    assert not (workspace / "pwned").exists()


def test_a_hook_runs_in_the_project_root_not_the_start_folder(workspace: Path) -> None:
    start = workspace / "downloads" / "evil-1.0"
    write_guard(workspace, "import os\nopen('ran-in', 'w').write(os.getcwd())\n")
    write_guard(start, EVIL_GUARD)
    config = CommandHookConfig(command=guard_command())

    command_hooks_in(workspace)(config, start)(prompt_input(start))

    assert (workspace / "ran-in").read_text() == str(workspace.resolve())
    assert not (start / "pwned").exists() and not (workspace / "pwned").exists()


def test_a_hook_is_told_both_the_workspace_and_the_project_root(workspace: Path) -> None:
    start = workspace / "src"
    start.mkdir()
    source = (
        "import os\nopen('seen', 'w').write(os.environ['AGENT_TUTORIAL_WORKSPACE'] + '|' + "
        "os.environ['AGENT_TUTORIAL_PROJECT_ROOT'])\n"
    )
    write_guard(workspace, source)

    command_hooks_in(workspace)(CommandHookConfig(command=guard_command()), start)(
        prompt_input(start)
    )

    assert (workspace / "seen").read_text() == f"{start}|{workspace}"


# --- the file tools refuse the scripts --------------------------------------------------


def run_protected_tool(workspace: Path, name: str, **arguments: object) -> ToolResult:
    registry = ToolRegistry(file_tools(workspace, protected=scripts_of(workspace, [GUARD])))
    return registry.run(tool_call("call-1", name, orjson.dumps(arguments).decode()))


@pytest.mark.parametrize("spelling", [GUARD, "./hooks/guard.py", "link.py", "hard.py", "abs"])
def test_write_file_refuses_a_hook_script_by_any_name(workspace: Path, spelling: str) -> None:
    script = write_guard(workspace)
    (workspace / "link.py").symlink_to(script)
    os.link(script, workspace / "hard.py")
    files = Workspace(workspace, protected=scripts_of(workspace, [guard_command()]))
    given = str(script) if spelling == "abs" else spelling

    with (
        pytest.raises(ProtectedPathError, match="it is a hook script"),
        files.target(given, for_writing=True),
    ):
        pass
    with files.target(given) as target:  # reading stays allowed
        assert target.exists


def test_write_and_edit_tools_return_a_clear_error_and_leave_the_script(workspace: Path) -> None:
    script = write_guard(workspace)

    written = run_protected_tool(workspace, "write_file", path=GUARD, content=EVIL_GUARD)
    edited = run_protected_tool(
        workspace, "edit_file", path=GUARD, old_text="sys.stdin.read()", new_text="print(1)"
    )
    other = run_protected_tool(workspace, "write_file", path="src/other.py", content="ok")

    for result in (written, edited):
        assert result.is_error and "it is a hook script" in result.content, result.content
    assert not other.is_error
    assert script.read_text() == ALLOWING_GUARD


@pytest.mark.parametrize("path", ["hooks/json.py", "hooks/lib/helper.py", "link/json.py"])
def test_write_file_refuses_any_file_in_the_folder_of_a_hook_script(
    workspace: Path, path: str
) -> None:
    # `python3 hooks/guard.py` imports from hooks/ first: a json.py there runs in the hook.
    write_guard(workspace)
    (workspace / "link").symlink_to("hooks")
    (workspace / "hooks" / "lib").mkdir()

    result = run_protected_tool(workspace, "write_file", path=path, content=EVIL_GUARD)

    assert result.is_error
    assert result.content == (
        f"Error [protected_path]: tools may not write {path!r}: it lies in hooks/, which "
        "holds a hook that runs outside the sandbox; only the user changes it"
    )
    assert sorted(p.name for p in (workspace / "hooks").rglob("*")) == ["guard.py", "lib"]


def test_a_protected_folder_at_the_top_is_refused_whole(workspace: Path) -> None:
    # The git hooks folder core.hooksPath names (.githooks): every hook in it.
    (workspace / ".githooks").mkdir()
    files = Workspace(workspace, protected=[workspace / ".githooks"])

    with (
        pytest.raises(ProtectedPathError, match=r"it lies in \.githooks/"),
        files.target(".githooks/pre-commit", for_writing=True),
    ):
        pass
    with files.target(".githooks.txt", for_writing=True) as target:
        assert not target.exists


def test_a_hook_script_at_the_top_of_the_workspace_protects_no_folder(workspace: Path) -> None:
    (workspace / "guard.py").write_text(ALLOWING_GUARD)
    registry = ToolRegistry(file_tools(workspace, protected=scripts_of(workspace, ["guard.py"])))

    def write(path: str) -> ToolResult:
        arguments = orjson.dumps({"path": path, "content": "x"}).decode()
        return registry.run(tool_call("call-1", "write_file", arguments))

    assert "it is a hook script" in write("guard.py").content
    assert not write("beside.py").is_error


# --- the attacks, through the CLI ---------------------------------------------------------


@pytest.mark.skipif(SANDBOX_MISSING is not None, reason=f"no sandbox here: {SANDBOX_MISSING}")
@pytest.mark.parametrize(
    ("attack", "hook"),
    [
        (f"printf %s {shlex.quote(EVIL_GUARD)} > {GUARD}", "{guard}"),
        (
            f"mv hooks h_old && mkdir hooks && printf %s {shlex.quote(EVIL_GUARD)} > {GUARD}",
            "{guard}",
        ),
        ("rm -rf hooks && ln -s h_evil hooks", "{guard}"),
        (f"printf %s {shlex.quote(EVIL_GUARD)} > hooks/json.py", "{guard}"),  # before the stdlib's
        (f"printf %s {shlex.quote(EVIL_GUARD)} > {GUARD}", 'sh -c "{guard}"'),
    ],
    ids=["rewrite", "replace-folder", "replace-by-link", "plant-an-import", "named-in-sh-c"],
)
def test_a_sandboxed_command_cannot_rewrite_or_replace_the_guard(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, attack: str, hook: str
) -> None:
    # The attack from issue 27: a sandboxed command rewrites hooks/guard.py, and the next
    # hook would run it outside the sandbox, with the API key in its environment. The
    # folder holding the script is read-only to commands (moving it away is refused too),
    # also where the hook names it inside a quoted command line.
    write_guard(workspace)
    write_state(workspace, "config.toml", hooks_toml(command=hook.format(guard=guard_command())))
    loopback.queue(
        tool_stream(
            [("b1", "bash", {"command": attack}), ("b2", "bash", {"command": "echo next"})]
        ),
        text_stream("done"),
    )

    result = run_cli("run", "--trust-project", "-c", "4", "-y", "-p", "go")

    assert result.exit_code == 0, result.stderr
    assert (workspace / GUARD).read_text() == ALLOWING_GUARD
    refused = tool_reply_for(loopback, 1, "b1")
    assert "Read-only file system" in refused or "Device or resource busy" in refused
    assert "[sandbox] The command ran in the sandbox" in refused
    assert tool_reply_for(loopback, 1, "b2").startswith("next")  # the guard still runs
    assert not (workspace / "pwned").exists()


@pytest.mark.skipif(SANDBOX_MISSING is not None, reason=f"no sandbox here: {SANDBOX_MISSING}")
def test_a_guard_in_a_linked_folder_is_read_only_and_a_new_one_in_the_links_place_never_runs(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # hooks -> tools/hooks: the real folder is protected; the link itself cannot be (the
    # kernel mounts on no link), so a command can put a folder in its place, whose
    # guard.py is then a new script under the name the hook runs: not run.
    write_guard(workspace / "tools")
    (workspace / "hooks").symlink_to("tools/hooks")
    write_state(workspace, "config.toml", hooks_toml())
    rewrite = f"printf %s {shlex.quote(EVIL_GUARD)} > tools/{GUARD}"
    replace = f"rm hooks && mkdir hooks && printf %s {shlex.quote(EVIL_GUARD)} > {GUARD}"
    loopback.queue(
        tool_stream([("b1", "bash", {"command": rewrite}), ("b2", "bash", {"command": replace})]),
        tool_stream([("b3", "bash", {"command": "echo next"})]),
        text_stream("done"),
    )

    result = run_cli("run", "--trust-project", "-c", "4", "-y", "-p", "go")

    assert result.exit_code == 0, result.stderr
    assert "Read-only file system" in tool_reply_for(loopback, 1, "b1")
    assert tool_reply_for(loopback, 1, "b2").startswith("(no output)\n[exit code 0")
    refused = tool_reply_for(loopback, 2, "b3")
    assert refused.startswith("Error [hook_execution_error]")
    assert f"{GUARD} changed since the session started" in refused
    assert (workspace / "tools" / GUARD).read_text() == ALLOWING_GUARD
    assert not (workspace / "pwned").exists()


@pytest.mark.skipif(SANDBOX_MISSING is not None, reason=f"no sandbox here: {SANDBOX_MISSING}")
@pytest.mark.parametrize(
    ("command", "attack"),
    [
        # python3 found in an activated .venv/bin: the program replaced.
        (
            "python3",
            "rm .venv/bin/python3 && printf '#!/bin/sh\\ntouch pwned\\n' > .venv/bin/python3",
        ),
        # .venv/bin/python named: a .pth file, which Python runs as it starts.
        (".venv/bin/python", "echo 'import os; os.system(\"touch pwned\")' > .venv/lib/evil.pth"),
    ],
    ids=["found-on-the-path", "named-by-path"],
)
def test_a_hooks_program_from_the_workspace_is_out_of_reach_of_commands(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, command: str, attack: str
) -> None:
    write_guard(workspace)
    (workspace / ".venv" / "bin").mkdir(parents=True)
    (workspace / ".venv" / "lib").mkdir()
    for name in ("python", "python3"):
        (workspace / ".venv" / "bin" / name).symlink_to(sys.executable)
    write_state(workspace, "config.toml", hooks_toml(command=f"{command} {GUARD}"))
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": attack}),
                ("w1", "write_file", {"path": ".venv/lib/evil.pth", "content": "import os"}),
                ("b2", "bash", {"command": "echo next > next.txt && cat next.txt"}),
            ]
        ),
        text_stream("done"),
    )
    path = f"{workspace / '.venv' / 'bin'}:{os.environ['PATH']}"

    result = run_cli("run", "--trust-project", "-c", "4", "-y", "-p", "go", env={"PATH": path})

    assert result.exit_code == 0, result.stderr
    refused = tool_reply_for(loopback, 1, "b1")
    assert "Read-only file system" in refused or "Device or resource busy" in refused
    assert "it lies in .venv/, which holds a hook" in tool_reply_for(loopback, 1, "w1")
    assert tool_reply_for(loopback, 1, "b2").startswith("next\n")  # the hook ran, and allowed it
    assert not (workspace / "pwned").exists()


def test_a_hooks_program_folder_is_found_by_path_or_on_the_search_path(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace.parent)  # a path is read from the project root, not from here
    venv = workspace / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python3").symlink_to(sys.executable)
    (workspace / "tools").mkdir()
    (workspace / "tools" / "data.txt").write_text("")  # not a program: not executable
    write_guard(workspace)

    def folders(command: str, search_path: str = "/usr/bin") -> tuple[Path, ...]:
        hooks = HooksConfig.model_validate({"Stop": [{"command": command}]})
        return hook_program_folders(workspace, hooks, search_path)

    assert folders(f".venv/bin/python3 {GUARD}") == (workspace / ".venv",)
    assert folders(f"./.venv/bin/../bin/python3 {GUARD}") == (workspace / ".venv",)
    assert folders(f"python3 {GUARD}", f"{venv}:/usr/bin") == (workspace / ".venv",)
    assert folders(f"sh -c 'python3 {GUARD}'", f"{venv}:/usr/bin") == (workspace / ".venv",)
    assert folders(f"python3 {GUARD}") == ()  # found outside the project
    assert folders(f"{sys.executable} {GUARD} tools/data.txt") == ()
    (workspace / "python3").symlink_to(sys.executable)
    assert folders(f"python3 {GUARD}", f"{workspace}:/usr/bin") == ()  # in no folder below
    assert folders(f".venv/bin/python3\0 {GUARD}") == ()  # no program has that name


def test_a_program_one_folder_down_counts_and_one_in_the_state_folder_does_not(
    workspace: Path,
) -> None:
    for folder in ("tools", ".agent_tutorial", "real"):
        (workspace / folder).mkdir()
        (workspace / folder / "run").symlink_to(sys.executable)
    (workspace / "linked").symlink_to("real")

    def folders(command: str) -> tuple[Path, ...]:
        hooks = HooksConfig.model_validate({"Stop": [{"command": command}]})
        return hook_program_folders(workspace, hooks, "/usr/bin")

    assert folders("tools/run") == (workspace / "tools",)
    assert folders(".agent_tutorial/run") == ()  # read-only to commands already
    assert folders("linked/run") == (workspace / "linked",)  # protected where it leads
    assert folders("tools/run/x") == ()  # no folder: nothing runs from there


OLD_TEMPLATE_RULE = (
    '[[permissions.rules]]\ntool = "bash"\npattern = "^git (status|diff|log)"\nbehavior = "allow"\n'
)


@pytest.mark.parametrize("sandbox", ["workspace-write", "off"])
def test_the_chained_attack_gets_no_code_outside_in_ask_mode(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, sandbox: str
) -> None:
    # Issue 27's chain: the template's allow rule let `git log --output=hooks/guard.py`
    # write the guard in ask mode with no question, and the next hook ran it outside the
    # sandbox with the key. Now the rule does not cover it (asked, so denied without a
    # terminal); a plain git log is still allowed, and the unchanged guard runs before it.
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for command in (["init", "-q"], [*identity, "commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", *command], cwd=workspace, check=True)
    write_guard(workspace, "import sys\nsys.stdin.read()\nopen('guard-ran', 'a').write('x')\n")
    write_state(workspace, "config.toml", hooks_toml() + OLD_TEMPLATE_RULE)
    one_line = "__import__('pathlib').Path('pwned').write_text('ran outside the sandbox')"
    attack = f"git log -1 --format={shlex.quote('tformat:' + one_line)} --output={GUARD}"
    loopback.queue(
        tool_stream([("b1", "bash", {"command": attack})]),
        tool_stream([("b2", "bash", {"command": "git log -1 --format=%s"})]),
        text_stream("done"),
    )

    result = run_cli("run", "--trust-project", "-c", "4", "--sandbox", sandbox, "-p", "log?")

    assert result.exit_code == 0, result.stderr
    denied = tool_reply_for(loopback, 1, "b1")
    assert denied.startswith("Error [permission_denied]")
    assert f"its option '--output={GUARD}' could make it write a file" in denied
    assert tool_reply_for(loopback, 2, "b2").startswith("one\n[exit code 0")
    assert (workspace / "guard-ran").read_text() == "xx"  # before each call, no question
    assert "import sys" in (workspace / GUARD).read_text()
    assert not (workspace / "pwned").exists()


def test_a_guard_rewritten_outside_the_sandbox_is_not_run(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # With `--sandbox off` the command can rewrite it; the hook runner's check right before
    # each run is then what stops it.
    write_guard(workspace)
    write_state(workspace, "config.toml", hooks_toml())
    rewrite = f"printf %s {shlex.quote(EVIL_GUARD)} > {GUARD}"
    loopback.queue(
        tool_stream(
            [("b1", "bash", {"command": rewrite}), ("b2", "bash", {"command": "echo next"})]
        ),
        text_stream("done"),
    )

    result = run_cli("run", "--trust-project", "--sandbox", "off", "-c", "4", "-y", "-p", "go")

    assert result.exit_code == 0, result.stderr
    assert (workspace / GUARD).read_text() == EVIL_GUARD
    assert not (workspace / "pwned").exists()
    refused = tool_reply_for(loopback, 1, "b2")
    assert refused.startswith("Error [hook_execution_error]")
    assert f"{GUARD} changed since the session started" in refused
    assert "next" not in refused


def test_write_file_cannot_rewrite_the_guard_through_the_cli(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    write_guard(workspace)
    write_state(workspace, "config.toml", hooks_toml())
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": GUARD, "content": EVIL_GUARD})]),
        text_stream("done"),
    )

    result = run_cli("run", "--trust-project", "-c", "4", "-y", "-p", "go")

    assert result.exit_code == 0, result.stderr
    assert (workspace / GUARD).read_text() == ALLOWING_GUARD
    assert "it is a hook script" in tool_reply_for(loopback, 1, "w1")


def test_in_accept_edits_write_file_cannot_plant_a_module_the_guard_imports(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # The next hook would run `python3 hooks/guard.py`, which imports json from hooks/
    # before the standard library: an edit, run without a question in accept-edits.
    write_guard(workspace, "import json, sys\njson.loads(sys.stdin.read())\n")
    write_state(workspace, "config.toml", hooks_toml())
    loopback.queue(
        tool_stream(
            [
                ("w1", "write_file", {"path": "hooks/json.py", "content": EVIL_GUARD}),
                ("w2", "write_file", {"path": "notes.txt", "content": "kept\n"}),
            ]
        ),
        text_stream("done"),
    )

    result = run_cli(
        "run", "--trust-project", "-c", "4", "--permission-mode", "accept-edits", "-p", "go"
    )

    assert result.exit_code == 0, result.stderr
    assert "it lies in hooks/, which holds a hook" in tool_reply_for(loopback, 1, "w1")
    assert not (workspace / "hooks" / "json.py").exists()
    assert not (workspace / "pwned").exists()
    assert (workspace / "notes.txt").read_text() == "kept\n"  # the guard ran, and allowed it


def test_a_run_started_in_a_downloaded_folder_runs_the_projects_guard_not_its_own(
    run_cli: RunCli,
    loopback: LoopbackServer,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start = workspace / "downloads" / "evil-1.0"
    write_guard(workspace, "open('root-guard-ran', 'w').write('yes')\n")
    write_guard(start, EVIL_GUARD)
    write_state(workspace, "config.toml", hooks_toml("UserPromptSubmit"))
    monkeypatch.chdir(start)
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--trust-project", "-c", "4", "-p", "go")

    assert result.exit_code == 0, result.stderr
    assert (workspace / "root-guard-ran").read_text() == "yes"
    assert not (start / "pwned").exists() and not (workspace / "pwned").exists()


# --- which trusted setting changed --------------------------------------------------------


def test_a_change_is_named_against_what_was_trusted_one_by_one(workspace: Path) -> None:
    trusted = {"hooks": {"Stop": []}, "hook script a.py": "1", "hook script b.py": "2"}
    record_trust(workspace, "digest", trusted)

    now = {"hooks": {"Stop": []}, "hook script a.py": "1", "hook script c.py": "3"}

    assert changed_since_trusted(workspace, trusted) == []
    assert changed_since_trusted(workspace, now) == ["hook script c.py", "hook script b.py"]


def test_no_change_is_named_for_a_folder_trusted_without_its_settings_one_by_one(
    workspace: Path,
) -> None:
    record_trust(workspace, "digest")  # as a store written before the names were kept

    assert changed_since_trusted(workspace, {"hooks": {}}) == []
    assert changed_since_trusted(workspace.parent, {"hooks": {}}) == []
