"""Secret redaction: one step between a tool and everything that sees its result (hooks,
events, the session log, chapter 8's artifacts and the model), and the mask on the model
adapter's error messages (a server may echo the key back). One `Redactor` implements both.

Two kinds of secret are masked. Known values, the API key in use, the values of
secret-looking variables in the environment or `.agent_tutorial/.env` and the password of
any URL there (a proxy's `http://user:password@host`, the base URL's), become
`[REDACTED:NAME]`; well-known token shapes (`sk-`, `pk-` and `rk-` keys, bearer tokens,
GitHub tokens, AWS access key ids, Slack tokens, PEM private keys, JWTs) become
`[REDACTED:kind]`, and so does the password of every URL
(`http://user:[REDACTED:url_password]@host`), always. Text that
arrives in pieces (a command's output) is redacted as a stream that holds back enough of
its end that a secret split across two pieces is still caught whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, replace

from agent_tutorial.core.tools import ToolResult

SECRET_NAME_WORDS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")
"""A variable whose name contains one of these (in any case) holds a secret."""
MIN_SECRET_CHARS = 8
"""Shorter values are not masked: `EMPTY` or `none` would otherwise vanish everywhere."""
STREAM_OVERLAP_CHARS = 16 * 1024
"""Text a stream holds back for the next piece: longer than any token shape matched here,
including a 4096-bit RSA private key in PEM (about 3,300 characters)."""
STREAM_BATCH_CHARS = 64 * 1024
"""A stream scans once this much has arrived beyond what it holds back, however small the
pieces: each scan re-reads the held text, which would dominate with 4 KiB pipe reads (5x
slower, measured)."""
MAX_HELD_CHARS = 256 * 1024
"""A match still growing at the end of a stream's buffer is held back at most this far;
past it, it is masked as it stands (a 'secret' this long is not one of the shapes)."""

# Each shape is (kind, core, pattern): the pattern is the core plus boundary checks. Text is
# scanned for the cores alone, which start with a literal and need no lookbehind, so the
# scan runs at C speed; the full pattern then confirms each candidate.
TOKEN_SHAPES: tuple[tuple[str, str, str], ...] = (
    (
        "private_key",
        r"-----BEGIN ",
        # A whole block, or (when its end is missing) the key material that follows: its
        # `Name: value` header lines, one blank line, then whole lines of base64 (the last
        # may be cut off), so the text after a cut-short key survives.
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*"
        r"PRIVATE KEY-----|(?:\r?\n[A-Za-z-]+: [^\r\n]*)*(?:\r?\n(?=\r?\n))?"
        r"(?:\r?\n[A-Za-z0-9+/=]+(?=\r?\n|\Z))*)",
    ),
    (
        # OpenAI-style secret keys, and the `pk-`/`rk-` keys other providers echo back.
        "api_key",
        r"(?i:[spr]k)-[A-Za-z0-9_-]{8}",
        r"(?<![A-Za-z0-9_-])(?i:[spr]k)-[A-Za-z0-9_-]{8,}",
    ),
    (
        # An `Authorization: Bearer …` value a server quotes back. The token needs eight
        # characters and a capital or a digit after its first, so that prose such as
        # "Bearer authentication" is left alone.
        "bearer_token",
        r"(?i:bearer)[ \t]",
        r"(?<![A-Za-z0-9_])(?i:bearer)[ \t]+(?=[A-Za-z0-9._~+/=-]{8})"
        r"[A-Za-z0-9._~+/-][a-z._~+/-]*[A-Z0-9][A-Za-z0-9._~+/=-]*",
    ),
    (
        "github_token",
        r"gh[pousr]_[A-Za-z0-9]{20}|github_pat_[A-Za-z0-9_]{20}",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    ),
    (
        "aws_access_key_id",
        r"(?:AKIA|ASIA)[A-Z0-9]{16}",
        r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])",
    ),
    (
        "slack_token",
        r"xox[baprs]-[A-Za-z0-9-]{10}",
        r"(?<![A-Za-z0-9])xox[baprs]-[A-Za-z0-9-]{10,}",
    ),
    (
        "jwt",
        r"eyJ[A-Za-z0-9_-]{8}",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    ),
)


# A URL's password: `scheme://user:password@`. The user may hold an `@`; the password runs
# to the last `@` before the host, as `urlsplit` reads it. Matched even where the token
# shapes are off (`redact_secrets = false`): a password in a URL is never meant to be seen.
URL_PASSWORD = (
    "url_password",
    r"://",
    r"://(?P<url_user>[^\s/?#:]*):(?P<url_secret>[^\s/?#]+)@",
)
_URL_PASSWORD = re.compile(URL_PASSWORD[2])


def url_passwords(value: str | None) -> list[str]:
    """The password of every URL in `value` that has one (`http://user:password@host`),
    read as the masks read them, however malformed the rest of each URL."""
    if not value or "://" not in value:
        return []
    return [match["url_secret"] for match in _URL_PASSWORD.finditer(value)]


def url_password(value: str | None) -> str | None:
    """The password of the first URL in `value` that has one, if any."""
    passwords = url_passwords(value)
    return passwords[0] if passwords else None


def mask_url_passwords(text: str) -> str:
    """`text` with the password of every URL in it masked, the host and path kept, for a
    message that quotes a URL (`http://alice:[REDACTED:url_password]@host/v1`)."""
    return _URL_PASSWORD.sub(_masked_url_password, text)


def _masked_url_password(match: re.Match[str]) -> str:
    return f"://{match['url_user']}:[REDACTED:url_password]@"


def looks_secret(name: str) -> bool:
    """True for `OPENAI_API_KEY`, `github_token`, `DB_PASSWORD`, `AWS_CREDENTIALS`…"""
    upper = name.upper()
    return any(word in upper for word in SECRET_NAME_WORDS)


def known_secrets(
    sources: Collection[Mapping[str, str | None]],
    *,
    api_key: str | None,
    api_key_name: str,
    public: Collection[str | None] = (),
) -> dict[str, str]:
    """Secret value -> the variable name it is shown as, from the API key in use, every
    secret-looking variable in `sources` (the environment, then `.env`) and the password of
    every URL among their values. Values in `public` (the base URL, the model name) are
    never treated as secrets, except a URL's password (shown as `url_password`)."""
    shown: set[str] = {value for value in public if value}
    secrets: dict[str, str] = {}

    def add(name: str, value: str | None) -> None:
        if value and len(value) >= MIN_SECRET_CHARS and value not in shown:
            secrets.setdefault(value, name)

    add(api_key_name, api_key)
    for value in public:
        for password in url_passwords(value):
            add("url_password", password)
    for source in sources:
        for name, value in source.items():
            if looks_secret(name):
                add(name, value)
            # A value may list several URLs (pip's extra index URLs): each password counts.
            for password in url_passwords(value):
                add(name, password)
    return secrets


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    count: int


class Redactor:
    """Masks known secret values, the password of every URL and, unless `patterns` is
    False, well-known token shapes.

    It is also the loop's redaction step (`redact_result`), and hands out streams for text
    that arrives in pieces (`stream()`).
    """

    def __init__(self, known: Mapping[str, str], *, patterns: bool = True) -> None:
        # Longest values first, so a value that contains another is masked whole.
        values = sorted(known, key=len, reverse=True)
        self._names = dict(known)
        alternatives = [f"(?P<known>{'|'.join(map(re.escape, values))})"] if values else []
        triggers = [re.escape(value) for value in values]
        shapes = (URL_PASSWORD, *TOKEN_SHAPES) if patterns else (URL_PASSWORD,)
        alternatives += [f"(?P<{kind}>{pattern})" for kind, _, pattern in shapes]
        triggers += [core for _, core, _ in shapes]
        # Never empty: a URL's password is always an alternative.
        self._pattern = re.compile("|".join(alternatives))
        # Alternatives that start with a literal are scanned much faster than the full pattern.
        self._trigger = re.compile("|".join(triggers))
        self.longest_value_chars = len(values[0]) if values else 0
        self.known: tuple[str, ...] = tuple(values)
        """The secret values masked by name, longest first."""

    def redact(self, text: str) -> Redacted:
        parts: list[str] = []
        position = count = 0
        for match in self.matches(text, 0):
            parts += [text[position : match.start()], self.replacement(match)]
            position = match.end()
            count += 1
        if not count:
            return Redacted(text, 0)
        parts.append(text[position:])
        return Redacted("".join(parts), count)

    def redact_result(self, result: ToolResult) -> ToolResult:
        """The loop's redaction step: the result with its content redacted and the number
        of secrets masked added to `result.redactions` (a stream may have counted some)."""
        redacted = self.redact(result.content)
        if not redacted.count:
            return result
        return replace(result, content=redacted.text, redactions=result.redactions + redacted.count)

    def stream(
        self, *, overlap_chars: int = STREAM_OVERLAP_CHARS, batch_chars: int = STREAM_BATCH_CHARS
    ) -> RedactingStream:
        """A stream that holds back `overlap_chars` (at least the longest known value) and
        scans once `batch_chars` more have arrived."""
        overlap = max(overlap_chars, self.longest_value_chars)
        return RedactingStream(self, overlap_chars=overlap, batch_chars=batch_chars)

    def matches(self, text: str, start: int) -> Iterator[re.Match[str]]:
        """Every secret in `text` from `start`, left to right (characters before `start`
        still count as context for the shapes' boundary checks)."""
        position = start
        while (hit := self._trigger.search(text, position)) is not None:
            match = self._pattern.match(text, hit.start())
            if match is None:
                position = hit.start() + 1
                continue
            yield match
            position = match.end()

    def replacement(self, match: re.Match[str]) -> str:
        kind = match.lastgroup or "secret"
        if kind == "known":
            return f"[REDACTED:{self._names[match.group()]}]"
        if kind == URL_PASSWORD[0]:
            return _masked_url_password(match)
        return f"[REDACTED:{kind}]"


@dataclass(frozen=True, slots=True)
class _Cut:
    released: str
    """The text before the hold line, its secrets masked."""
    held_from: int
    """Where the text held for the next piece begins."""
    masked: int


def _masked_until(
    redactor: Redactor,
    buffer: str,
    start: int,
    hold_from: int,
    may_grow: Callable[[re.Match[str], int], bool],
) -> _Cut:
    """`buffer[start:hold_from]` with its secrets masked. A match `may_grow` says may still
    grow (given the hold line) moves the line back to where it starts; a match that crossed
    the line is released whole."""
    parts: list[str] = []
    position, masked = start, 0
    for match in redactor.matches(buffer, start):
        if may_grow(match, hold_from):
            hold_from = min(hold_from, match.start())
            break
        parts += [buffer[position : match.start()], redactor.replacement(match)]
        position = match.end()
        masked += 1
    hold_from = max(hold_from, position)
    parts.append(buffer[position:hold_from])
    return _Cut("".join(parts), hold_from, masked)


class RedactingStream:
    """Redacts text fed in pieces; `feed` returns what is final so far, `finish` the rest.

    The last `overlap_chars` of what was fed are held back, and so is a match that reaches
    the end of the text so far (it may still grow), so a secret split across pieces is
    matched whole. Text is released in batches, once `batch_chars` have arrived beyond what
    is held. `count` is the number of secrets masked.
    """

    def __init__(self, redactor: Redactor, *, overlap_chars: int, batch_chars: int) -> None:
        self._redactor = redactor
        self.overlap_chars = overlap_chars
        self._scan_at_chars = overlap_chars + batch_chars
        self._context = ""  # the last character already released: lookbehinds need it
        self._pending = ""
        self.count = 0

    def feed(self, text: str) -> str:
        self._pending += text
        if len(self._pending) < self._scan_at_chars:
            return ""
        return self._release(final=False)

    def finish(self) -> str:
        return self._release(final=True)

    def _release(self, *, final: bool) -> str:
        buffer = self._context + self._pending
        start = len(self._context)
        hold_from = len(buffer) if final else max(len(buffer) - self.overlap_chars, start)

        def may_grow(match: re.Match[str], line: int) -> bool:
            return not final and self._may_grow(match, line, len(buffer))

        cut = _masked_until(self._redactor, buffer, start, hold_from, may_grow)
        self.count += cut.masked
        self._pending = buffer[cut.held_from :]
        if cut.released:
            self._context = cut.released[-1]
        return cut.released

    @staticmethod
    def _may_grow(match: re.Match[str], hold_from: int, end: int) -> bool:
        """A match after the hold line, or one that reaches the end of the text so far
        (unless it has already grown too long to be one of the shapes)."""
        if match.start() >= hold_from:
            return True
        return match.end() == end and end - match.start() <= MAX_HELD_CHARS


ANSWER_HOLD_CHARS = 4096
"""At most this much of a streamed answer is held back (more than a PEM private key): a
longer word is shown as it stands, masked, so a reply without spaces does not stall, and
each piece costs at most one scan of this much."""
_BEARER_BEFORE = re.compile(r"(?i:bearer)[ \t]+\Z")
_SPACE_BEFORE_LAST_WORD = re.compile(r"\s\S*\Z")
_PEM_MARKER = "-----"  # a PEM block's BEGIN and END lines


def held_tail_start(text: str, start: int, known: Collection[str]) -> int:
    """Where the end of `text` (from `start`) that may still grow into a secret begins, or
    `len(text)` when none may: the word still being written (no token shape holds a space),
    with a `Bearer ` before it, a PEM block's BEGIN or END line still being written, and an
    end that is the beginning of a known value (which may hold a space)."""
    end = len(text)
    start = max(start, end - ANSWER_HOLD_CHARS)
    space = _SPACE_BEFORE_LAST_WORD.search(text, start)
    word = start if space is None else space.start() + 1
    held = word
    bearer = _BEARER_BEFORE.search(text, start, word)
    if bearer is not None:
        held = bearer.start()
    pem = text.find(_PEM_MARKER, max(text.rfind("\n", start) + 1, start))
    if pem != -1:
        held = min(held, pem)
    return min([held, *(end - _begun(text, start, value) for value in known)])


def _begun(text: str, start: int, value: str) -> int:
    """The length of the longest end of `text` (after `start`) that begins `value` without
    being all of it."""
    position = max(start, len(text) - len(value) + 1)
    while (position := text.find(value[0], position)) != -1:
        if value.startswith(text[position:]):
            return len(text) - position
        position += 1
    return 0


class AnswerMask:
    """Masks secrets in text a model streams, for a reader watching it arrive: each piece
    is passed on at once, except an end that may still grow into a secret (`held_tail_start`)
    or a secret still growing, which wait for the next piece or `finish`."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._context = ""  # the last character passed on: the shapes' lookbehinds need it
        self._pending = ""

    def feed(self, piece: str) -> str:
        self._pending += piece
        buffer = self._context + self._pending
        start = len(self._context)
        held = held_tail_start(buffer, start, self._redactor.known)
        return self._release(buffer, held, final=False)

    def finish(self) -> str:
        buffer = self._context + self._pending
        return self._release(buffer, len(buffer), final=True)

    def _release(self, buffer: str, hold_from: int, *, final: bool) -> str:
        def may_grow(match: re.Match[str], line: int) -> bool:
            return not final and _may_grow(match, buffer, line)

        cut = _masked_until(self._redactor, buffer, len(self._context), hold_from, may_grow)
        self._pending = buffer[cut.held_from :]
        if cut.released:
            self._context = cut.released[-1]
        return cut.released


def _may_grow(match: re.Match[str], text: str, hold_from: int) -> bool:
    """A match that crosses the hold line, or that only whitespace separates from it (a PEM
    block's next line, or the rest of a known value with a space in it, may be on its way),
    unless it is already longer than anything held."""
    growing = match.end() > hold_from or not text[match.end() : hold_from].strip()
    return growing and match.end() - match.start() <= ANSWER_HOLD_CHARS
