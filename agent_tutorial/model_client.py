"""The model client a run talks to, built from the settings alone. The composition root
(`bootstrap.connect_model`) owns this module and decides what a chapter asks of it.

- `--model demo`: the offline scripted demo, whose long tour is chapter 8's.
- Otherwise the OpenAI-compatible adapter, with its wire options from the settings, its
  output cap kept within the window (`context_window`, where the cap is clamped, read by
  the adapter and by the context meter alike), the one `Redactor` for the text of its
  errors, and its connections closed with the run.

The SDK is imported only when an adapter is built: a demo run never loads it.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from agent_tutorial.adapters.chat_wire import WireOptions
from agent_tutorial.config import Settings
from agent_tutorial.core.model import ModelClient
from agent_tutorial.features.compaction.budget import WindowSize
from agent_tutorial.features.redaction import Redactor


def context_window(settings: Settings) -> WindowSize | None:
    """The window from the settings (flag, environment, config or the server's answer),
    with the output cap clamped within it; None while unknown."""
    tokens = settings.context_window_tokens
    return None if tokens is None else WindowSize.of(tokens, settings.max_output_tokens)


def with_server_window(settings: Settings) -> Settings:
    """The settings with the window the server names, when none is set (asked briefly; a
    server that does not say leaves it unknown). The demo has no server to ask."""
    if settings.context_window_tokens is not None or settings.is_demo:
        return settings
    from agent_tutorial.adapters.context_probe import probe_context_window

    key = settings.api_key.get_secret_value() if settings.api_key else None
    window = probe_context_window(settings.base_url or "", key, settings.model or "")
    return settings.model_copy(update={"context_window_tokens": window})


def wire_options(settings: Settings) -> WireOptions:
    """What the adapter sends, from the settings; the output cap within a known window."""
    window = context_window(settings)
    return WireOptions(
        send_tool_choice=settings.send_tool_choice,
        stream=settings.stream,
        max_output_tokens=settings.max_output_tokens
        if window is None
        else window.output_cap_tokens,
        merge_reminders=settings.merge_reminders,
        temperature=settings.temperature,
    )


def open_model_client(
    settings: Settings,
    workspace: Path,
    *,
    redactor: Redactor,
    long_demo: bool,
    opened: ExitStack,
) -> ModelClient:
    """The demo, or the adapter for the configured endpoint; an adapter's connections are
    closed with `opened`."""
    if settings.is_demo:
        from agent_tutorial.adapters.demo import DemoModel

        return DemoModel(workspace, long_session=long_demo)
    from agent_tutorial.adapters.openai_chat import OpenAIChatModel

    key = settings.api_key.get_secret_value() if settings.api_key else "not-needed"
    adapter = OpenAIChatModel(
        base_url=settings.base_url or "",
        api_key=key,
        model=settings.model or "",
        redaction=redactor,
        max_retries=settings.max_retries,
        timeout_s=settings.request_timeout_s,
        max_tool_argument_bytes=settings.max_tool_argument_bytes,
        wire=wire_options(settings),
    )
    return opened.enter_context(adapter)
