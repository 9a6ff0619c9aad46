"""The model boundary: one request in, one assistant reply out, and the errors in between.

Adapters raise the `ModelError` family; `core.errors` draws it in the whole error tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.messages import AssistantMessage, ChatMessage

FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "other"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about one tool: its name, purpose and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_prompt_tokens: int | None = None
    """Prompt tokens the provider read from its prefix cache; None when it does not say."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            _add_known(self.cached_prompt_tokens, other.cached_prompt_tokens),
        )


def _add_known(first: int | None, second: int | None) -> int | None:
    """A sum of counts that may be unreported: unknown only when neither was reported."""
    if first is None and second is None:
        return None
    return (first or 0) + (second or 0)


ZERO_USAGE = Usage(0, 0, 0)

DEFAULT_MAX_OUTPUT_TOKENS = 8_192
"""The output cap sent with every request unless configured otherwise."""

MIN_CONTEXT_WINDOW_TOKENS = 256
"""The smallest context window taken, set (`--context-window`) or stated by a server."""
MAX_CONTEXT_WINDOW_TOKENS = 10_000_000
"""Ten million tokens: the largest context windows today."""


def valid_context_window(tokens: int) -> bool:
    """Whether `tokens` is a window this agent works with, whoever names it."""
    return MIN_CONTEXT_WINDOW_TOKENS <= tokens <= MAX_CONTEXT_WINDOW_TOKENS


_OUTPUT_SHARE_OF_WINDOW = 4


def clamp_output_tokens(max_output_tokens: int, context_window_tokens: int | None) -> int:
    """The output cap to send: the configured one, but at most a quarter of a known context
    window, so that a prompt plus the cap still fits (vLLM rejects a request whose prompt
    plus `max_tokens` exceeds the window, as if the prompt alone were too long)."""
    if context_window_tokens is None:
        return max_output_tokens
    return max(1, min(max_output_tokens, context_window_tokens // _OUTPUT_SHARE_OF_WINDOW))


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a model call needs. `on_text` receives streamed text as it arrives."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str | None = None
    """The one tool of `tools` the model must call now (a named `tool_choice`); None leaves
    the choice to the model."""
    on_text: Callable[[str], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ModelReply:
    message: AssistantMessage
    finish_reason: FinishReason
    usage: Usage | None = None


class ModelClient(Protocol):
    """Anything that answers a chat request: the OpenAI adapter, the demo, a scripted fake."""

    def complete(self, request: ModelRequest) -> ModelReply: ...


def make_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    on_text: Callable[[str], None] | None = None,
) -> ModelRequest:
    return ModelRequest(messages=tuple(messages), tools=tuple(tools), on_text=on_text)


class ModelError(AgentTutorialError):
    """A model call failed; `str(error)` is a one-line explanation fit for the user."""


class PromptTooLongError(ModelError):
    """The provider refused the request because it exceeds the context window.
    `window_tokens` is the window the provider's error states, when it states a valid one;
    `prompt_tokens` the refused request's size as the provider counted it, when stated."""

    def __init__(
        self,
        message: str = "",
        *,
        window_tokens: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message)
        self.window_tokens = window_tokens
        self.prompt_tokens = prompt_tokens


class AuthenticationError(ModelError):
    pass


class RateLimitError(ModelError):
    pass


class ModelNotFoundError(ModelError):
    pass


class BadRequestError(ModelError):
    pass


class ProviderError(ModelError):
    pass


class ConnectionFailedError(ModelError):
    pass


class IncompleteStreamError(ModelError):
    pass


class ReplyTimeoutError(ModelError):
    """No complete reply within the request's deadline; not retried, since a server that
    is still working on the request would only be asked to start again."""
