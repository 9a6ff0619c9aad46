"""Issue 29, item 7's REPL pieces: `/new` is `/clear`, and `/artifacts ID` shows that one
artifact (an unknown id says so) instead of listing them all."""

from __future__ import annotations

from pathlib import Path

from tests.loopback import LoopbackServer, exchanged, text_stream
from tests.test_artifacts_cli import artifacts, transcript_bytes
from tests.test_repl import MakeRepl, make_repl  # noqa: F401 (the fixture)


def test_new_starts_a_new_session_as_clear_does(
    make_repl: MakeRepl,  # noqa: F811
    loopback: LoopbackServer,
) -> None:
    loopback.queue(text_stream("old answer"), text_stream("new answer"))
    harness = make_repl()
    first_id = harness.conversation.session_id

    harness.drive("old question", "/new", "new question")

    second_id = harness.conversation.session_id
    assert second_id != first_id
    assert f"new session {second_id}" in harness.err_text()
    assert exchanged(loopback.requests[1]) == [{"role": "user", "content": "new question"}]


def test_artifacts_with_an_id_shows_that_one(
    make_repl: MakeRepl,  # noqa: F811
    workspace: Path,
) -> None:
    folder = artifacts(workspace)
    (folder / "tool-result-call-a.txt").write_text("first result \x1b[2J\n")
    (folder / "tool-result-call-b.txt").write_text("second result\n")
    (folder / "transcript-1a2b.jsonl").write_bytes(transcript_bytes())
    harness = make_repl()

    harness.drive("/artifacts call-b", "/artifacts 1a2b")

    shown = harness.stdout.getvalue()
    assert "second result" in shown and "first result" not in shown
    assert "Read the notes" in shown  # the transcript, as a table


def test_artifacts_with_an_unknown_id_says_so(make_repl: MakeRepl) -> None:  # noqa: F811
    harness = make_repl()

    harness.drive("/artifacts nothing-like-it")

    assert "cannot show: no artifact matches 'nothing-like-it'" in harness.err_text()
