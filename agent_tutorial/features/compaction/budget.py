"""The model's context window as a byte budget: how many bytes of request history fit
once the reply's reserve and what every request carries besides the history (system
prompt, tool schemas, reminders) are taken out, at the bytes per token this session has
measured. Without a known window there is no budget and the byte thresholds stand.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_tutorial.core.model import DEFAULT_MAX_OUTPUT_TOKENS, clamp_output_tokens

INITIAL_BYTES_PER_TOKEN = 3.5
"""A conservative start: English prose runs near 4 bytes a token, JSON-escaped code lower."""
CALIBRATION_WEIGHT = 0.3
"""How much one observation moves the moving average."""
_PLAUSIBLE_BYTES_PER_TOKEN = (1.0, 8.0)  # outside this a count is not about this request


class TokenCalibration:
    """Bytes per token as a moving average of (bytes sent / prompt tokens reported)."""

    def __init__(self, bytes_per_token: float = INITIAL_BYTES_PER_TOKEN) -> None:
        self.bytes_per_token = bytes_per_token
        self.observations = 0

    def observe(self, request_bytes: int, prompt_tokens: int) -> None:
        if request_bytes <= 0 or prompt_tokens <= 0:
            return
        ratio = request_bytes / prompt_tokens
        low, high = _PLAUSIBLE_BYTES_PER_TOKEN
        if not low <= ratio <= high:
            return
        weight = CALIBRATION_WEIGHT
        self.bytes_per_token = (1 - weight) * self.bytes_per_token + weight * ratio
        self.observations += 1

    def tokens_for(self, utf8_bytes: int) -> int:
        return round(utf8_bytes / self.bytes_per_token)

    def bytes_for(self, tokens: int) -> int:
        return int(tokens * self.bytes_per_token)


@dataclass(frozen=True, slots=True)
class WindowSize:
    """A known context window and the part of it kept for the reply."""

    tokens: int
    output_cap_tokens: int

    @classmethod
    def of(cls, tokens: int, max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS) -> WindowSize:
        """The reply's reserve is the output cap the adapter sends: the configured one, at
        most a quarter of the window (`clamp_output_tokens`)."""
        if tokens <= 0:
            raise ValueError(f"the context window must be positive, got {tokens}")
        return cls(tokens, clamp_output_tokens(max_output_tokens, tokens))

    @property
    def prompt_tokens(self) -> int:
        """The most a prompt may hold."""
        return self.tokens - self.output_cap_tokens


@dataclass(frozen=True, slots=True)
class HistoryBudget:
    """The window, the bytes every request spends outside the history, and the calibration
    that turns tokens into bytes."""

    window: WindowSize | None
    reserved_bytes: int
    calibration: TokenCalibration

    def history_bytes(self) -> int | None:
        """Bytes of request history that fit, or None when the window is unknown."""
        if self.window is None:
            return None
        return max(0, self.calibration.bytes_for(self.window.prompt_tokens) - self.reserved_bytes)

    @classmethod
    def for_window(cls, tokens: int | None) -> HistoryBudget:
        """A budget for a window alone: the default reply reserve, nothing reserved, the
        initial calibration."""
        window = None if tokens is None else WindowSize.of(tokens)
        return cls(window, 0, TokenCalibration())
