"""Asks an OpenAI-compatible server how large the model's context window is, where the
server says: vLLM's `GET /v1/models` (`max_model_len`), other servers' `context_length`,
llama.cpp's `GET /props` (`default_generation_settings.n_ctx`, the size the server runs
with) or its model list's `meta.n_ctx_train` (the size the model was trained for).

A probe never fails a run: a server that does not answer in time, answers with an error or
says nothing usable gives None, and the byte thresholds apply as they are. Each answer is
bounded as a model's reply is (`bounded_transport`): `timeout_s` for the whole answer, so a
server trickling bytes cannot hold the start, and `MAX_ANSWER_BYTES`.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

from agent_tutorial.adapters.bounded_transport import (
    BoundedClient,
    ReplyBounds,
    ReplyOverLimit,
    tls_verification,
)

PROBE_TIMEOUT_S = 3.0
MAX_ANSWER_BYTES = 1024 * 1024
"""A larger answer is not read on (a model list is a few KB): nothing is learnt from it."""


def probe_context_window(
    base_url: str, api_key: str | None, model: str, *, timeout_s: float = PROBE_TIMEOUT_S
) -> int | None:
    """The model's context window in tokens as the server reports it, or None."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = base_url.rstrip("/")
    bounds = ReplyBounds(timeout_s, MAX_ANSWER_BYTES)
    try:
        with BoundedClient(
            bounds=bounds, timeout=timeout_s, headers=headers, verify=tls_verification()
        ) as client:
            entry = _model_entry(_get_json(client, f"{base}/models"), model)
            declared = _first_count(entry, ("max_model_len", "context_length", "context_window"))
            if declared is not None:
                return declared
            running = _props_context(_get_json(client, _server_root(base) + "/props"))
            return running if running is not None else _first_count(_meta(entry), ("n_ctx_train",))
    except (httpx2.HTTPError, ReplyOverLimit):  # unreachable, timed out, refused: unknown
        return None


def _get_json(client: httpx2.Client, url: str) -> Any:
    """The answer's JSON, or None for an error status, an answer over `MAX_ANSWER_BYTES`
    or one that is not JSON (deep nesting included)."""
    try:
        body = _read_answer(client, url)
    except (httpx2.HTTPError, ReplyOverLimit):
        return None
    try:
        return None if body is None else json.loads(body)
    except (ValueError, RecursionError):
        return None


def _read_answer(client: httpx2.Client, url: str) -> bytes | None:
    """The body of a 200 answer (the transport stops one over `MAX_ANSWER_BYTES`). An
    error's body is read too: closing a connection with unread data resets it, which the
    server would see mid-request."""
    response = client.get(url)
    return response.content if response.status_code == 200 else None


def _server_root(base: str) -> str:
    """llama.cpp serves /props beside /v1, not under it."""
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _model_entry(listing: Any, model: str) -> dict[str, Any]:
    """The listing's entry for `model`, or its only entry (local servers list one model
    under whatever name they were started with)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [entry for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []
    for entry in entries:
        if entry.get("id") == model:
            return entry
    return entries[0] if len(entries) == 1 else {}


def _meta(entry: dict[str, Any]) -> dict[str, Any]:
    meta = entry.get("meta")
    return meta if isinstance(meta, dict) else {}


def _props_context(props: Any) -> int | None:
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    return _first_count(settings if isinstance(settings, dict) else {}, ("n_ctx",))


def _first_count(values: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
