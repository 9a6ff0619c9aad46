"""The model's context window as a byte budget: how many bytes of request history fit
once the reply's reserve and what every request carries besides the history (system
prompt, tool schemas, reminders) are taken out, at the bytes per token this session has
measured. Without a known window there is no budget and the byte thresholds stand.

Also the sum both strategies narrow with: the fewest savings that bring a request back
under its budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent_tutorial.core.model import DEFAULT_MAX_OUTPUT_TOKENS, clamp_output_tokens
from agent_tutorial.features.compact_framing import uses_compact_framing
from agent_tutorial.features.compaction.settings import CompactionSettings

_DEFAULTS = CompactionSettings()

Candidates = Callable[[], Sequence[tuple[int, int]]]
"""The tool groups micro could still clear, oldest first, as (canonical group, bytes that
clearing it saves); computed only when a strategy asks."""


class TokenCalibration:
    """Bytes per token as a moving average of (bytes sent / prompt tokens reported), with
    the start, the weight and the plausible range of `settings`."""

    def __init__(self, settings: CompactionSettings = _DEFAULTS) -> None:
        self.bytes_per_token = settings.initial_bytes_per_token
        self.observations = 0
        self._share = settings.calibration_share
        self._plausible = settings.min_bytes_per_token, settings.max_bytes_per_token
        self._uncalibrated_max = settings.uncalibrated_max_bytes_per_token

    def observe(self, request_bytes: int, prompt_tokens: int) -> None:
        if prompt_tokens <= 0:
            return  # no count (an empty prompt reported as 0 tokens)
        ratio = request_bytes / prompt_tokens
        low, high = self._plausible
        if not low <= ratio <= high:
            return
        share = self._share
        self.bytes_per_token = (1 - share) * self.bytes_per_token + share * ratio
        self.observations += 1

    def learn_from_refusal(self, request_bytes: int, prompt_tokens: int) -> None:
        """A refused request's count, as its provider stated it: taken whole rather than
        averaged in (the next request must fit by it), if it is plausible at all."""
        if prompt_tokens <= 0:
            return
        ratio = request_bytes / prompt_tokens
        low, high = self._plausible
        if low <= ratio <= high:
            self.bytes_per_token = ratio
            self.observations += 1

    @property
    def in_use(self) -> float:
        """The bytes per token estimates use: uncalibrated, no more than
        `uncalibrated_max_bytes_per_token`."""
        if self.observations:
            return self.bytes_per_token
        return min(self.bytes_per_token, self._uncalibrated_max)

    def tokens_for(self, utf8_bytes: int) -> int:
        return round(utf8_bytes / self.in_use)

    def bytes_for(self, tokens: int) -> int:
        return int(tokens * self.in_use)


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


@dataclass(frozen=True, slots=True)
class WindowAccounting:
    """How a window in tokens becomes a budget in bytes of history, short of the window
    itself (which reaches the manager once, as `context_window_tokens`): what every request
    carries besides the history, the configured reply cap, and the calibration (shared with
    the session's meter, so each reply refines it)."""

    reserved_bytes: int = 0
    """Bytes every request spends outside the history: system prompt, tool schemas and
    the reminder allowance."""
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    """The output cap as configured; `WindowSize.of` clamps it to the window."""
    calibration: TokenCalibration = field(default_factory=TokenCalibration)
    compact_reserved_bytes: int | None = None
    """`reserved_bytes` in the compact form requests take in a small window
    (`compact_framing`); None when requests are never compact."""

    def __post_init__(self) -> None:
        for name in ("reserved_bytes", "compact_reserved_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.max_output_tokens <= 0:
            raise ValueError(f"max_output_tokens must be positive, got {self.max_output_tokens}")

    def budget(self, window_tokens: int | None) -> HistoryBudget:
        """The history budget of a window (of none: no budget)."""
        window = None
        if window_tokens is not None:
            window = WindowSize.of(window_tokens, self.max_output_tokens)
        return HistoryBudget(window, self.reserved_for(window_tokens), self.calibration)

    def reserved_for(self, window_tokens: int | None) -> int:
        """What every request carries besides its history, in the form it takes in a
        window of `window_tokens`."""
        if self.compact_reserved_bytes is not None and uses_compact_framing(window_tokens):
            return self.compact_reserved_bytes
        return self.reserved_bytes


def fewest_to_fit(excess_bytes: int, savings: Sequence[int]) -> int:
    """How many of `savings` (bytes each step frees, in the order they must be taken) bring
    a request `excess_bytes` over its budget back within it: the fewest that free at least
    the excess, or all of them when even that is not enough."""
    if excess_bytes <= 0:
        return 0
    freed = 0
    for count, saving in enumerate(savings, start=1):
        freed += saving
        if freed >= excess_bytes:
            return count
    return len(savings)
