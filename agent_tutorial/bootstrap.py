"""The composition root: turns a chapter profile into a ready `AgentRunner`, the settings
into the model client it talks to (`connect_model`, built by `model_client`) and into the
sandbox bash runs in (`open_sandbox`).

Each capability contributes tools, prompt text, guards or processors; this is the one
place that asks `Capability.X in profile`. Nothing else knows which chapter it runs in:
the front ends (`cli.py`, `repl.py`) parse, call these two functions and report.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from agent_tutorial.adapters.filesystem import Workspace
from agent_tutorial.adapters.hook_runner import command_hook
from agent_tutorial.adapters.sandbox import (
    SandboxUnavailableError,
    private_temporary_directory,
    sandbox_available,
    sandboxed,
)
from agent_tutorial.adapters.text_tool_calls import SwitchReason, TextToolCalls
from agent_tutorial.config import STATE_DIR, ConfigError, Settings, user_config_path
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
from agent_tutorial.core.model import ModelClient, ModelReply, ModelRequest
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
from agent_tutorial.features.bash import BashSettings, bash_tool
from agent_tutorial.features.builtin_tools import file_tools, search_tools
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
from agent_tutorial.features.project_instructions import (
    ProjectInstructions,
    read_project_instructions,
)
from agent_tutorial.features.redaction import Redactor, dotenv_secrets_source, known_secrets
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
from agent_tutorial.model_client import context_window, open_model_client, with_server_window
from agent_tutorial.profiles import Capability, ChapterProfile

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


@dataclass
class Agent:
    """A runner plus the features a front end (CLI, REPL) needs to reach directly."""

    runner: AgentRunner
    profile: ChapterProfile
    events: EventBus
    workspace: Path
    """The tools' boundary."""
    project_root: Path
    """Where `.agent_tutorial/` is: the workspace or a folder above it."""
    context_meter: ContextMeter = field(default_factory=lambda: ContextMeter(None))
    """The model's window, when known, and the bytes-per-token calibration (chapter 8)."""
    compaction: CompactionManager | None = None
    todos: TodoTracker | None = None
    skills: SkillRegistry | None = None
    instructions: ProjectInstructions | None = None
    """AGENTS.md (or CLAUDE.md) as read into the system prompt (chapter 7)."""
    reads_instructions: bool = False
    """Whether this chapter reads AGENTS.md at all (`instructions` is None without one)."""


@dataclass(frozen=True)
class ModelConnection:
    """The model client for a run, and the settings the rest of the run is built from."""

    settings: Settings
    """As given, plus the window the server named when the chapter needs one."""
    model: ModelClient


def compacts(profile: ChapterProfile) -> bool:
    """Whether a run of `profile` compacts its context (chapter 8): the front ends warn
    when chapter 8's flags are given to a chapter that would ignore them."""
    return Capability.COMPACTION in profile


def connect_model(
    settings: Settings,
    workspace: Path,
    profile: ChapterProfile,
    opened: ExitStack,
    *,
    project_root: Path | None = None,
) -> ModelConnection:
    """The model client for a run of `profile`: chapter 8 budgets against the window, so
    an unset one is asked of the server first, and the demo plays its long tour. The
    client's error text is masked by the same redactor the tools' output is."""
    compaction = compacts(profile)
    if compaction:
        settings = with_server_window(settings)
    model = open_model_client(
        settings,
        workspace,
        redactor=secret_redactor(settings, project_root or workspace),
        long_demo=compaction,
        opened=opened,
    )
    return ModelConnection(settings, model)


@dataclass(frozen=True)
class SessionSandbox:
    """The sandbox bash runs in for a session, and what to tell the user about it."""

    policy: SandboxPolicy | None
    """None: bash runs unconfined (`off`, no bash in the chapter, or no sandbox here)."""
    notice: str | None = None
    """Said once at the start when the default sandbox cannot run here."""


def open_sandbox(
    settings: Settings,
    workspace: Path,
    profile: ChapterProfile,
    opened: ExitStack,
    *,
    project_root: Path | None = None,
) -> SessionSandbox:
    """The session's sandbox for bash: `workspace-write` unless the settings say otherwise,
    with its private temporary directory, removed when `opened` closes. The state folder
    is the one at `project_root` (default: the workspace).

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
    policy = _sandbox_policy(settings, mode, workspace, opened, project_root)
    _refuse_unusable_workspace(policy, workspace)
    return SessionSandbox(policy)


def _sandbox_policy(
    settings: Settings,
    mode: SandboxMode,
    workspace: Path,
    opened: ExitStack,
    project_root: Path | None,
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
        workspace=workspace,
        project_root=project_root,
        private_tmp=opened.enter_context(private_temporary_directory()),
        home=Path.home().absolute(),
        # The user's settings, wherever XDG_CONFIG_HOME puts them (under the home directory
        # they are hidden already).
        also_hidden=(user_settings,),
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


@dataclass
class AgentDeps:
    model: ModelClient
    workspace: Path
    """The tools' boundary: the directory the agent started in."""
    settings: Settings
    approver: Approver | None = None
    events: EventBus = field(default_factory=EventBus)
    history: Sequence[ChatMessage] = ()
    max_turns: int | None = None
    project_root: Path | None = None
    """The project root at or above `workspace` whose `.agent_tutorial/` holds the `.env`,
    skills and artifacts (`project.find_project`); None: the workspace itself."""

    @property
    def root(self) -> Path:
        return self.project_root or self.workspace

    @property
    def outer_state_dir(self) -> Path | None:
        """The state folder when it lies above the tools' boundary, else None."""
        root = self.root.resolve()
        return None if root == self.workspace.resolve() else root / STATE_DIR

    sandbox: SandboxPolicy | None = None
    """The sandbox bash runs in (`open_sandbox` builds it from the settings); None:
    unconfined."""


def build_agent(profile: ChapterProfile, deps: AgentDeps) -> Agent:
    """Tools first, then the guards around them, then what each later chapter adds; the
    runner is built last, once every part it is given exists."""
    deps = replace(deps, model=reading_text_calls(deps.model, deps.settings, deps.events))
    tools = ToolRegistry(max_argument_bytes=deps.settings.max_tool_argument_bytes)
    agent = Agent(
        runner=AgentRunner(deps.model, tools),  # replaced below once every part exists
        profile=profile,
        events=deps.events,
        workspace=deps.workspace,
        project_root=deps.root,
        context_meter=ContextMeter(context_window(deps.settings)),
    )
    redactor = secret_redactor(deps.settings, deps.root)
    _add_core_tools(profile, tools, deps, redactor)
    hooks = _hooks(profile, deps, redactor)
    guards, turn_guards = _guards(profile, deps, hooks)
    guidance = _add_todos_and_task(agent, deps, tools, guards)
    _add_project_knowledge(agent, deps, tools)
    system_prompt = _system_prompt(agent)
    project_context = _project_context(agent)  # with AGENTS.md and the skills: build once
    model = deps.model
    if Capability.COMPACTION in profile:
        framing = (system_prompt, project_context)
        model = _add_compaction(agent, deps, tools, hooks, framing)
        guidance.append(ContinueAfterSummary())
    agent.runner = AgentRunner(
        model,
        tools,
        system_prompt=system_prompt,
        project_context=project_context,
        max_turns=deps.max_turns or deps.settings.max_turns,
        context=agent.compaction,
        redaction=redactor,
        guards=guards,
        guidance=guidance,
        turn_guards=turn_guards,
        events=deps.events,
        history=deps.history,
    )
    return agent


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
    return HookRegistry.from_config(config, deps.workspace, command_hook, redaction=redactor)


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
        agent.skills = _discover_skills(deps.root, deps.events)
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
        deps.settings.max_output_tokens,
        on_window=lambda tokens: _use_stated_window(agent, deps.events, tokens),
    )
    summarizer: HistorySummarizer = ModelHistorySummarizer(UsageReporting(model, deps.events))
    if hooks is not None:
        summarizer = CompactionHooks(summarizer, hooks, deps.workspace, deps.events)
    agent.compaction = CompactionManager(
        deps.root,
        summarizer,
        deps.settings.compaction,
        context_window_tokens=deps.settings.context_window_tokens,
        on_event=deps.events.emit,
        window_accounting=_window_accounting(agent, deps.settings, tools, framing),
        tools_workspace=deps.workspace,
    )
    return model


def _use_stated_window(agent: Agent, events: EventBus, tokens: int) -> None:
    """Chapter 8 after an overflow error that states the window: budget against it."""
    if agent.compaction is not None:
        agent.compaction.use_window(tokens)
    events.emit(
        Notice("info", f"the server states a context window of {tokens:,} tokens; keeping to it")
    )


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
    calibration = agent.context_meter.calibration
    return WindowAccounting(reserved, settings.max_output_tokens, calibration)


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


def secret_redactor(settings: Settings, workspace: Path) -> Redactor:
    """Masks the API key in use, the values of secret-looking variables in the environment
    and in `.agent_tutorial/.env`, and (unless `redact_secrets = false`) token shapes. The
    base URL, the model and the workspace path are never masked: the request names them."""
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    secrets = known_secrets(
        [os.environ, dotenv_secrets_source(workspace / STATE_DIR / ".env")],
        api_key=api_key,
        api_key_name=settings.api_key_env,
        public=[settings.base_url, settings.model, str(workspace)],
    )
    return Redactor(secrets, patterns=settings.redact_secrets)


def _add_core_tools(
    profile: ChapterProfile, tools: ToolRegistry, deps: AgentDeps, redactor: Redactor
) -> None:
    """bash, the file tools and the search tools, each inside the workspace; the state
    folder's artifacts/ and skills/ stay readable when it lies above it."""
    workspace, settings, state_dir = deps.workspace, deps.settings, deps.outer_state_dir
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
        for tool in file_tools(workspace, state_dir=state_dir):
            tools.register(tool)
    if Capability.SEARCH_TOOLS in profile:
        budget_s = settings.grep_time_budget_s
        for tool in search_tools(workspace, grep_time_budget_s=budget_s, state_dir=state_dir):
            tools.register(tool)


def _guards(
    profile: ChapterProfile, deps: AgentDeps, hooks: HookRegistry | None
) -> tuple[list[CallGuard], list[TurnGuard]]:
    """Chapter 3's policy alone, or chapter 4's hook guard wrapping it (hooks recommend,
    the policy decides)."""
    policy = None
    if Capability.PERMISSIONS in profile:
        policy = PermissionPolicy(
            Workspace(deps.workspace, state_dir=deps.outer_state_dir),
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
    instructions = read_project_instructions(deps.workspace, limit, root=deps.root)
    for problem in instructions.problems:
        deps.events.emit(Notice("warning", problem))
    return instructions if instructions.files else None


def _discover_skills(workspace: Path, events: EventBus) -> SkillRegistry:
    skills = SkillRegistry.discover(workspace)
    for problem in skills.problems:
        events.emit(Notice("warning", f"skill skipped: {problem}"))
    return skills
