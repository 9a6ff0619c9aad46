"""`/undo` and `/rewind` in the REPL on a real pseudo-terminal: files from the checkpoint
store, the conversation cut with a rewind record (the log keeps every message) that
resuming honours, and the question asked before a file the user changed is overwritten."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import RunCli
from tests.loopback import LoopbackServer, conversation, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
DOWN = "\x1b[B"


def user_contents(body: dict[str, Any]) -> list[object]:
    return [message["content"] for message in conversation(body) if message["role"] == "user"]


def queue_write(loopback: LoopbackServer, call_id: str, path: str, text: str) -> None:
    loopback.queue(
        tool_stream([(call_id, "write_file", {"path": path, "content": text})]),
        text_stream(f"wrote {path}"),
    )


def ask(terminal: Terminal, prompt: str, answer: str) -> None:
    terminal.enter(prompt)
    terminal.wait_for_text(answer)
    terminal.wait_for_prompt()


def test_undo_takes_back_the_last_prompt_files_and_messages_and_resuming_agrees(
    make_terminal: MakeTerminal, run_cli: RunCli, workspace: Path, loopback: LoopbackServer
) -> None:
    (workspace / "a.txt").write_text("one\n")
    queue_write(loopback, "w1", "a.txt", "two\n")
    queue_write(loopback, "w2", "b.txt", "new\n")
    loopback.queue(text_stream("after undo"))
    terminal = make_terminal("run", "--chapter", "3", "-y")
    terminal.wait_for_prompt()
    ask(terminal, "first", "wrote a.txt")
    ask(terminal, "second", "wrote b.txt")

    terminal.enter("/undo")
    terminal.wait_for_text("conversation rewound to before: second")
    terminal.wait_for_prompt()
    ask(terminal, "third", "after undo")

    assert "removed   b.txt" in terminal.text()
    assert not (workspace / "b.txt").exists()
    assert (workspace / "a.txt").read_text() == "two\n"  # the first prompt's turn stays
    assert user_contents(loopback.requests[-1]) == ["first", "third"]
    terminal.enter("/exit")
    terminal.wait_for_exit()
    (log,) = (workspace / ".agent_tutorial" / "sessions").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    rewind_at = records.index({"type": "rewind", "messages": 4})
    assert sum(1 for record in records[:rewind_at] if record["type"] == "message") == 8
    loopback.queue(text_stream("resumed"))
    assert run_cli("run", "--continue", "-p", "fourth").exit_code == 0
    assert user_contents(loopback.requests[-1]) == ["first", "third", "fourth"]


def test_rewind_offers_the_prompts_and_can_take_back_files_only_or_the_conversation_only(
    make_terminal: MakeTerminal, workspace: Path, loopback: LoopbackServer
) -> None:
    (workspace / "a.txt").write_text("one\n")
    queue_write(loopback, "w1", "a.txt", "two\n")
    queue_write(loopback, "w2", "a.txt", "three\n")
    loopback.queue(text_stream("still here"))
    queue_write(loopback, "w3", "a.txt", "four\n")
    loopback.queue(text_stream("after the cut"))
    terminal = make_terminal("run", "--chapter", "3", "-y")
    terminal.wait_for_prompt()
    ask(terminal, "first prompt", "wrote a.txt")
    ask(terminal, "second prompt", "wrote a.txt")

    terminal.enter("/rewind")
    terminal.wait_for_text("Rewind to before which prompt?")
    terminal.type(DOWN)  # the newest comes first: the first prompt is second
    terminal.enter("")
    terminal.wait_for_text("Take back what?")
    terminal.type(DOWN)  # files only
    terminal.enter("")
    terminal.wait_for_text("restored  a.txt")
    terminal.wait_for_prompt()
    ask(terminal, "third prompt", "still here")

    assert (workspace / "a.txt").read_text() == "one\n"
    assert user_contents(loopback.requests[-1]) == ["first prompt", "second prompt", "third prompt"]

    ask(terminal, "fourth prompt", "wrote a.txt")
    asked = terminal.text().count("Take back what?")  # the first /rewind's still shows
    terminal.enter("/rewind")
    terminal.wait_for_text("1. fourth prompt")
    terminal.enter("")  # the newest: the fourth prompt
    terminal.wait_for_text("Take back what?", times=asked + 1)
    terminal.type(DOWN + DOWN)  # the conversation only
    terminal.enter("")
    terminal.wait_for_text("conversation rewound to before: fourth prompt")
    terminal.wait_for_prompt()
    ask(terminal, "fifth prompt", "after the cut")

    assert (workspace / "a.txt").read_text() == "four\n"  # the files stay as they are
    kept = ["first prompt", "second prompt", "third prompt", "fifth prompt"]
    assert user_contents(loopback.requests[-1]) == kept


def test_undo_asks_before_overwriting_a_file_the_user_changed_and_a_no_keeps_everything(
    make_terminal: MakeTerminal, workspace: Path, loopback: LoopbackServer
) -> None:
    (workspace / "a.txt").write_text("one\n")
    queue_write(loopback, "w1", "a.txt", "two\n")
    loopback.queue(text_stream("kept"))
    terminal = make_terminal("run", "--chapter", "3", "-y")
    terminal.wait_for_prompt()
    ask(terminal, "first", "wrote a.txt")
    (workspace / "a.txt").write_text("the user's\n")

    terminal.enter("/undo")
    terminal.wait_for_text("changed since the agent's turn: a.txt")
    terminal.wait_for_text("Overwrite them? [y/N]")
    terminal.enter("n")
    terminal.wait_for_text("nothing restored")
    terminal.wait_for_prompt()
    ask(terminal, "second", "kept")

    assert (workspace / "a.txt").read_text() == "the user's\n"
    assert user_contents(loopback.requests[-1]) == ["first", "second"]
