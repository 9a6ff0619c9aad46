"""How large the one retry after a context overflow may be: always smaller than the refused
request, and under the window the provider stated, sized with the provider's own count of
the refused request where its error states one (at most half the refused size where not).

Sizes are bytes of messages and tool schemas as `request_utf8_bytes` counts them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the provider refused as too long, and what its error stated."""

    request_bytes: int
    """The refused request: bytes of its messages and tool schemas."""
    history_bytes: int
    """The part of it that was request history (what compaction can shrink)."""
    prompt_tokens: int | None = None
    """The refused request's size as the provider counted it, when stated."""
    reserved_bytes: int | None = None
    """What its budget reserved besides the history (`WindowAccounting.reserved_for` of the
    window it was built for); None: the same as the retry's. A window learned from the
    refusal may shrink it: a retry in a window of 16,384 tokens or less carries the compact
    fixed part, whatever form the refused request went out in."""

    def __post_init__(self) -> None:
        if not 0 <= self.history_bytes <= self.request_bytes:
            raise ValueError(
                f"history_bytes must be within 0..request_bytes ({self.request_bytes}), "
                f"got {self.history_bytes}"
            )

    @property
    def stated_bytes_per_token(self) -> float | None:
        """Bytes per token by the provider's own count of this request, when it stated one
        (however implausible: it is the count this very request was refused by)."""
        if self.prompt_tokens is None or self.prompt_tokens <= 0:
            return None
        return self.request_bytes / self.prompt_tokens


def retry_limit_bytes(
    refusal: Refusal, prompt_room_tokens: int | None, unstated_share: float
) -> int:
    """The largest retry, in bytes of messages and tool schemas: under the prompt's room
    in the stated window at the provider's bytes per token when both are known, else at
    most `unstated_share` of the refused request; below the refused request always."""
    smaller = refusal.request_bytes - 1
    per_token = refusal.stated_bytes_per_token
    if per_token is None or prompt_room_tokens is None:
        return min(smaller, int(refusal.request_bytes * unstated_share))
    return max(0, min(smaller, int(prompt_room_tokens * per_token)))


def retry_history_limit(refusal: Refusal, request_limit: int, reserved_bytes: int) -> int:
    """`request_limit` as bytes of request history: less the retry's `reserved_bytes` (its
    fixed part, in the form it goes out in, and the reminders' allowance: it may carry a
    reminder the refused one did not), and less what the refused request carried beyond its
    own reserve too, when it carried more (a reminder over the allowance)."""
    reserve = reserved_bytes if refusal.reserved_bytes is None else refusal.reserved_bytes
    beyond_reserve = refusal.request_bytes - refusal.history_bytes - reserve
    return max(0, request_limit - reserved_bytes - max(0, beyond_reserve))
