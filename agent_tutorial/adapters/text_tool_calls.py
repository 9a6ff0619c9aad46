"""A `ModelClient` around another one that reads tool calls a model wrote as text
(`text_calls` says which shapes) and returns them as real calls, so canonical history,
pairing, permissions, hooks, sessions and compaction never see the difference.

- `auto`: the request goes out as it is, tools and all; a reply whose text is calls comes
  back as those calls, and from then on the session talks to the model as `text` does: a
  server that returned the calls as text does not parse this model's calls, and its chat
  template then shows the model its calls and results in a form it was not writing (in
  three runs of the six real tasks the 1.5B model repeated an identical call in three or
  four tasks and echoed a result as its answer in two; in two runs after the switch, it
  repeated one in at most one task and echoed none). A bare `functions.NAME:`
  (llama-cpp-python's "auto", which does not call) is asked again once with a named
  `tool_choice`, which that server honours (a native call then: no switch). A reply that
  repeats the tool list the template showed (`<tools>{"type": "function", …`) instead of
  calling or answering switches too, and the request is sent again that way: it happened
  in one task of a chapter 8 run, and the same request in the text protocol brought a call.
- `text`: no tools on the wire; the system prompt describes them (`text_protocol`) and the
  reply is read the same way.

A reply whose calls repeat a call a tool result showed this session (a README's fenced
example the model read, then quoted) is an answer, not a call: the wrapper sees every
request's tool results, so the core never needs to know calls can be written as text.

Streamed text passes through `HeldCallText`, so the call text is never shown as an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal, TypeAlias

from agent_tutorial.adapters.text_call_stream import HeldCallText
from agent_tutorial.adapters.text_calls import (
    CallKey,
    CallsInText,
    Offered,
    calls_quoted_in,
    echoes_tool_list,
    offered_tools,
    quotes_any,
    read_calls,
)
from agent_tutorial.adapters.text_protocol import as_text_protocol
from agent_tutorial.core.messages import ToolCall, ToolMessage, assistant_message, new_call_id
from agent_tutorial.core.model import ModelClient, ModelReply, ModelRequest, Usage

SwitchReason: TypeAlias = Literal["calls_in_text", "echoed_tool_list"]
"""Why `auto` turned to describing the tools in the prompt."""


class TextToolCalls:
    """Reads calls written as text; in `auto`, `on_switch` is told once why the session
    turned to the text protocol (the composition root builds one of these per session)."""

    def __init__(
        self,
        model: ModelClient,
        mode: Literal["auto", "text"],
        on_switch: Callable[[SwitchReason], None] = lambda _reason: None,
    ) -> None:
        self.model = model
        self.mode = mode
        self._on_switch = on_switch
        self.describes_tools = mode == "text"
        """Whether requests carry the tools in the system prompt instead of on the wire:
        always in `text` mode, in `auto` once the model wrote a call as text."""
        self._quoted: dict[ToolMessage, frozenset[CallKey]] = {}
        """The calls each tool result of this session showed, read once per result and
        kept when compaction drops the result from later requests."""

    def complete(self, request: ModelRequest) -> ModelReply:
        offered = offered_tools(request.tools)
        sent = as_text_protocol(request) if self.describes_tools else request
        if not offered:
            return self.model.complete(sent)
        self._remember_quoted_calls(request, offered)
        held = None if request.on_text is None else HeldCallText(request.on_text, offered)
        reply = self.model.complete(replace(sent, on_text=held))
        found = self._calls_in(reply, offered)
        echoed = found is None and self._echoes_tool_list(reply, offered)
        if held is not None:
            held.finish(were_calls=found is not None or echoed)
        if echoed:
            self._switch_to_text("echoed_tool_list")
            again = self.complete(request)
            return replace(again, usage=_added(reply.usage, again.usage))
        if found is None:
            return reply
        if found.named_tool is not None:
            return self._ask_for_named_tool(request, reply, found)
        self._switch_to_text("calls_in_text")
        return _as_calls(reply, found, reply.usage)

    def _echoes_tool_list(self, reply: ModelReply, offered: Offered) -> bool:
        """Only while the tools still travel natively: in the text protocol the request
        sent would be the same again."""
        text = reply.message.content or ""
        return (
            not self.describes_tools
            and not reply.message.tool_calls
            and echoes_tool_list(text, offered)
        )

    def _calls_in(self, reply: ModelReply, offered: Offered) -> CallsInText | None:
        """The calls a reply without native ones wrote as text. A bare `functions.NAME:` can
        be asked again only where tools travel natively; in text mode it stays text."""
        if reply.message.tool_calls:
            return None
        found = read_calls(reply.message.content or "", offered)
        if found is not None and found.named_tool is not None and self.mode == "text":
            return None
        if found is not None and quotes_any(found, frozenset().union(*self._quoted.values())):
            return None
        return found

    def _remember_quoted_calls(self, request: ModelRequest, offered: Offered) -> None:
        for message in request.messages:
            if isinstance(message, ToolMessage) and message not in self._quoted:
                self._quoted[message] = calls_quoted_in(message.content, offered)

    def _ask_for_named_tool(
        self, request: ModelRequest, reply: ModelReply, found: CallsInText
    ) -> ModelReply:
        """Once more with `tool_choice` naming the tool; its call (native or written as
        text) is the reply. Not streamed: it is a call, not an answer. If it brings no call,
        the first reply stands as the answer."""
        assert found.named_tool is not None
        again = self.model.complete(replace(request, tool_choice=found.named_tool, on_text=None))
        usage = _added(reply.usage, again.usage)
        if again.message.tool_calls:
            calls = replace(again.message, content=found.prose or None)
            return replace(again, message=calls, usage=usage)
        named = offered_tools(tool for tool in request.tools if tool.name == found.named_tool)
        written = read_calls(again.message.content or "", named)
        if written is not None and written.calls:
            self._switch_to_text("calls_in_text")
            return _as_calls(again, replace(written, prose=found.prose), usage)
        if request.on_text is not None:
            request.on_text(reply.message.content or "")
        return replace(reply, usage=usage)

    def _switch_to_text(self, reason: SwitchReason) -> None:
        """In `auto`, the first call written as text (or tool list repeated): said once, and
        the tools are described in the prompt from the next request on (in `text` mode it
        is the protocol itself)."""
        if not self.describes_tools:
            self.describes_tools = True
            self._on_switch(reason)


def _as_calls(reply: ModelReply, found: CallsInText, usage: Usage | None) -> ModelReply:
    calls = tuple(
        ToolCall(id=new_call_id(), name=call.name, arguments=call.arguments) for call in found.calls
    )
    message = assistant_message(found.prose or None, calls)
    # A reply cut at its cap stays cut (the loop reports it); any other finish is a call.
    finish = reply.finish_reason if reply.finish_reason in ("length", "content_filter") else None
    return ModelReply(message, finish or "tool_calls", usage)


def _added(first: Usage | None, second: Usage | None) -> Usage | None:
    if first is None or second is None:
        return first or second
    return first + second
