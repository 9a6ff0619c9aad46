"""`/undo` and `/rewind` in the REPL: take back the last prompt's turn (or any earlier
one), its files from the checkpoint store and its messages from the conversation.

Files first: when one changed since the agent's turn (the user edited it), it is named and
the user is asked before it is overwritten; a no leaves files and conversation as they
were. The conversation is cut with a rewind record in the session log
(`Conversation.rewind`), so a resumed session comes back as it was left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prompt_toolkit import PromptSession
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from rich.console import Console
from rich.text import Text

from agent_tutorial.conversation import Conversation
from agent_tutorial.core.messages import UserMessage
from agent_tutorial.core.text import printable
from agent_tutorial.features.checkpoints import (
    ProjectCheckpoints,
    UndoError,
    first_line,
    prompt_starts,
)
from agent_tutorial.render import error_line
from agent_tutorial.rewind_picker import RewindScope, pick_scope, pick_turn


@dataclass
class Rewinder:
    conversation: Conversation
    err: Console
    confirmation: PromptSession[str]
    """Asks yes or no (not a prompt to remember)."""
    input: Input
    output: Output
    columns: Callable[[], int]

    def undo(self) -> None:
        """`/undo`: the last prompt's turn, files and conversation."""
        starts = prompt_starts(self.conversation.agent.runner.history)
        if not starts:
            self.err.print("nothing to undo in this conversation", style="yellow")
            return
        self._rewind_to(starts[-1], "both")

    def rewind(self) -> None:
        """`/rewind`: a prompt picked from the session's, then what to take back."""
        history = self.conversation.agent.runner.history
        starts = prompt_starts(history)
        if not starts:
            self.err.print("nothing to rewind in this conversation", style="yellow")
            return
        prompts = [(index, _text(history[index])) for index in reversed(starts)]
        picked = pick_turn(prompts, columns=self.columns(), input=self.input, output=self.output)
        scope = None if picked is None else pick_scope(input=self.input, output=self.output)
        if picked is None or scope is None:
            self.err.print("not rewound", style="dim")
            return
        self._rewind_to(picked, scope)

    def _rewind_to(self, index: int, scope: RewindScope) -> None:
        if scope != "conversation" and not self._restore_files(index):
            return
        if scope != "files":
            prompt = _text(self.conversation.agent.runner.history[index])
            self.conversation.rewind(index)
            shown = printable(first_line(prompt))
            self.err.print(Text(f"conversation rewound to before: {shown}", style="dim"))

    def _restore_files(self, index: int) -> bool:
        """Put back the files of every checkpointed turn from the prompt at `index` on;
        False when nothing may go on (a no to overwriting, or a failure)."""
        checkpoints = ProjectCheckpoints(self.conversation.setup.project.root)
        session_id = self.conversation.session_id
        try:
            turns = checkpoints.turns_since(session_id, index)
            if turns == 0:
                self.err.print("no files to restore: those turns changed none", style="dim")
                return True
            plan = checkpoints.plan_undo(session_id, turns)
            if plan.conflicts and not self._overwrite_agreed(plan.conflicts):
                self.err.print("nothing restored", style="yellow")
                return False
            failures = checkpoints.apply_undo(plan)
        except UndoError as error:
            self.err.print(error_line(str(error), "cannot restore the files"))
            return False
        for change in plan.changes:
            self.err.print(Text(f"{change.action:<9} {printable(change.path)}"))
        for failure in failures:
            self.err.print(error_line(failure, "not restored"))
        return not failures

    def _overwrite_agreed(self, paths: tuple[str, ...]) -> bool:
        names = ", ".join(printable(path) for path in paths)
        self.err.print(Text(f"changed since the agent's turn: {names}", style="yellow"))
        try:
            answer = self.confirmation.prompt("Overwrite them? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        return answer.strip().lower() in {"y", "yes"}


def _text(message: object) -> str:
    return message.content if isinstance(message, UserMessage) else ""
