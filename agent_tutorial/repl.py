"""The interactive REPL: a prompt-toolkit prompt with history, slash commands and a bottom
toolbar showing how full the context is, around one `Conversation`.

Enter submits; Alt+Enter (or Esc then Enter) inserts a newline. Ctrl-C cancels the running
turn (history stays paired); Ctrl-C twice at an empty prompt, Ctrl-D or /exit leaves.
A large paste shows as a placeholder until it is sent (`pastes.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import has_completions
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent, merge_key_bindings
from prompt_toolkit.output import ColorDepth, Output
from rich.table import Table
from rich.text import Text

from agent_tutorial.artifact_view import artifact_table, show_artifact
from agent_tutorial.bootstrap import Agent
from agent_tutorial.commands.process import termination_exit_code
from agent_tutorial.conversation import Conversation
from agent_tutorial.core.errors import EXIT_INTERRUPTED, EXIT_OK, AgentTutorialError
from agent_tutorial.core.loop import TurnInterrupted
from agent_tutorial.core.messages import ChatMessage
from agent_tutorial.core.text import printable
from agent_tutorial.features.artifact_catalog import (
    ArtifactLookupError,
    find_artifact,
    list_artifacts,
)
from agent_tutorial.features.checkpoints import checkpoint_store_bytes
from agent_tutorial.features.compaction import history_utf8_bytes
from agent_tutorial.features.compaction.budget import WindowSize
from agent_tutorial.features.context_window import ContextMeter
from agent_tutorial.features.project_instructions import ProjectInstructions
from agent_tutorial.features.sessions import SessionError, find_session, list_sessions
from agent_tutorial.features.state_folder import ensure_state_folder
from agent_tutorial.features.todos import render_plan
from agent_tutorial.layout import KeepUnits, Trimmed
from agent_tutorial.modes import (
    MODE_STYLES,
    next_permission_mode,
    permission_policy,
    permissions_table,
    sandbox_row,
    sandbox_text,
)
from agent_tutorial.pastes import CollapsedPastes, SentPromptHistory, paste_bindings
from agent_tutorial.prompt_layout import put_the_toolbar_under_the_prompt
from agent_tutorial.recap import recap
from agent_tutorial.render import (
    TerminalRenderer,
    compaction_items,
    error_line,
    format_bytes,
    in_layer_order,
    rendering,
    session_table,
    shorten,
)
from agent_tutorial.rewinding import Rewinder
from agent_tutorial.run_summary import RunSummary, format_count
from agent_tutorial.session_picker import pick_session

MODEL_NAME_WIDTH = 24
PROMPT = FormattedText([("bold ansicyan", "› ")])
CONTINUATION = FormattedText([("ansibrightblack", "· ")])


@dataclass(frozen=True)
class SlashCommand:
    name: str
    usage: str
    help: str


SLASH_COMMANDS = (
    SlashCommand("/help", "/help", "this list"),
    SlashCommand("/context", "/context", "sizes: history, request, compaction so far, usage"),
    SlashCommand("/permissions", "/permissions", "the mode and the rules (Shift-Tab: mode)"),
    SlashCommand("/compact", "/compact [focus]", "summarise the conversation now (chapter 8)"),
    SlashCommand("/todos", "/todos", "the current plan (chapter 5+)"),
    SlashCommand("/artifacts", "/artifacts [ID]", "persisted tool results and transcripts"),
    SlashCommand("/mcp", "/mcp", "MCP servers and their tools (chapter 9)"),
    SlashCommand("/clear", "/clear", "start a new session (also /new)"),
    SlashCommand("/sessions", "/sessions", "saved sessions in this project"),
    SlashCommand("/resume", "/resume [ID]", "continue a saved session (no id: pick one)"),
    SlashCommand("/undo", "/undo", "take back the last prompt: its files and messages"),
    SlashCommand("/rewind", "/rewind", "pick a prompt to go back before (files, messages)"),
    SlashCommand("/exit", "/exit", "leave (also Ctrl-D)"),
)


class SlashCompleter(Completer):
    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text:
            return
        for command in SLASH_COMMANDS:
            if command.name.startswith(text):
                yield Completion(command.name, -len(text), display_meta=command.help)


def key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    # Esc (to dismiss a menu, say) then `/` for a command reads as Meta-/, "complete",
    # which swallowed the slash and sent the command's words to the model.
    @bindings.add("escape", "/")
    def _slash_after_escape(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("/")

    return bindings


@dataclass(frozen=True)
class ToolbarPart:
    text: str
    style: str = ""
    keep: int = 0
    """Priority: on a narrow terminal the parts with the lowest `keep` are left out first."""


def fit_toolbar(parts: Sequence[ToolbarPart], columns: int) -> FormattedText:
    """` ch8 · gpt-4.1-mini · 1a2b3c4d · 12.3 KB ≈3,150 tok · 25% of summary` in at most
    `columns - 1` cells (the last cell of a line makes some terminals scroll)."""
    shown = list(parts)
    dropped = []
    while len(shown) > 1 and _toolbar_width(shown) > columns - 1:
        dropped.append(min(shown, key=lambda part: part.keep))
        shown.remove(dropped[-1])
    # A part dropped early may fit in the room a longer one left (the model's name gone,
    # the compaction counts fit): give those back, the most wanted first, in their place.
    for part in sorted(dropped, key=lambda part: -part.keep):
        candidate = [kept for kept in parts if kept in shown or kept is part]
        if _toolbar_width(candidate) <= columns - 1:
            shown = candidate
    fragments: list[tuple[str, str]] = []
    for part in shown:
        fragments.append(("", " · " if fragments else " "))
        fragments.append((part.style, part.text))
    return FormattedText(fragments)


def _toolbar_width(parts: Sequence[ToolbarPart]) -> int:
    return 1 + sum(len(part.text) for part in parts) + 3 * (len(parts) - 1)


class RunningHistorySize:
    """Bytes of an append-only history, adding only what was appended since the last call
    (a toolbar redraw must not re-serialise a long session); a replaced history (/clear,
    /resume) is measured once from the start."""

    def __init__(self) -> None:
        self._history: Sequence[ChatMessage] | None = None
        self._counted = 0
        self._bytes = 0

    def of(self, history: Sequence[ChatMessage]) -> int:
        if history is not self._history or len(history) < self._counted:
            self._history, self._counted, self._bytes = history, 0, 0
        self._bytes += history_utf8_bytes(history[self._counted :])
        self._counted = len(history)
        return self._bytes


class Repl:
    def __init__(
        self,
        conversation: Conversation,
        summary: RunSummary,
        renderer: TerminalRenderer,
        *,
        model_name: str,
        resume_command: str = "agent-tutorial run",
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self.conversation = conversation
        self.summary = summary
        self.renderer = renderer
        self.out = renderer.out
        self.err = renderer.err
        self.model_name = model_name
        self.resume_command = resume_command
        """The farewell's command up to `-c N --resume ID`, as the user ran this one."""
        self._history_size = RunningHistorySize()
        self._pastes = CollapsedPastes()
        # --no-color (or NO_COLOR) made the consoles plain; the prompt and toolbar follow.
        color_depth = ColorDepth.DEPTH_1_BIT if self.err.no_color else None
        self.session: PromptSession[str] = PromptSession(
            history=SentPromptHistory(
                _history(conversation.setup.project.root), self._pastes.expand
            ),
            key_bindings=merge_key_bindings(
                [key_bindings(), paste_bindings(self._pastes), self._mode_bindings()]
            ),
            completer=SlashCompleter(),
            complete_while_typing=True,
            bottom_toolbar=self.toolbar,
            prompt_continuation=CONTINUATION,
            color_depth=color_depth,
            input=input,
            output=output,
        )
        put_the_toolbar_under_the_prompt(self.session)
        # A separate session: a yes/no answer is not a prompt to remember or complete.
        self._confirmation: PromptSession[str] = PromptSession(
            color_depth=color_depth, input=input, output=output
        )
        self._rewinder = Rewinder(
            conversation,
            self.err,
            self._confirmation,
            self.session.input,
            self.session.output,
            self._terminal_columns,
        )
        self._commands: dict[str, Callable[[str], bool]] = {
            "/help": self._help,
            "/context": self._context,
            "/permissions": self._permissions,
            "/compact": self._compact,
            "/todos": self._todos,
            "/artifacts": self._artifacts,
            "/mcp": self._mcp,
            "/clear": self._clear,
            "/new": self._clear,
            "/sessions": self._sessions,
            "/resume": self._resume,
            "/undo": self._undo,
            "/rewind": self._rewind,
            "/exit": lambda _argument: False,
            "/quit": lambda _argument: False,
        }

    def _mode_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("s-tab", filter=~has_completions)  # in a menu it steps back
        def _cycle_mode(event: KeyPressEvent) -> None:
            self.cycle_permission_mode()
            event.app.invalidate()  # the toolbar shows the new mode at once

        return bindings

    def cycle_permission_mode(self) -> None:
        """`ask → accept-edits → auto → ask`, from the next tool call on; kept for the
        agents `/clear` and `/resume` build. Before chapter 3 no policy asks anything."""
        policy = permission_policy(self.conversation.agent.runner)
        if policy is None:
            return
        policy.mode = next_permission_mode(policy.mode)
        setup = self.conversation.setup
        settings = setup.settings.model_copy(update={"permission_mode": policy.mode})
        self.conversation.setup = replace(setup, deps=replace(setup.deps, settings=settings))

    def loop(self) -> int:
        """Read and handle prompts until /exit, Ctrl-D or Ctrl-C twice at an empty prompt,
        then say how to come back to this session; the exit code (130 after Ctrl-C)."""
        self.err.print(self._greeting(), highlight=False)
        self._show_recap()  # a conversation resumed by --continue or --resume
        exit_code = self._read_prompts()
        self.err.print(self._farewell(), soft_wrap=True)  # one command, however narrow
        return exit_code

    def _read_prompts(self) -> int:
        interrupted_once = False
        while True:
            try:
                text = self._pastes.send(self.session.prompt(PROMPT))
            except KeyboardInterrupt:
                if termination_exit_code() is not None:
                    return EXIT_INTERRUPTED  # SIGTERM or SIGHUP: the caller reports it
                if self.session.default_buffer.text:
                    continue  # Ctrl-C on a draft only discards the draft
                if interrupted_once:
                    return EXIT_INTERRUPTED
                interrupted_once = True
                self.err.print("(press Ctrl-C again or Ctrl-D to leave)", style="dim")
                continue
            except EOFError:
                return EXIT_OK
            interrupted_once = False
            if not self.handle(text):
                return EXIT_OK

    def handle(self, text: str) -> bool:
        """One line from the user; returns False when the REPL should end."""
        text = text.strip()
        if not text:
            return True
        if text.startswith("/"):
            name, _, argument = text.partition(" ")
            command = self._commands.get(name)
            if command is None:
                unknown = f"unknown command {printable(name)}; try /help"
                self.err.print(Text(unknown, style="yellow"))
                return True
            return command(argument.strip())
        if self._large_prompt_confirmed(text):
            self._run_turn(text)
        return True

    def _large_prompt_confirmed(self, text: str) -> bool:
        """A prompt over the summary threshold (a large paste, most likely) is sent only
        after a warning and a yes: alone it fills what the model may see."""
        size = len(text.encode())
        threshold = self._summary_threshold_bytes()
        if size <= threshold:
            return True
        self.err.print(large_prompt_warning(size, threshold, self.conversation.agent))
        try:
            answer = self._confirmation.prompt("Send it anyway? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        if answer.strip().lower() in {"y", "yes"}:
            return True
        self.err.print("not sent", style="yellow")
        return False

    def _summary_threshold_bytes(self) -> int:
        compaction = self.conversation.agent.compaction
        if compaction is not None:
            return compaction.summary_threshold_bytes  # smaller when the window is small
        return self.conversation.setup.settings.compaction.proactive_threshold_bytes

    def _run_turn(self, prompt: str) -> None:
        try:
            with rendering(self.renderer):  # stops a spinner or live answer Ctrl-C cut short
                self.conversation.run(prompt)
        except (KeyboardInterrupt, TurnInterrupted):
            if termination_exit_code() is not None:
                raise  # SIGTERM or SIGHUP end the REPL; the turn is already paired and saved
            self.err.print("interrupted; the conversation goes on", style="yellow")
        except AgentTutorialError as error:  # the turn failed; the conversation goes on
            self.err.print(error_line(str(error)))

    def toolbar(self) -> FormattedText:
        """One line that fits the terminal: parts that matter least go first when it is
        narrow. Called on every redraw (each key press), so it only reads kept figures."""
        agent = self.conversation.agent
        request_bytes = self._next_request_bytes()
        session_id = self.conversation.session_id if self.conversation.log else "unsaved"
        parts = [
            ToolbarPart(f"ch{agent.profile.chapter}", keep=9),
            *self._mode_parts(),
            ToolbarPart(shorten(self.model_name, MODEL_NAME_WIDTH), keep=2),
            ToolbarPart(session_id, "bold", keep=3),
            ToolbarPart(
                f"{format_bytes(request_bytes)} {agent.context_meter.request_text(request_bytes)}",
                keep=8,
            ),
        ]
        if agent.compaction is not None:
            share = _share(request_bytes, agent.compaction.summary_threshold_bytes)
            parts.append(ToolbarPart(f"{share:.0%} of summary", _fill_style(share), keep=7))
            layers = self.summary.compaction
            counts = " ".join(  # as the totals count: results, groups, summaries
                f"{layer} {layers[layer]['count']}" for layer in in_layer_order(layers)
            )
            if counts:
                parts.append(ToolbarPart(counts, keep=1))
        return fit_toolbar(parts, self._terminal_columns())

    def _mode_parts(self) -> list[ToolbarPart]:
        """The permission mode (kept longest: it says what runs unasked) and the sandbox."""
        sandbox = ToolbarPart(sandbox_text(self.conversation.setup.deps.sandbox), keep=4)
        policy = permission_policy(self.conversation.agent.runner)
        if policy is None:
            return [sandbox]
        return [ToolbarPart(policy.mode, MODE_STYLES[policy.mode], keep=10), sandbox]

    def _terminal_columns(self) -> int:
        return self.session.app.output.get_size().columns

    def _next_request_bytes(self) -> int:
        """Bytes of the history part of the next request: the whole history before chapter
        8; in chapter 8 what compaction would send (after a resume, the restored summary
        and what follows it), not the whole canonical history."""
        agent = self.conversation.agent
        if agent.compaction is not None:
            return agent.compaction.next_request_bytes(agent.runner.history)
        return self._history_size.of(agent.runner.history)

    def _farewell(self) -> Text:
        conversation = self.conversation
        if conversation.log is None or not conversation.agent.runner.history:
            return Text("nothing saved in this session", style="dim")
        chapter = conversation.agent.profile.chapter
        command = f"{self.resume_command} -c {chapter} --resume {conversation.session_id}"
        return Text.assemble(("resume with: ", "dim"), (command, "bold"))

    def _greeting(self) -> Text:
        profile = self.conversation.agent.profile
        return Text.assemble(
            ("agent-tutorial", "bold"),
            f" · chapter {profile.chapter}: {profile.title} · {printable(self.model_name)}\n",
            ("Enter sends, Alt+Enter adds a line, /help lists commands, Ctrl-D leaves.", "dim"),
        )

    def _help(self, _argument: str) -> bool:
        table = Table(box=None, show_header=False)
        for command in SLASH_COMMANDS:
            table.add_row(Text(command.usage, style="bold"), command.help)  # not markup: [focus]
        self.out.print(Trimmed(table))
        return True

    def _mcp(self, _argument: str) -> bool:
        from agent_tutorial.mcp_session import describe_servers

        for line in describe_servers(self.conversation.setup.deps.mcp.statuses):
            self.out.print(printable(line), markup=False, highlight=False)
        return True

    def _context(self, _argument: str) -> bool:
        self.out.print(Trimmed(self._context_table()))
        return True

    def _context_table(self) -> Table:
        agent = self.conversation.agent
        history = agent.runner.history
        rows = [
            ("workspace", printable(str(agent.workspace))),
            ("project root", printable(_project_root_text(agent))),
            ("permission mode", self._mode_text()),
            ("sandbox", sandbox_row(self.conversation.setup.deps.sandbox)),
            (
                "canonical history",
                f"{len(history)} messages, {format_bytes(self._history_size.of(history))}",
            ),
        ]
        request_bytes = self._next_request_bytes()
        rows.append(("next request", f"{format_bytes(request_bytes)} of history"))
        rows.append(("context window", _window_text(agent.context_meter.window)))
        if agent.compaction is not None:
            threshold = agent.compaction.summary_threshold_bytes
            share = _share(request_bytes, threshold)
            rows.append(("summary threshold", f"{format_bytes(threshold)} ({share:.0%} used)"))
            rows.append(("  applies", agent.compaction.summary_threshold_source))
            fixed = agent.compaction.fixed_part_bytes
            rows.append(("fixed part", _fixed_part_text(fixed, agent.context_meter)))
            rows += self._compaction_rows()
        artifacts = list_artifacts(self.conversation.setup.project.root)
        stored = format_bytes(sum(info.size for info in artifacts))
        rows.append(("artifacts", f"{len(artifacts)} file(s), {stored}"))
        checkpoints = format_bytes(checkpoint_store_bytes(self.conversation.setup.project.root))
        rows.append(("checkpoints", f"{checkpoints} stored (agent-tutorial undo)"))
        if agent.reads_instructions:
            rows.append(("project instructions", _instructions_text(agent.instructions)))
        if mcp_tools := self.conversation.setup.deps.mcp.tools:
            from agent_tutorial.mcp_session import mcp_schema_text

            rows.append(("MCP tools", mcp_schema_text(mcp_tools)))
        rows.append(("last usage", _usage_text(self.summary, agent.context_meter.window)))
        totals = self.summary.usage
        rows.append(
            (
                "tokens so far",
                f"{format_count(totals.prompt_tokens)} prompt + "
                f"{format_count(totals.completion_tokens)} completion",
            )
        )
        return _label_table("context", rows, self.out.width)

    def _mode_text(self) -> str:
        policy = permission_policy(self.conversation.agent.runner)
        if policy is None:
            return "none before chapter 3: every tool call runs"
        return f"{policy.mode} (Shift-Tab changes it)"

    def _permissions(self, _argument: str) -> bool:
        policy = permission_policy(self.conversation.agent.runner)
        if policy is None:
            self.err.print("permissions arrive in chapter 3", style="yellow")
            return True
        self.out.print(Trimmed(permissions_table(policy, self.out.width)))
        return True

    def _compaction_rows(self) -> list[tuple[str, str]]:
        """A heading, then one row per layer that has acted in this session, in the order
        the layers act."""
        layers = self.summary.compaction
        if not layers:
            return [("compaction", "nothing compacted yet")]
        rows = [("compaction", "by layer, in the order they act:")]
        for layer in in_layer_order(layers):
            stats = layers[layer]
            saved = format_bytes(stats["bytes_saved"])
            items = compaction_items(layer, stats["count"])
            steps = f"{stats['events']} step{'' if stats['events'] == 1 else 's'}"
            rows.append((f"  {layer}", f"{items} in {steps}, {saved} saved"))
        return rows

    def _compact(self, focus: str) -> bool:
        if not self.conversation.agent.runner.history:
            self.err.print("nothing to compact yet", style="yellow")
            return True
        try:
            # One line: the summary step's own (sizes and transcript), no totals after it.
            with rendering(self.renderer, totals=False):
                self.conversation.compact(focus or None)
        except KeyboardInterrupt:  # the summary request can take a while; nothing changed
            self.err.print("compaction interrupted; the conversation goes on", style="yellow")
            return True
        except AgentTutorialError as error:  # compaction, the session or the model failed
            self.err.print(error_line(str(error), "compact failed"))
        return True

    def _todos(self, _argument: str) -> bool:
        todos = self.conversation.agent.todos
        if todos is None:
            self.err.print("todo planning arrives in chapter 5", style="yellow")
        else:
            plan = printable(render_plan(todos.items)) or "no plan yet"
            self.out.print(Text(plan))  # "[x]": not markup
        return True

    def _artifacts(self, argument: str) -> bool:
        if argument:
            self._artifact(argument)
            return True
        root = self.conversation.setup.project.root
        found = list_artifacts(root)
        self.out.print(artifact_table(found, root) if found else "no artifacts yet")
        return True

    def _artifact(self, reference: str) -> None:
        """One artifact in full, as `artifacts show` prints it."""
        try:
            info = find_artifact(self.conversation.setup.project.root, reference)
            data = info.path.read_bytes()
        except (ArtifactLookupError, OSError) as error:
            self.err.print(error_line(str(error), "cannot show"))
            return
        show_artifact(self.out, info, data)

    def _clear(self, _argument: str) -> bool:
        self.conversation.start_new()
        self.summary.reset()
        self.err.print(Text(f"new session {self.conversation.session_id}", style="dim"))
        return True

    def _sessions(self, _argument: str) -> bool:
        try:
            sessions = list_sessions(self.conversation.setup.project.root)
        except SessionError as error:  # a symlinked or unreadable sessions directory
            self.err.print(error_line(str(error), "cannot list sessions"))
            return True
        self.out.print(session_table(sessions) if sessions else "no saved sessions")
        return True

    def _resume(self, argument: str) -> bool:
        """`/resume ID`, or without an id a pick from the recent sessions; then the last
        turns of the resumed conversation."""
        try:
            path = self._session_named(argument) if argument else self._picked_session()
            if path is None:
                return True
            if self.conversation.log is not None and self.conversation.log.path == path:
                already = f"already in session {self.conversation.session_id}"
                self.err.print(Text(already, style="dim"))
                return True
            loaded = self.conversation.resume(path)
        except SessionError as error:
            self.err.print(error_line(str(error), "cannot resume"))
            return True
        self.summary.reset()
        resumed = f"resumed {loaded.meta.session_id}: {len(loaded.history)} messages"
        self.err.print(Text(resumed, style="dim"))
        self._show_recap()
        return True

    def _undo(self, _argument: str) -> bool:
        self._rewinder.undo()
        return True

    def _rewind(self, _argument: str) -> bool:
        self._rewinder.rewind()
        return True

    def _session_named(self, argument: str) -> Path:
        return find_session(self.conversation.setup.project.root, argument)

    def _picked_session(self) -> Path | None:
        """The session picked from the recent ones that can be resumed, this one aside."""
        current = self.conversation.log.path if self.conversation.log is not None else None
        recent = [
            info
            for info in list_sessions(self.conversation.setup.project.root)
            if info.has_prompt and info.problem is None and info.path != current
        ]
        if not recent:
            self.err.print("no other saved session to resume", style="yellow")
            return None
        picked = pick_session(
            recent,
            columns=self._terminal_columns(),
            input=self.session.input,
            output=self.session.output,
        )
        if picked is None:
            self.err.print("not resumed", style="dim")
        return None if picked is None else picked.path

    def _show_recap(self) -> None:
        """The last turns of a resumed conversation, where the earlier answers appeared."""
        history = self.conversation.agent.runner.history
        if history:
            shown = recap(history, self.out.width, markdown=self.renderer.markdown)
            self.out.print(Trimmed(shown), highlight=False)


def _label_table(title: str, rows: Sequence[tuple[str, str]], width: int) -> Table:
    """Labels in bold beside values that wrap without parting a number from its unit; on
    a narrow terminal the labels wrap too, leaving the values two thirds of the width."""
    table = Table(title=title, box=None, show_header=False, title_justify="left")
    table.add_column(style="bold", max_width=max(12, width // 3))
    table.add_column()
    for label, value in rows:
        table.add_row(label, KeepUnits(value))
    return table


def large_prompt_warning(size: int, threshold: int, agent: Agent) -> Text:
    """What sending a prompt over the summary threshold does, in this chapter."""
    if agent.compaction is not None:
        consequence = "the next request is summarised at once: the model sees a summary of it"
    else:
        consequence = "every request from now on carries it whole"
    return Text.assemble(
        ("warning: ", "bold yellow"),
        f"this message is {format_bytes(size)}, over the {format_bytes(threshold)} "
        f"summary threshold; {consequence}.",
    )


def _instructions_text(instructions: ProjectInstructions | None) -> str:
    """`AGENTS.md, 1.2 KB (always sent to the model)`, or why there are none."""
    if instructions is None:
        return "none (no AGENTS.md or CLAUDE.md from the project root down)"
    sent = format_bytes(len(instructions.text.encode()))
    cut = f", cut from {format_bytes(instructions.size)}" if instructions.truncated else ""
    return f"{instructions.file_name}, {sent}{cut} (always sent to the model)"


def _project_root_text(agent: Agent) -> str:
    """Where `.agent_tutorial/` is read from, said plainly when it is the workspace."""
    if agent.project_root == agent.workspace:
        return "the workspace"
    return str(agent.project_root)


def _usage_text(summary: RunSummary, window: WindowSize | None) -> str:
    usage = summary.last_usage
    if usage is None:
        return "none reported yet"
    prompt, completion = format_count(usage.prompt_tokens), format_count(usage.completion_tokens)
    text = f"{prompt} prompt + {completion} completion tokens"
    if window is not None:
        text += f", {usage.prompt_tokens / window.tokens:.0%} of the window"
    if usage.cached_prompt_tokens is not None:
        text += f", {usage.cached_prompt_tokens:,} cached"
    return text


def _fixed_part_text(fixed_bytes: int, meter: ContextMeter) -> str:
    """The fixed part in bytes and, at the session's bytes per token, in tokens: what a
    small window has left for the conversation is counted in tokens."""
    tokens = meter.calibration.tokens_for(fixed_bytes)
    return (
        f"{format_bytes(fixed_bytes)}, ≈{tokens:,} tok, per request "
        "(system prompt, tool schemas, reminders)"
    )


def _window_text(window: WindowSize | None) -> str:
    if window is None:
        return "unknown (set --context-window, or the server does not say)"
    return f"{window.tokens:,} tokens, {window.output_cap_tokens:,} kept for the reply"


def _history(root: Path) -> History:
    """Prompt history in the project's `.agent_tutorial/history`, kept in memory if that is
    not a plain file in a real directory (never written through a symlink)."""
    try:
        state_dir = ensure_state_folder(root)
    except OSError:
        return InMemoryHistory()
    path = state_dir / "history"
    if state_dir.is_symlink() or not state_dir.is_dir() or not _plain_file_or_missing(path):
        return InMemoryHistory()
    try:  # prompts can hold private details: readable by the user only, like sessions
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    except OSError:
        return InMemoryHistory()
    return FileHistory(str(path))


def _plain_file_or_missing(path: Path) -> bool:
    return not path.is_symlink() and (path.is_file() or not path.exists())


def _share(request_bytes: int, threshold_bytes: int) -> float:
    """How full the request is; a window too small for even the system prompt and the tool
    schemas leaves a threshold of 0, which is full however little is sent."""
    return request_bytes / threshold_bytes if threshold_bytes > 0 else 1.0


def _fill_style(share: float) -> str:
    if share < 0.6:
        return "fg:ansigreen"
    if share < 0.85:
        return "fg:ansiyellow"
    return "fg:ansired bold"
