"""Provider error replies as the typed errors of `core.model`: a pure function from
(status, body, message) to one error whose text is one line, with secrets masked by the
redactor the adapter was given (before the line is cut, so no secret is left half shown).

No SDK here: the OpenAI adapter hands over what the SDK decoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agent_tutorial.core.model import (
    AuthenticationError,
    BadRequestError,
    ConnectionFailedError,
    ModelError,
    ModelNotFoundError,
    PromptTooLongError,
    ProviderError,
    RateLimitError,
    valid_context_window,
)

_DETAIL_LIMIT = 300

_RATE_LIMIT_MARKERS = re.compile(
    r"rate[ _-]?limit|too many requests|tokens per|requests per|per minute|per min\b"
    r"|per day|\b[tr]p[md]\b|quota",
    re.IGNORECASE,
)

# One entry per known provider wording; the comment names who says it.
_OVERFLOW_MARKERS = re.compile(
    "|".join(
        (
            r"context_length_exceeded",  # OpenAI, Azure (error code)
            r"maximum context length",  # OpenAI, Azure, DeepSeek, OpenRouter, vLLM, Mistral
            r"exceeds? the context window",  # OpenAI
            r"exceed_context_size_error",  # llama.cpp (error type)
            r"exceeds? the available context size",  # llama.cpp
            r"requested tokens \(\d+\) exceed context window",  # llama-cpp-python, unformatted
            r"prompt is too long",  # Anthropic-compatible gateways
            r"range of input length",  # DashScope (Qwen)
            r"input token count.{0,40}exceeds",  # Gemini's OpenAI-compatible endpoint
            r"tokens \+ `?max_new_tokens`? must be",  # Hugging Face TGI
            r"context length of only",  # LM Studio
        )
    ),
    re.IGNORECASE,
)

# The window an overflow error states, in each wording that states one. Numbers are read up
# to 12 digits: int() refuses a 5,000-digit one, and no window is that large anyway.
_STATED_WINDOW = (
    # OpenAI, vLLM, DeepSeek
    re.compile(r"maximum context length is (\d{1,12}) tokens", re.IGNORECASE),
    re.compile(r"exceed context window of (\d{1,12})", re.IGNORECASE),  # llama-cpp-python
    re.compile(r"available context size \((\d{1,12}) tokens\)", re.IGNORECASE),  # llama.cpp
    re.compile(r"\d{1,12} tokens > (\d{1,12})\b", re.IGNORECASE),  # Anthropic-style
)

# The refused request's own token count, in each wording that states one.
_STATED_PROMPT = (
    re.compile(r"resulted in (\d{1,12}) tokens", re.IGNORECASE),  # OpenAI
    re.compile(r"your request has (\d{1,12}) input tokens", re.IGNORECASE),  # vLLM
    re.compile(r"\((\d{1,12}) in the messages", re.IGNORECASE),  # vLLM, prompt and cap
    re.compile(r"(\d{1,12}) tokens > \d{1,12}\b", re.IGNORECASE),  # Anthropic-style
    re.compile(r"request \((\d{1,12}) tokens\) exceeds", re.IGNORECASE),  # llama.cpp
    re.compile(r"requested tokens \((\d{1,12})\) exceed", re.IGNORECASE),  # llama-cpp-python
)

# vLLM's two wordings for prompt + cap over the window; the prompt's own count is in both.
_PROMPT_AND_CAP_TOO_LONG = (
    re.compile(
        r"maximum context length is (?P<window>\d{1,12}) tokens and your request has "
        r"(?P<prompt>\d{1,12}) input tokens"
    ),
    re.compile(
        r"maximum context length is (?P<window>\d{1,12}) tokens\. However, you requested \d{1,12} "
        r"tokens \((?P<prompt>\d{1,12}) in the messages, \d{1,12} in the completion\)"
    ),
)

_SDK_PREFIX = re.compile(r"^Error code: \d+( - )?")
_HTML_TAG = re.compile(r"<[^>]+>")

_EXPLANATIONS: dict[type[ModelError], str] = {
    PromptTooLongError: "the request does not fit the model's context window",
    RateLimitError: "the endpoint is rate limiting requests",
    ModelNotFoundError: "the endpoint does not know this model or URL path",
    BadRequestError: "the endpoint rejected the request",
    ProviderError: "the endpoint failed",
    ConnectionFailedError: "could not reach the endpoint",
}


def _as_written(text: str) -> str:
    return text


def classify_error(
    status: int | None,
    body: object,
    message: str,
    *,
    mask: Callable[[str], str] = _as_written,
) -> ModelError:
    """Map one provider error reply to a typed `ModelError` whose `str()` is one line.

    `status` is the HTTP status (None for a connection failure or an error event inside a
    stream), `body` the decoded JSON body (with or without an `error` wrapper) or its text,
    `message` the SDK's own message; `mask` hides secrets in what the provider wrote (the
    adapter passes its redactor's).
    """
    if status is None:
        status = _status_in_body(body)
    error_class = error_class_of(status, body, message)
    explanation = _explain(error_class, status)
    where = f" ({status})" if status is not None else ""
    detail = one_line(mask(provider_message(body) or _SDK_PREFIX.sub("", message)))
    text = f"{explanation}{where}: {detail}" if detail else f"{explanation}{where}"
    if error_class is PromptTooLongError:
        return PromptTooLongError(
            text,
            window_tokens=stated_window(body, message),
            prompt_tokens=stated_prompt_tokens(body, message),
        )
    return error_class(text)


def stated_window(body: object, message: str = "") -> int | None:
    """The context window an overflow error states, if it states one this agent would take
    as `--context-window`: llama.cpp's `"n_ctx": 4096` in the body, llama-cpp-python's
    "exceed context window of 4096", OpenAI's and vLLM's "maximum context length is 4096
    tokens". None when it states none, or a number no window can be."""
    error = _error_object(body)
    n_ctx = error.get("n_ctx") if isinstance(error, dict) else None
    if isinstance(n_ctx, int) and not isinstance(n_ctx, bool):
        return n_ctx if valid_context_window(n_ctx) else None
    text = " ".join([*strings_in(body), message])
    for pattern in _STATED_WINDOW:
        match = pattern.search(text)
        if match is not None:
            tokens = int(match.group(1))
            return tokens if valid_context_window(tokens) else None
    return None


def stated_prompt_tokens(body: object, message: str = "") -> int | None:
    """The refused request's own token count, as the server counted it, if its overflow
    error states one: llama.cpp's `"n_prompt_tokens"` in the body, OpenAI's "resulted in
    9000 tokens", vLLM's "your request has 9000 input tokens", an Anthropic-style gateway's
    "210000 tokens > 200000 maximum". None when it states none, or states 0."""
    error = _error_object(body)
    counted = error.get("n_prompt_tokens") if isinstance(error, dict) else None
    if isinstance(counted, int) and not isinstance(counted, bool):
        return counted if counted > 0 else None
    text = " ".join([*strings_in(body), message])
    for pattern in _STATED_PROMPT:
        match = pattern.search(text)
        if match is not None:
            tokens = int(match.group(1))
            return tokens if tokens > 0 else None
    return None


def room_for_output(body: object) -> tuple[int, int] | None:
    """(window, tokens left for the reply) from vLLM's refusal of a prompt that fits but
    whose output cap does not, which states both; else None."""
    text = " ".join(strings_in(body))
    for pattern in _PROMPT_AND_CAP_TOO_LONG:
        match = pattern.search(text)
        if match is not None:
            window = int(match.group("window"))
            if not valid_context_window(window):  # as stated_window: not a window to keep to
                return None
            return window, window - int(match.group("prompt"))
    return None


def error_class_of(status: int | None, body: object, message: str = "") -> type[ModelError]:
    """Which `ModelError` a reply is, without building its message (the adapter's response
    hook only needs to know whether it is an overflow)."""
    return _error_class(status, " ".join([*strings_in(body), message]), body)


def _error_class(status: int | None, searchable: str, body: object) -> type[ModelError]:
    if status is None and body is None:
        return ConnectionFailedError  # nothing came back; the message is ours, not the server's
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return ModelNotFoundError
    # Rate limits come first: "Request too large ... tokens per min" is a rate limit that
    # mentions tokens, and treating it as an overflow would compact for nothing.
    if _RATE_LIMIT_MARKERS.search(searchable):
        return RateLimitError
    # A bare 413 means the request body is too big; shrinking the history is the cure.
    if status == 413 or _OVERFLOW_MARKERS.search(searchable):
        return PromptTooLongError
    if status == 429:
        return RateLimitError
    if status is not None and 400 <= status < 500:
        return BadRequestError
    return ProviderError


def _explain(error_class: type[ModelError], status: int | None) -> str:
    if error_class is AuthenticationError:
        if status == 403:
            return "the endpoint refused access with this API key"
        return "the endpoint rejected the API key"
    if error_class is ProviderError and status is None:
        return "the endpoint reported an error"
    return _EXPLANATIONS[error_class]


def _error_object(body: object) -> object:
    """The error itself, whether the body wraps it in `{"error": ...}` or not (vLLM)."""
    if isinstance(body, dict) and "error" in body:
        return body["error"]
    return body


def _status_in_body(body: object) -> int | None:
    """An HTTP-like status some servers put in an error event's `code` field."""
    error = _error_object(body)
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    return None


def provider_message(body: object) -> str:
    error = _error_object(body)
    if isinstance(error, str):
        return _HTML_TAG.sub(" ", error)
    if isinstance(error, dict):
        for key in ("message", "detail", "msg"):
            value = error.get(key)
            if isinstance(value, str) and value:
                return value
    return ""


def strings_in(value: object, depth: int = 0) -> list[str]:
    """Every string in a decoded body; nested ones matter (OpenRouter embeds the upstream
    provider's raw error under `metadata.raw`)."""
    if isinstance(value, str):
        return [value]
    if depth > 4:
        return []
    if isinstance(value, dict):
        return [text for item in value.values() for text in strings_in(item, depth + 1)]
    if isinstance(value, list):
        return [text for item in value for text in strings_in(item, depth + 1)]
    return []


def one_line(text: str) -> str:
    """`text` on one line, cut to `_DETAIL_LIMIT` characters (mask secrets before this)."""
    text = " ".join(text.split())
    if len(text) > _DETAIL_LIMIT:
        return text[: _DETAIL_LIMIT - 1] + "…"
    return text
