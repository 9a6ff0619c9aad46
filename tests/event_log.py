"""A sink that keeps every event, for tests to read back (production sinks render events
or write them to the session log)."""

from __future__ import annotations

from agent_tutorial.core.events import Event


class EventLog:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)
