"""The composition root: what each chapter profile contributes."""

from __future__ import annotations

from pathlib import Path

from agent_tutorial.bootstrap import AgentDeps, CompactionHooks, build_agent
from agent_tutorial.config import load_settings
from agent_tutorial.core.events import EventBus, EventLog, Notice
from agent_tutorial.core.hooks import HookError, HookInput, HookOutcome, HookRegistry
from agent_tutorial.profiles import P08, PROFILES
from agent_tutorial.testing import ScriptedModel
from tests.test_compaction_support import SUMMARY, FakeSummarizer, history_with

CHAPTER_8_TOOLS = [
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
    "todo_write",
    "task",
    "load_skill",
]


def test_chapter_8_offers_every_tool_in_order(workspace: Path) -> None:
    agent = build_agent(P08, AgentDeps(ScriptedModel([]), workspace, load_settings(workspace)))

    assert agent.runner.tools.names() == CHAPTER_8_TOOLS
    assert agent.compaction is not None
    assert agent.runner.history_processor is agent.compaction


def test_each_chapter_offers_a_prefix_of_the_chapter_8_tools(workspace: Path) -> None:
    settings = load_settings(workspace)
    for profile in PROFILES:
        names = build_agent(
            profile, AgentDeps(ScriptedModel([]), workspace, settings)
        ).runner.tools.names()
        assert names == CHAPTER_8_TOOLS[: len(names)], profile.chapter


def test_compaction_hooks_run_before_and_after_a_summary(tmp_path: Path) -> None:
    seen: list[str] = []

    def record(hook_input: HookInput) -> HookOutcome:
        seen.append(hook_input.event)
        return HookOutcome()

    hooks = HookRegistry(tmp_path)
    hooks.add("PreCompact", record)
    hooks.add("PostCompact", record)
    summarizer = FakeSummarizer([SUMMARY])

    summary = CompactionHooks(summarizer, hooks, tmp_path, EventBus()).summarize(history_with(2))

    assert summary == SUMMARY
    assert seen == ["PreCompact", "PostCompact"]


def test_a_failing_compaction_hook_is_reported_and_the_summary_still_happens(
    tmp_path: Path,
) -> None:
    def broken(hook_input: HookInput) -> HookOutcome:
        raise HookError("guard.py exited 1")

    hooks = HookRegistry(tmp_path)
    hooks.add("PreCompact", broken)
    log = EventLog()

    summary = CompactionHooks(
        FakeSummarizer([SUMMARY]), hooks, tmp_path, EventBus([log])
    ).summarize(history_with(1))

    assert summary == SUMMARY
    assert [event.text for event in log.events if isinstance(event, Notice)] == [
        "PreCompact hook failed: guard.py exited 1"
    ]
