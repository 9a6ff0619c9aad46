"""The circuit breaker for automatic summaries: after `summary_failure_limit` failures in a
row the session stops asking the model for them (a manual `/compact` still works)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SummaryBreaker:
    """Counts summary failures in a row; any success closes it again."""

    limit: int
    failures: int = 0

    @property
    def closed(self) -> bool:
        """True while automatic summaries may still be asked for."""
        return self.failures < self.limit

    def succeeded(self) -> None:
        self.failures = 0

    def failed(self) -> bool:
        """Count one failure; True exactly when this one opened the breaker."""
        self.failures += 1
        return self.failures == self.limit
