"""The rewind record `/undo` and `/rewind` append: loading keeps the messages before it,
and ignores, with a note, one that does not fit the history."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_tutorial.core.events import MessageAppended
from agent_tutorial.core.messages import assistant_message, user_message
from agent_tutorial.features.sessions import SessionLog, SessionMeta, load_session


def session_with_rewind(workspace: Path, keep: object) -> Path:
    log = SessionLog.create(workspace, SessionMeta.new(3, "m", None))
    for message in (
        user_message("first"),
        assistant_message("one"),
        user_message("second"),
        assistant_message("two"),
    ):
        log.emit(MessageAppended(message))
    log.record("rewind", {"messages": keep})
    log.close()
    return log.path


@pytest.mark.parametrize(("keep", "contents"), [(2, ["first", "one"]), (0, []), (4, None)])
def test_loading_keeps_the_messages_before_a_rewind(
    workspace: Path, keep: int, contents: list[str] | None
) -> None:
    loaded = load_session(session_with_rewind(workspace, keep))

    every = ["first", "one", "second", "two"]
    assert [m.content for m in loaded.history] == (every if contents is None else contents)
    assert loaded.repaired == []


@pytest.mark.parametrize("keep", [5, -1, "2", True])
def test_a_rewind_record_that_does_not_fit_is_ignored_with_a_note(
    workspace: Path, keep: object
) -> None:
    loaded = load_session(session_with_rewind(workspace, keep))

    assert len(loaded.history) == 4
    (note,) = loaded.repaired
    assert note.startswith("ignored a rewind record that does not fit (")
    assert note.endswith(f":6: {keep!r})")
