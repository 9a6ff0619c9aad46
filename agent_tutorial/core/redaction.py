"""The redaction boundary: text in, the same text with secrets masked out.

`features.redaction.Redactor` is the one implementation; the composition root builds it
and hands it to whatever shows text that may hold a secret: hooks' outcomes
(`core.hooks`) and the model adapter's error messages (`adapters.openai_chat`).
"""

from __future__ import annotations

from typing import Protocol


class RedactedText(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def count(self) -> int: ...


class TextRedaction(Protocol):
    """Masks secrets in text (`features.redaction.Redactor` is one)."""

    def redact(self, text: str) -> RedactedText: ...
