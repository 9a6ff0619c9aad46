"""The session's context window, held in one place: the output cap the adapter sends, the
context meter (`/context`, the JSON result) and chapter 8's budget all read it, so a window
learned in the middle of a session changes all of them at once."""

from __future__ import annotations

from agent_tutorial.core.model import DEFAULT_MAX_OUTPUT_TOKENS, clamp_output_tokens


class ContextWindow:
    """The model's context window as this session knows it: set (a flag, the settings, the
    server's answer at start) or learned later from a provider's overflow error. Unknown
    (None) until one of those says it. One per model connection."""

    def __init__(
        self, tokens: int | None = None, *, max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    ) -> None:
        if tokens is not None and tokens <= 0:
            raise ValueError(f"the context window must be positive, got {tokens}")
        if max_output_tokens <= 0:
            raise ValueError(f"max_output_tokens must be positive, got {max_output_tokens}")
        self._tokens = tokens
        self.max_output_tokens = max_output_tokens
        """The output cap as configured; `output_cap_tokens` keeps it within the window."""

    @property
    def tokens(self) -> int | None:
        return self._tokens

    @property
    def output_cap_tokens(self) -> int:
        """The cap each request sends: the configured one, at most a quarter of a known
        window (`clamp_output_tokens`)."""
        return clamp_output_tokens(self.max_output_tokens, self._tokens)

    def learn(self, tokens: int) -> bool:
        """Take a window a provider stated if none is known or it is smaller than the known
        one; whether it was taken. A stated window never widens a known one: the smaller
        is the one every request must fit."""
        if tokens <= 0:
            raise ValueError(f"the context window must be positive, got {tokens}")
        if self._tokens is not None and self._tokens <= tokens:
            return False
        self._tokens = tokens
        return True

    def __repr__(self) -> str:
        return f"ContextWindow({self._tokens!r}, max_output_tokens={self.max_output_tokens!r})"
