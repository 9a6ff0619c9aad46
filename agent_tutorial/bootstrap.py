"""The composition root: turns a chapter profile into a ready `AgentRunner`, the settings
into the model client it talks to (`connect_model`, built by `model_client`), into the
sandbox bash runs in (`open_sandbox`) and into the one `Redactor` of a session
(`secret_redactor`). `composition.open_session` calls these once per session.

Each capability contributes tools, prompt text, guards or processors; this is the one
place that asks `Capability.X in profile`. Nothing else knows which chapter it runs in:
the front ends (`cli.py`, `repl.py`) parse, call `open_session` and report.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from agent_tutorial.adapters.checkpoint_store import CheckpointStore
from agent_tutorial.adapters.filesystem import Workspace
from agent_tutorial.adapters.hook_runner import command_hooks_in
from agent_tutorial.adapters.hook_scripts import hook_program_folders, hook_script_paths
from agent_tutorial.adapters.sandbox import (
    SandboxUnavailableError,
    private_temporary_directory,
    sandbox_available,
    sandboxed,
)
from agent_tutorial.adapters.sandbox_git import git_hooks_folder
from agent_tutorial.adapters.text_tool_calls import SwitchReason, TextToolCalls
from agent_tutorial.config import ConfigError, Settings, user_config_path
from agent_tutorial.core.events import (
    ASKING_SOURCE,
    EventBus,
    Notice,
    PermissionDecided,
    UsageReported,
)
from agent_tutorial.core.hooks import HookError, HookGuard, HookInput, HookRegistry
from agent_tutorial.core.loop import AgentRunner, CallGuard, RequestGuidance, TurnGuard
from agent_tutorial.core.messages import ChatMessage, project_context_message, system_message
from agent_tutorial.core.model import ModelClient, ModelReply, ModelRequest, PromptTooLongError
from agent_tutorial.core.permissions import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    DecisionRecord,
    PermissionPolicy,
)
from agent_tutorial.core.sandbox import SandboxMode, SandboxPolicy
from agent_tutorial.core.text import encodable
from agent_tutorial.core.tools import ToolRegistry
from agent_tutorial.core.window import ContextWindow
from agent_tutorial.features.bash import BashSettings, bash_tool
from agent_tutorial.features.builtin_tools import file_tools, search_tools
from agent_tutorial.features.checkpoints import TurnCheckpoints, turn_checkpoints
from agent_tutorial.features.compact_framing import CompactFraming, compact_spec
from agent_tutorial.features.compaction import (
    CompactionManager,
    CompactionSummary,
    ContinueAfterSummary,
    HistorySummarizer,
    ModelHistorySummarizer,
)
from agent_tutorial.features.compaction.budget import TokenCalibration, WindowAccounting
from agent_tutorial.features.compaction.store import ARTIFACTS_RELATIVE_PATH
from agent_tutorial.features.context_window import (
    ContextMeter,
    MeteredModel,
    WindowFromOverflow,
    request_utf8_bytes,
)
from agent_tutorial.features.masked_replies import MaskedReplies
from agent_tutorial.features.project_instructions import (
    ProjectInstructions,
    read_project_instructions,
)
from agent_tutorial.features.redaction import Redactor, known_secrets
from agent_tutorial.features.sandbox_escalation import SandboxEscalation
from agent_tutorial.features.skills import SkillRegistry, load_skill_tool
from agent_tutorial.features.subagents import (
    SUBAGENT_MAX_TURNS,
    NestingSink,
    subagent_tools,
    task_tool,
)
from agent_tutorial.features.todos import (
    TodoItem,
    TodoReminder,
    TodoTracker,
    render_plan,
    todo_write_tool,
)
from agent_tutorial.mcp_config import unconfined_server_scripts
from agent_tutorial.mcp_session import McpSession
from agent_tutorial.model_client import open_model_client, session_window, with_server_window
from agent_tutorial.profiles import Capability, ChapterProfile
from agent_tutorial.project import Project

BASE_PROMPT = """\
You are agent-tutorial, a coding agent working in the user's project.
Use the tools to inspect the project before you answer; never guess file contents.
Keep answers short and concrete. When you are done, answer without calling a tool."""
PROJECT_PROMPT = (
    "The project is at {workspace}; the tools take paths relative to it. You have not seen "
    "its files. Never answer from memory: every answer about them must come from a tool "
    "result in this conversation."
)
"""The last line says the base prompt's rule again, right before the user's request: a
small model reads it there. Qwen2.5-Coder-1.5B answered "3" and "1000" at once with only
the base prompt's rule; with this line it called a tool first in each of the six real
tasks (`make test-real`)."""
ARTIFACTS_PROMPT = "Large tool results are saved under {artifacts}."

CHAPTER_GUIDANCE = {
    Capability.FILE_TOOLS: "Prefer read_file, glob and grep over shell commands for reading.",
    Capability.PERMISSIONS: "Some calls need the user's approval; if one is denied, say so "
    "and do not retry it unchanged.",
    Capability.TODOS: "For work with several steps, keep a plan with todo_write and update it "
    "as you go.",
    Capability.SUBAGENTS: "Delegate a self-contained investigation with task; the helper "
    "starts fresh, so give it everything it needs in the prompt.",
    Capability.COMPACTION: "Large tool results are saved to files and shown as previews; "
    "read the file with read_file if you need more of it.",
}
# A subagent has neither todo_write nor task, so it is not told to use them.
PARENT_ONLY_GUIDANCE = frozenset({Capability.TODOS, Capability.SUBAGENTS})
COMPACT_PROMPT = BASE_PROMPT
"""The system prompt of chapter 8 in a small window (`compact_framing`): the base prompt
alone; the project context already says where large results are saved."""


@dataclass
class Agent:
    """A runner plus the features a front end (CLI, REPL) needs to reach directly."""

    profile: ChapterProfile
    events: EventBus
    project: Project
    context_meter: ContextMeter = field(default_factory=ContextMeter)
    """The session's window, when known, and the bytes-per-token calibration (chapter 8)."""
    compaction: CompactionManager | None = None
    todos: TodoTracker | None = None
    skills: SkillRegistry | None = None
    instructions: ProjectInstructions | None = None
    """AGENTS.md (or CLAUDE.md) as read into the system prompt (chapter 7)."""
    reads_instructions: bool = False
    """Whether this chapter reads AGENTS.md at all (`instructions` is None without one)."""
    checkpoints: TurnCheckpoints | None = None
    """Records the files before a turn's first write-capable tool (chapters with one)."""
    runner: AgentRunner = field(init=False)
    """Set once, last, by `build_agent`: the runner is given every other part built."""

    @property
    def workspace(self) -> Path:
        """The tools' boundary: the folder the agent started in."""
        return self.project.workspace

    @property
    def project_root(self) -> Path:
        """Where `.agent_tutorial/` is: the workspace or a folder above it."""
        return self.project.root


@dataclass(frozen=True)
class ModelConnection:
    """The model client for a run, and the settings the rest of the run is built from."""

    settings: Settings
    """As given, plus the window the server named when the chapter needs one."""
    model: ModelClient
    window: ContextWindow
    """The session's one window holder, which the client's output cap reads."""


def compacts(profile: ChapterProfile) -> bool:
    """Whether a run of `profile` compacts its context (chapter 8): the front ends warn
    when chapter 8's flags are given to a chapter that would ignore them."""
    return Capability.COMPACTION in profile


def connect_model(
    settings: Settings,
    project: Project,
    profile: ChapterProfile,
    opened: ExitStack,
    *,
    redactor: Redactor,
) -> ModelConnection:
    """The model client for a run of `profile`: chapter 8 budgets against the window, so
    an unset one is asked of the server first, and the demo plays its long tour. The
    client's error text is masked by `redactor`, the one the tools' output is masked by."""
    compaction = compacts(profile)
    if compaction:
        settings = with_server_window(settings)
    window = session_window(settings)
    model = open_model_client(
        settings,
        project.workspace,
        redactor=redactor,
        window=window,
        long_demo=compaction,
        opened=opened,
    )
    return ModelConnection(settings, model, window)


@dataclass(frozen=True)
class SessionSandbox:
    """The sandbox bash runs in for a session, and what to tell the user about it."""

    policy: SandboxPolicy | None
    """None: bash runs unconfined (`off`, no bash in the chapter, or no sandbox here)."""
    notice: str | None = None
    """Said once at the start when the default sandbox cannot run here."""


def open_sandbox(
    settings: Settings, project: Project, profile: ChapterProfile, opened: ExitStack
) -> SessionSandbox:
    """The session's sandbox for bash: `workspace-write` unless the settings say otherwise,
    with its private temporary directory, removed when `opened` closes. The workspace is
    the project's tools' boundary; the state folder, the one at its root.

    Where the system has no sandbox, a confining mode asked for by name is a `ConfigError`
    (exit 2) and the default falls back to bash unconfined, with a notice: a sandbox that
    is not there is never claimed. A workspace the sandbox cannot confine (`/`) is a
    `ConfigError` either way: it is not the system's lack, and `--sandbox off` is one flag."""
    mode: SandboxMode = settings.sandbox or "workspace-write"
    if mode == "off" or Capability.BASH not in profile:
        return SessionSandbox(None)
    reason = sandbox_available()
    if reason is not None and settings.sandbox is None:
        return SessionSandbox(
            None, f"bash runs without a sandbox: it is not available here ({reason})"
        )
    if reason is not None:
        raise ConfigError(
            f"sandbox {mode!r} was asked for, but the sandbox is not available here: {reason}. "
            "To run bash without one, pass --sandbox off."
        )
    protected = _protected(profile, settings, project, confined=True)
    policy = _sandbox_policy(settings, mode, project, opened, protected=protected)
    _refuse_unusable_workspace(policy, project.workspace)
    return SessionSandbox(policy)


def _protected(
    profile: ChapterProfile, settings: Settings, project: Project, *, confined: bool
) -> tuple[Path, ...]:
    """What neither a file tool nor a sandboxed command may write, since it runs outside the
    sandbox: what the session's hooks run, the scripts of its MCP servers outside the
    sandbox (of all of them unless `confined`), and the git hooks folder `core.hooksPath`
    names (found once, at the session's start)."""
    found = (
        *_hook_scripts(profile, settings, project.root),
        *_server_scripts(profile, settings, project, confined=confined),
    )
    git_hooks = git_hooks_folder(project.workspace)
    return tuple(dict.fromkeys(found if git_hooks is None else (*found, git_hooks)))


def _hook_scripts(profile: ChapterProfile, settings: Settings, root: Path) -> tuple[Path, ...]:
    """The files the session's hooks run (chapter 4), and the folders of the programs they
    run from the workspace (a `.venv`'s python)."""
    if Capability.HOOKS not in profile:
        return ()
    search_path = os.environ.get("PATH", os.defpath)  # what the hooks' shell searches
    programs = hook_program_folders(root, settings.hooks, search_path)
    return (*hook_script_paths(root, settings.hooks), *programs)


def _server_scripts(
    profile: ChapterProfile, settings: Settings, project: Project, *, confined: bool
) -> tuple[Path, ...]:
    """The files the session's MCP servers outside the sandbox run (chapter 9)."""
    if Capability.MCP not in profile:
        return ()
    return unconfined_server_scripts(
        project.root, project.workspace, settings.mcp_servers, confined=confined
    )


def _sandbox_policy(
    settings: Settings,
    mode: SandboxMode,
    project: Project,
    opened: ExitStack,
    *,
    protected: tuple[Path, ...],
) -> SandboxPolicy:
    user_settings = user_config_path().parent.absolute()
    # Made now if missing, so that it is covered like any other: where the workspace holds
    # it (XDG_CONFIG_HOME inside, or the workspace is the home directory), a command could
    # otherwise create it and write a trust store that trusts anything.
    with suppress(OSError):  # what this process cannot make, a command as the same user cannot
        user_settings.mkdir(mode=0o700, parents=True, exist_ok=True)
    return SandboxPolicy(
        mode=mode,
        network=settings.sandbox_network,
        workspace=project.workspace,
        project_root=project.root,
        private_tmp=opened.enter_context(private_temporary_directory()),
        home=Path.home().absolute(),
        # The user's settings, wherever XDG_CONFIG_HOME puts them (under the home directory
        # they are hidden already).
        also_hidden=(user_settings,),
        protected=protected,
    )


def _refuse_unusable_workspace(policy: SandboxPolicy, workspace: Path) -> None:
    """Prepare one command without starting it, so that a workspace the sandbox cannot
    confine stops the run before the model is asked for anything."""
    try:
        with sandboxed(policy, ["true"], cwd=workspace):
            pass
    except SandboxUnavailableError as error:
        raise ConfigError(
            f"the sandbox cannot confine commands here: {error.reason}. To run bash without "
            "one, pass --sandbox off."
        ) from None


@dataclass(frozen=True)
class AgentDeps:
    """What an agent is built from: the session's parts, the same for every agent it
    builds (`/clear` and `/resume` build another), and this agent's events and history."""

    model: ModelClient
    project: Project
    """Where the agent works: the tools' boundary and the root whose `.agent_tutorial/`
    holds the `.env`, skills and artifacts (`project.find_project`)."""
    settings: Settings
    approver: Approver | None = None
    events: EventBus = field(default_factory=EventBus)
    history: Sequence[ChatMessage] = ()
    max_turns: int | None = None
    sandbox: SandboxPolicy | None = None
    """The sandbox bash runs in (`open_sandbox` builds it from the settings); None:
    unconfined."""
    redactor: Redactor | None = None
    """The session's one redactor (`secret_redactor`, with the secrets of the project's
    `.env` as read once); None: one from the settings and the environment alone."""
    window: ContextWindow | None = None
    """The session's one window holder, shared with the model client; None: one from the
    settings, of this agent alone."""
    hook_snapshot: Mapping[str, Mapping[str, str]] | None = None
    """The hook scripts' digests as the process found them (`hook_scripts.hook_snapshot`),
    which hooks must still match to run; None: as they are now."""
    mcp: McpSession = field(default_factory=McpSession)
    """The session's MCP servers and their tools (chapter 9)."""


@dataclass(frozen=True)
class _Parts:
    """What `build_agent` makes before the runner: the tools and what guards them."""

    tools: ToolRegistry
    redactor: Redactor
    hooks: HookRegistry | None
    guards: list[CallGuard]
    turn_guards: list[TurnGuard]
    checkpoints: TurnCheckpoints | None


def build_agent(profile: ChapterProfile, deps: AgentDeps) -> Agent:
    """Tools first, then the guards around them, then what each later chapter adds; the
    runner is built last, once every part it is given exists."""
    redactor = deps.redactor or secret_redactor(deps.settings, deps.project.root, {})
    # Outside the text-call reader: what the model writes is masked, a call's arguments not.
    masked = MaskedReplies(reading_text_calls(deps.model, deps.settings, deps.events), redactor)
    deps = replace(deps, model=masked, redactor=redactor)
    agent = Agent(
        profile=profile,
        events=deps.events,
        project=deps.project,
        context_meter=ContextMeter(deps.window or session_window(deps.settings)),
    )
    parts = _tools_and_guards(profile, deps)
    agent.checkpoints = parts.checkpoints
    guidance = _add_todos_and_task(agent, deps, parts.tools, parts.guards)
    _add_project_knowledge(agent, deps, parts.tools)
    system_prompt = _system_prompt(agent)
    project_context = _project_context(agent)  # with AGENTS.md and the skills: build once
    model = deps.model
    if Capability.COMPACTION in profile:
        framing = (system_prompt, project_context)
        model = _add_compaction(agent, deps, parts.tools, parts.hooks, framing)
        guidance.append(ContinueAfterSummary())
    agent.runner = AgentRunner(
        model,
        parts.tools,
        system_prompt=system_prompt,
        project_context=project_context,
        max_turns=deps.max_turns or deps.settings.max_turns,
        context=agent.compaction,
        redaction=parts.redactor,
        guards=parts.guards,
        guidance=guidance,
        turn_guards=parts.turn_guards,
        events=deps.events,
        history=deps.history,
    )
    return agent


def _tools_and_guards(profile: ChapterProfile, deps: AgentDeps) -> _Parts:
    """The core tools, chapter 4's hooks and the guards (chapter 3's policy, or the hooks
    around it), all masking with the session's redactor."""
    redactor = deps.redactor or secret_redactor(deps.settings, deps.project.root, {})
    tools = ToolRegistry(max_argument_bytes=deps.settings.max_tool_argument_bytes)
    _add_core_tools(profile, tools, deps, redactor)
    for tool in deps.mcp.tools:
        tools.register(tool)
    hooks = _hooks(profile, deps, redactor)
    guards, turn_guards = _guards(profile, deps, hooks)
    checkpoints = _checkpoints(tools, deps)
    guards += [checkpoints] if checkpoints else []  # last: only a call that will run
    return _Parts(tools, redactor, hooks, guards, turn_guards, checkpoints)


TEXT_CALLS_NOTICE = (
    "the model wrote its tool calls as text; running them as tool calls, and describing the "
    "tools in the prompt from now on (tool_calls = auto; native keeps such text as the answer)"
)
TOOL_LIST_ECHO_NOTICE = (
    "the model repeated its tool list instead of calling a tool; asking again with the tools "
    "described in the prompt, as from now on (tool_calls = auto; native keeps the reply)"
)
_SWITCH_NOTICES: dict[SwitchReason, str] = {
    "calls_in_text": TEXT_CALLS_NOTICE,
    "echoed_tool_list": TOOL_LIST_ECHO_NOTICE,
}


def reading_text_calls(model: ModelClient, settings: Settings, events: EventBus) -> ModelClient:
    """The model as this session's runner sees it: unless `tool_calls = "native"`, calls a
    model writes as text come back as real calls. In `auto`, the first time this happens
    (or the model repeats its tool list instead of calling), the session turns to
    describing the tools in the prompt, and says so once (stderr, and a stream-json
    notice)."""
    if settings.tool_calls == "native":
        return model
    return TextToolCalls(
        model,
        settings.tool_calls,
        on_switch=lambda reason: events.emit(Notice("info", _SWITCH_NOTICES[reason])),
    )


def _hooks(profile: ChapterProfile, deps: AgentDeps, redactor: Redactor) -> HookRegistry | None:
    """Chapter 4's configured hooks; what they print is redacted like a tool's result,
    since they run with the whole environment."""
    if Capability.HOOKS not in profile:
        return None
    config = deps.settings.hooks
    hooks = command_hooks_in(deps.project.root, deps.hook_snapshot)
    return HookRegistry.from_config(config, deps.project.workspace, hooks, redaction=redactor)


def _add_todos_and_task(
    agent: Agent, deps: AgentDeps, tools: ToolRegistry, guards: Sequence[CallGuard]
) -> list[RequestGuidance]:
    """Chapter 5's plan (a tool, and a reminder of the plan in each request) and chapter
    6's `task`, which builds a child runner when the model calls it."""
    guidance: list[RequestGuidance] = []
    if Capability.TODOS in agent.profile:
        agent.todos = TodoTracker(on_change=lambda items: _show_plan(deps.events, items))
        tools.register(todo_write_tool(agent.todos))
        guidance.append(TodoReminder(agent.todos))
    if Capability.SUBAGENTS in agent.profile:
        tools.register(task_tool(lambda _description: _child_runner(deps, agent, guards)))
    return guidance


def _add_project_knowledge(agent: Agent, deps: AgentDeps, tools: ToolRegistry) -> None:
    """Chapter 7: the project's skills (a catalog, loaded on demand) and its AGENTS.md."""
    if Capability.SKILLS in agent.profile:
        agent.skills = _discover_skills(deps.project.root, deps.events)
        tools.register(load_skill_tool(agent.skills))
    if Capability.PROJECT_INSTRUCTIONS in agent.profile:
        agent.reads_instructions = True
        agent.instructions = _project_instructions(deps)


def _add_compaction(
    agent: Agent,
    deps: AgentDeps,
    tools: ToolRegistry,
    hooks: HookRegistry | None,
    framing: tuple[str, str],
) -> ModelClient:
    """Chapter 8: the compaction manager becomes the runner's context. Returns the model
    the runner should call: metered, so that each reply calibrates bytes per token (by the
    numbers of `[compaction]`, for the meter's estimates too)."""
    meter = agent.context_meter
    meter.calibration = TokenCalibration(deps.settings.compaction)
    model: ModelClient = WindowFromOverflow(
        MeteredModel(deps.model, meter),
        meter,
        on_window=lambda tokens: _announce_stated_window(deps.events, tokens),
        on_refusal=lambda size, error: _record_refusal(agent, size, error),
    )
    window = meter.known_window_tokens
    model = CompactFraming(model, window, system_prompt=framing[0], compact_prompt=COMPACT_PROMPT)
    summarizer: HistorySummarizer = ModelHistorySummarizer(UsageReporting(model, deps.events))
    if hooks is not None:
        summarizer = CompactionHooks(summarizer, hooks, deps.project.workspace, deps.events)
    agent.compaction = CompactionManager(
        deps.project.root,
        summarizer,
        deps.settings.compaction,
        context_window_tokens=deps.settings.context_window_tokens,
        on_event=deps.events.emit,
        window_accounting=_window_accounting(agent, deps.settings, tools, framing),
        tools_workspace=deps.project.workspace,
        window=meter.context_window,
    )
    return model


def _announce_stated_window(events: EventBus, tokens: int) -> None:
    """Chapter 8 after an overflow error that states the window: the manager, the meter
    and the model client read it from the session's window; the user is told."""
    events.emit(
        Notice("info", f"the server states a context window of {tokens:,} tokens; keeping to it")
    )


def _record_refusal(agent: Agent, request_bytes: int, error: PromptTooLongError) -> None:
    """Chapter 8 after an overflow error: the retry is sized by what it states."""
    if agent.compaction is not None:
        agent.compaction.refused(request_bytes, error.prompt_tokens)


def _window_accounting(
    agent: Agent, settings: Settings, tools: ToolRegistry, framing: tuple[str, str]
) -> WindowAccounting:
    """What every request carries besides the history (the system prompt, the project
    context, the tool schemas and room for reminders), the reply's cap, and the meter's
    calibration, which each reply refines: with these the manager turns the window into a
    byte budget."""
    system_prompt, project_context = framing
    prompt: list[ChatMessage] = [
        system_message(system_prompt),
        project_context_message(project_context),
    ]
    allowance = settings.compaction.reminder_allowance_bytes
    reserved = request_utf8_bytes(prompt, tools.specs()) + allowance
    compact_prompt = [system_message(COMPACT_PROMPT), *prompt[1:]]
    compact_specs = [compact_spec(spec) for spec in tools.specs()]
    compact = request_utf8_bytes(compact_prompt, compact_specs) + allowance
    calibration = agent.context_meter.calibration
    return WindowAccounting(reserved, settings.max_output_tokens, calibration, compact)


def _system_prompt(agent: Agent, *, subagent: bool = False) -> str:
    """The base prompt and one line of guidance per capability: the same in every project
    and session of a chapter, so a local server's prompt cache and a provider's prefix
    cache keep it (and the tools a chat template puts after it) across them."""
    guidance = [
        text
        for capability, text in CHAPTER_GUIDANCE.items()
        if capability in agent.profile and not (subagent and capability in PARENT_ONLY_GUIDANCE)
    ]
    return "\n\n".join([BASE_PROMPT, *guidance])


def _project_context(agent: Agent) -> str:
    """This project's part, sent after the system prompt (`AgentRunner.project_context`):
    where it is and where its artifacts go, its instructions (always on) and the skill
    catalog (loaded on demand). Out of the system prompt, so that the system prompt, and
    the tools a chat template puts after it, are the same in every project and session
    of a chapter, and a server's prompt cache holds them."""
    parts = [PROJECT_PROMPT.format(workspace=encodable(str(agent.workspace)))]
    if Capability.COMPACTION in agent.profile:
        parts.append(ARTIFACTS_PROMPT.format(artifacts=_artifacts_shown(agent)))
    if agent.instructions is not None:
        parts.append(agent.instructions.prompt_text())
    if agent.skills is not None:
        parts.append(agent.skills.catalog_text())
    return "\n\n".join(part for part in parts if part)


def _artifacts_shown(agent: Agent) -> str:
    """The artifacts folder as the read tools reach it: workspace-relative, or absolute
    when the project root holding it lies above the workspace."""
    if agent.project_root == agent.workspace:
        return ARTIFACTS_RELATIVE_PATH
    return encodable(str(agent.project_root / ARTIFACTS_RELATIVE_PATH))


def _show_plan(events: EventBus, items: tuple[TodoItem, ...]) -> None:
    events.emit(Notice("info", "Plan:\n" + (render_plan(items) or "(cleared)")))


def secret_redactor(
    settings: Settings, project_root: Path, dotenv_lines: Mapping[str, str | None]
) -> Redactor:
    """Masks the API key in use, the values of secret-looking variables in the environment
    and in the project's `.agent_tutorial/.env` (`dotenv_lines`, as read once with the
    settings), and (unless `redact_secrets = false`) token shapes. The base URL, the model
    and the project's path are never masked: the request names them."""
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    secrets = known_secrets(
        [os.environ, dotenv_lines],
        api_key=api_key,
        api_key_name=settings.api_key_env,
        public=[settings.base_url, settings.model, str(project_root)],
    )
    return Redactor(secrets, patterns=settings.redact_secrets)


def _add_core_tools(
    profile: ChapterProfile, tools: ToolRegistry, deps: AgentDeps, redactor: Redactor
) -> None:
    """bash, the file tools and the search tools, each inside the workspace; the state
    folder's artifacts/ and skills/ stay readable when it lies above it."""
    workspace, settings, state_dir = (
        deps.project.workspace,
        deps.settings,
        deps.project.state_dir_outside_workspace,
    )
    if Capability.BASH in profile:
        bash = BashSettings(
            include_env=frozenset(settings.shell_environment.include),
            hidden_env=frozenset({"OPENAI_API_KEY", settings.api_key_env}),
            redactor=redactor,
            disk_cap_bytes=settings.output_disk_cap_bytes,
            sandbox=deps.sandbox,
        )
        tools.register(bash_tool(workspace, bash))
    if Capability.FILE_TOOLS in profile:
        read_only = settings.sandbox == "read-only"  # Codex's read-only: no file changes
        confined = deps.sandbox is not None and deps.sandbox.confined
        protected = _protected(profile, settings, deps.project, confined=confined)
        tools_for_files = file_tools(
            workspace, state_dir=state_dir, read_only=read_only, protected=protected
        )
        for tool in tools_for_files:
            tools.register(tool)
    if Capability.SEARCH_TOOLS in profile:
        budget_s = settings.grep_time_budget_s
        for tool in search_tools(workspace, grep_time_budget_s=budget_s, state_dir=state_dir):
            tools.register(tool)


def _checkpoints(tools: ToolRegistry, deps: AgentDeps) -> TurnCheckpoints | None:
    limit = deps.settings.checkpoint_max_file_bytes
    store = CheckpointStore.in_state_folder(deps.project.root, max_file_bytes=limit)
    return turn_checkpoints(tools, store, deps.project.workspace, deps.events)


def _guards(
    profile: ChapterProfile, deps: AgentDeps, hooks: HookRegistry | None
) -> tuple[list[CallGuard], list[TurnGuard]]:
    """Chapter 3's policy alone, or chapter 4's hook guard wrapping it (hooks recommend,
    the policy decides)."""
    policy = None
    if Capability.PERMISSIONS in profile:
        policy = PermissionPolicy(
            Workspace(deps.project.workspace, state_dir=deps.project.state_dir_outside_workspace),
            mode=deps.settings.permission_mode,
            rules=deps.settings.permissions.rules,
            approver=_announcing(deps.approver, deps.events),
            on_decision=lambda record: _report_decision(deps.events, record),
        )
    # First, so that its after_call runs before hooks see the result or the model does.
    escalation: list[CallGuard] = [SandboxEscalation(policy)] if policy else []
    if hooks is not None:
        hook_guard = HookGuard(hooks, policy, events=deps.events)
        return [*escalation, hook_guard], [hook_guard]
    return ([*escalation, policy] if policy else []), []


@dataclass(frozen=True)
class UsageReporting:
    """The model as the summarizer sees it: each reply's tokens are reported, since summary
    requests happen outside the loop and would otherwise go uncounted."""

    model: ModelClient
    events: EventBus

    def complete(self, request: ModelRequest) -> ModelReply:
        reply = self.model.complete(request)
        if reply.usage is not None:
            self.events.emit(UsageReported(reply.usage, "summary"))
        return reply


@dataclass(frozen=True)
class CompactionHooks:
    """Runs PreCompact and PostCompact hooks around every model-written summary (chapters
    4 + 8). A failing hook is reported and never stops the compaction."""

    summarizer: HistorySummarizer
    hooks: HookRegistry
    workspace: Path
    events: EventBus

    def summarize(self, history: Sequence[ChatMessage]) -> CompactionSummary:
        self._fire("PreCompact")
        summary = self.summarizer.summarize(history)
        self._fire("PostCompact")
        return summary

    def _fire(self, event: Literal["PreCompact", "PostCompact"]) -> None:
        try:
            self.hooks.fire(event, HookInput(event=event, workspace=self.workspace))
        except HookError as error:
            self.events.emit(Notice("warning", f"{event} hook failed: {error}"))


@dataclass(frozen=True)
class AnnouncingApprover:
    """Reports each question as an "ask" decision before the user sees it. The session log
    records that the user was asked, and the terminal stops its spinner, which would
    otherwise redraw over the approval prompt."""

    approver: Approver
    events: EventBus

    def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.events.emit(
            PermissionDecided(
                tool=request.tool_name,
                subject=request.subject,
                decision="ask",
                reason=request.reason,
                source=ASKING_SOURCE,
            )
        )
        return self.approver.approve(request)


def _announcing(approver: Approver | None, events: EventBus) -> Approver | None:
    return None if approver is None else AnnouncingApprover(approver, events)


def _report_decision(events: EventBus, record: DecisionRecord) -> None:
    events.emit(
        PermissionDecided(
            tool=record.tool_name,
            subject=record.subject,
            decision=record.decision,
            reason=record.reason,
            source=record.source,
        )
    )


def _child_runner(deps: AgentDeps, parent: Agent, guards: Sequence[CallGuard]) -> AgentRunner:
    """A fresh runner for `task`: same model, policy and hooks, its own history, and the
    parent's tools minus `task` (no recursion) and `todo_write` (the plan is the parent's),
    and the parent's system prompt without the guidance for those two (it keeps the skill
    catalog, since it keeps `load_skill`). Large results are still persisted, so a child
    cannot flood its own context."""
    return AgentRunner(
        deps.model,
        subagent_tools(parent.runner.tools),
        system_prompt=_system_prompt(parent, subagent=True),
        project_context=_project_context(parent),
        max_turns=SUBAGENT_MAX_TURNS,
        context=None if parent.compaction is None else parent.compaction.for_subagent(),
        redaction=parent.runner.redaction,
        guards=guards,
        events=EventBus([NestingSink(deps.events, depth=1)]),
    )


def _project_instructions(deps: AgentDeps) -> ProjectInstructions | None:
    """AGENTS.md from the project root down to the workspace; each file left out or cut
    is one warning."""
    limit = deps.settings.project_instructions_max_bytes
    instructions = read_project_instructions(deps.project.workspace, limit, root=deps.project.root)
    for problem in instructions.problems:
        deps.events.emit(Notice("warning", problem))
    return instructions if instructions.files else None


def _discover_skills(project_root: Path, events: EventBus) -> SkillRegistry:
    skills = SkillRegistry.discover(project_root)
    for problem in skills.problems:
        events.emit(Notice("warning", f"skill skipped: {problem}"))
    return skills
