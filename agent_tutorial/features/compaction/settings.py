"""Chapter 8's numbers in one frozen settings object: the only place their defaults live.

`[compaction]` in config.toml builds one of these; `CompactionManager` takes one. A
`..._share` is a fraction, of the history budget unless its docstring says of what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import Field

CompactionStrategy = Literal["seed", "cache-aware"]
STRATEGIES: tuple[CompactionStrategy, ...] = get_args(CompactionStrategy)

# Upper bounds, checked when `[compaction]` is read (lower bounds: `__post_init__`). Far past
# any real transcript, and low enough that no size overflows an index; a share is at most
# the whole.
Bytes = Annotated[int, Field(le=1024 * 1024 * 1024)]
Groups = Annotated[int, Field(le=1_000_000)]
Count = Annotated[int, Field(le=1_000_000)]
Share = Annotated[float, Field(le=1)]
PerToken = Annotated[float, Field(le=1_000_000)]


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """Where each layer cuts; every size is in UTF-8 bytes of the transcript."""

    persist_threshold_bytes: Bytes = 30_000
    """Layer 1: a tool result larger than this goes to a file; the model sees a preview."""

    batch_budget_bytes: Bytes = 200_000
    """Layer 1: the most one batch of results may add inline; the largest go to files first."""

    preview_head_bytes: Bytes = 2_000
    """Layer 1: bytes of a persisted result shown from its start."""

    preview_tail_bytes: Bytes = 2_000
    """Layer 1: bytes of a persisted result shown from its end."""

    window_persist_share: Share = 0.25
    """Layer 1, window known: a result larger than this share of the history budget goes to
    a file too (the threshold is the smaller of this and `persist_threshold_bytes`)."""

    window_batch_share: Share = 0.5
    """Layer 1, window known: one batch adds at most this share of the history budget
    inline (or `batch_budget_bytes`, if smaller)."""

    window_preview_share: Share = 0.25
    """Layer 1, window known: each preview, head and tail, holds at most this share of the
    persist threshold in force, so a preview is always much smaller than what it stands for."""

    snip_max_groups: Groups = 50
    """Layer 2: beyond this many message groups, snip omits the middle ones."""

    snip_keep_head_groups: Groups = 3
    """Layer 2: the groups kept at the start, before the snip marker."""

    keep_recent_tool_groups: Groups = 3
    """Layer 3: the most recent tool groups whose results micro keeps verbatim."""

    proactive_threshold_bytes: Bytes = 50_000
    """Layer 4: a request still larger than this after snip and micro is summarised."""

    reactive_tail_groups: Groups = 5
    """Layer 4, after an overflow reply: the recent groups kept whole after the summary."""

    summary_failure_limit: Count = 3
    """Layer 4: after this many automatic summaries fail in a row, the session stops asking
    the model for them (a manual `/compact` still works)."""

    extractive_goal_chars: Count = 1_000
    """The extractive summary (the fallback when no model summary can be had, and the demo
    model's): its goal, the latest user request, is cut to this many characters..."""

    extractive_item_chars: Count = 200
    """...and every other item (a finding, a path, a step, a constraint) to this many."""

    extractive_max_findings: Count = 6
    """The extractive summary keeps at most this many key findings (the first lines of the
    latest results)..."""

    extractive_max_files: Count = 20
    """...this many files read or changed..."""

    extractive_max_remaining: Count = 10
    """...this many remaining steps (the open todos of the latest plan)..."""

    extractive_max_constraints: Count = 6
    """...and this many user constraints (the earlier requests)."""

    strategy: CompactionStrategy = "seed"
    """How the layer boundaries move: "seed" (the chapter's pipeline, exactly) or
    "cache-aware" (in batches, so the request prefix stays stable between events)."""

    context_window_tokens: int | None = None
    """The model's context window in tokens, when known; None leaves the byte thresholds
    above as they are. The agent fills it from `Settings.context_window_tokens` (a value
    written under `[compaction]` in config.toml is read as that one)."""

    reminder_allowance_bytes: Bytes = 2_000
    """Window known: bytes of it kept for request-only reminders (the plan, the continue
    turn), besides the system prompt and tool schemas every request carries."""

    initial_bytes_per_token: PerToken = 3.5
    """Window known: what a token is taken to weigh in bytes until the provider's own counts
    say otherwise. Conservative: English prose runs near 4 bytes a token, JSON-escaped code
    lower."""

    calibration_share: Share = 0.3
    """The share of the bytes-per-token estimate that each reply's measurement (bytes sent /
    prompt tokens reported) makes up: a moving average, new = (1 - share) × old + share ×
    measured."""

    min_bytes_per_token: PerToken = 1.0
    """A measurement below this many bytes per token..."""

    max_bytes_per_token: PerToken = 8.0
    """...or above this many is not about the request (a count from another model, a cached
    total) and is ignored."""

    uncalibrated_max_bytes_per_token: PerToken = 4.0
    """Window known, no count yet: a token is taken to weigh at most this many bytes, so an
    estimate is never below bytes ÷ 4 (JSON and code run below 4 in every tokenizer)."""

    unstated_retry_share: Share = 0.5
    """After an overflow error that states no count of the refused request: the retry is
    at most this share of the refused request's bytes."""

    cache_keep_recent_tool_groups: Groups = 5
    """Cache-aware: the most recent tool groups micro never clears."""

    cache_high_mark_bytes: Bytes = 100_000
    """Cache-aware: micro clears only once the request passes this (at most
    `cache_high_mark_share` of the window's budget)..."""

    cache_low_mark_bytes: Bytes = 30_000
    """...and then clears oldest-first, in one step, down to this (at most
    `cache_low_mark_share` of the window's budget)."""

    cache_high_mark_share: Share = 0.5
    """Cache-aware, window known: the high mark is at most this share of the history
    budget, so micro starts clearing well before the window is full."""

    cache_low_mark_share: Share = 0.2
    """Cache-aware, window known: the low mark is at most this share of the history budget,
    so one clearing step leaves room for many requests before the next."""

    cache_clear_at_least_bytes: Bytes = 40_000
    """Cache-aware: the least one micro step clears, so a step is worth the cache it breaks."""

    cache_snip_max_groups: Groups = 120
    """Cache-aware: beyond this many groups snip cuts, in one step..."""

    cache_snip_keep_groups: Groups = 50
    """...down to this many (the first `snip_keep_head_groups` among them)."""

    cache_summary_threshold_bytes: Bytes = 160_000
    """Cache-aware, no window known: a request still larger after snip and micro is
    summarised. With a window, `cache_summary_share` of its budget."""

    cache_summary_share: Share = 0.75
    """Cache-aware, window known: a request still larger than this share of the history
    budget after snip and micro is summarised (the rest of the budget is the room the
    summary's tail and the next results grow into)."""

    def __post_init__(self) -> None:
        for name in ("persist_threshold_bytes", "batch_budget_bytes", "proactive_threshold_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("preview_head_bytes", "preview_tail_bytes", "reactive_tail_groups"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.preview_head_bytes == 0 and self.preview_tail_bytes == 0:
            raise ValueError("preview_head_bytes and preview_tail_bytes cannot both be 0")
        if self.reminder_allowance_bytes < 0:
            raise ValueError(
                f"reminder_allowance_bytes must be >= 0, got {self.reminder_allowance_bytes}"
            )
        for name in SHARE_FIELDS:
            check_share(name, getattr(self, name))
        for name in COUNT_FIELDS:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        self._check_bytes_per_token()
        check_micro_settings(self.keep_recent_tool_groups)
        check_snip_settings(self.snip_max_groups, self.snip_keep_head_groups)
        check_strategy(self.strategy)
        self._check_cache_aware()
        if self.context_window_tokens is not None and self.context_window_tokens <= 0:
            raise ValueError(
                f"context_window_tokens must be positive, got {self.context_window_tokens}"
            )

    def _check_bytes_per_token(self) -> None:
        low, initial, high = (
            self.min_bytes_per_token,
            self.initial_bytes_per_token,
            self.max_bytes_per_token,
        )
        if not 0 < low <= initial <= high:
            raise ValueError(
                "bytes per token must satisfy 0 < min_bytes_per_token <= initial_bytes_per_token"
                f" <= max_bytes_per_token, got {low}, {initial}, {high}"
            )

    def _check_cache_aware(self) -> None:
        if self.cache_keep_recent_tool_groups < 0:
            raise ValueError("cache_keep_recent_tool_groups must be >= 0")
        if not 0 < self.cache_low_mark_bytes < self.cache_high_mark_bytes:
            raise ValueError("cache marks must satisfy 0 < low < high")
        if self.cache_clear_at_least_bytes < 0:
            raise ValueError("cache_clear_at_least_bytes must be >= 0")
        if not self.snip_keep_head_groups + 2 <= self.cache_snip_keep_groups:
            raise ValueError("cache_snip_keep_groups must exceed snip_keep_head_groups + 1")
        if self.cache_snip_keep_groups >= self.cache_snip_max_groups:
            raise ValueError("cache_snip_keep_groups must be below cache_snip_max_groups")
        if self.cache_summary_threshold_bytes <= 0:
            raise ValueError("cache_summary_threshold_bytes must be positive")


SHARE_FIELDS = (
    "window_persist_share",
    "window_batch_share",
    "window_preview_share",
    "calibration_share",
    "cache_high_mark_share",
    "cache_low_mark_share",
    "cache_summary_share",
    "unstated_retry_share",
)
COUNT_FIELDS = (
    "summary_failure_limit",
    "extractive_goal_chars",
    "extractive_item_chars",
    "extractive_max_findings",
    "extractive_max_files",
    "extractive_max_remaining",
    "extractive_max_constraints",
)


def share_of(budget: int, share: float) -> int:
    """What a `..._share` field means: that fraction of `budget`, rounded down to whole bytes."""
    return int(budget * share)


def check_share(name: str, share: float) -> None:
    """A share of a budget: more than nothing, at most all of it."""
    if not 0 < share <= 1:
        raise ValueError(f"{name} must be above 0 and at most 1, got {share}")


def check_snip_settings(max_groups: int, keep_head_groups: int) -> None:
    if max_groups < 3:
        raise ValueError(f"snip max_groups must be at least 3, got {max_groups}")
    if not 0 <= keep_head_groups <= max_groups - 2:
        raise ValueError(
            f"snip keep_head_groups must be between 0 and max_groups - 2 ({max_groups - 2}), "
            f"got {keep_head_groups}"
        )


def check_micro_settings(keep_recent_tool_groups: int) -> None:
    if keep_recent_tool_groups < 0:
        raise ValueError(f"keep_recent_tool_groups must be >= 0, got {keep_recent_tool_groups}")


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"compaction strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
