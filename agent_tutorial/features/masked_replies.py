"""What the model writes, with the secrets the agent knows masked before anyone sees it:
the streamed answer (the terminal, stream-json), and the reply's text as canonical history,
the session log and the JSON result record it. A model can write a secret it was given in
a prompt or read where redaction could not see it; the README promises it is masked.

Tool calls' arguments are not touched: a call runs as the model wrote it. So this wraps the
reader of calls written as text (`adapters.text_tool_calls`), never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from agent_tutorial.core.model import ModelClient, ModelReply, ModelRequest
from agent_tutorial.features.redaction import AnswerMask, Redactor


class MaskedReplies:
    """A `ModelClient` around another one whose replies' text is redacted."""

    def __init__(self, model: ModelClient, redactor: Redactor) -> None:
        self.model = model
        self._redactor = redactor

    def complete(self, request: ModelRequest) -> ModelReply:
        if request.on_text is None:
            return self._masked(self.model.complete(request))
        mask = AnswerMask(self._redactor)
        reply = self.model.complete(replace(request, on_text=_passing(mask, request.on_text)))
        _show(mask.finish(), request.on_text)
        return self._masked(reply)

    def _masked(self, reply: ModelReply) -> ModelReply:
        content = reply.message.content
        if not content:
            return reply
        masked = self._redactor.redact(content)
        if not masked.count:
            return reply
        return replace(reply, message=replace(reply.message, content=masked.text))


def _passing(mask: AnswerMask, on_text: Callable[[str], None]) -> Callable[[str], None]:
    return lambda piece: _show(mask.feed(piece), on_text)


def _show(text: str, on_text: Callable[[str], None]) -> None:
    if text:
        on_text(text)
