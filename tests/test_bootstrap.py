"""The composition root: what each chapter profile contributes."""

from __future__ import annotations

from pathlib import Path

from agent_tutorial.bootstrap import AgentDeps, CompactionHooks, build_agent
from agent_tutorial.config import load_settings
from agent_tutorial.core.events import EventBus, Notice
from agent_tutorial.core.hooks import HookError, HookInput, HookOutcome, HookRegistry
from agent_tutorial.core.loop import FullContext
from agent_tutorial.core.messages import ToolMessage, is_project_context, tool_call
from agent_tutorial.features.compaction import CompactionSettings, summary_message
from agent_tutorial.profiles import P07, P08, PROFILES
from agent_tutorial.project import Project
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply
from tests.conftest import write_state
from tests.event_log import EventLog
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
    agent = build_agent(
        P08, AgentDeps(ScriptedModel([]), Project.at(workspace), load_settings(workspace))
    )

    assert agent.runner.tools.names() == CHAPTER_8_TOOLS
    assert agent.compaction is not None
    assert agent.runner.context is agent.compaction


def test_chapters_before_8_send_the_whole_context(workspace: Path) -> None:
    agent = build_agent(
        P07, AgentDeps(ScriptedModel([]), Project.at(workspace), load_settings(workspace))
    )

    assert agent.compaction is None
    assert isinstance(agent.runner.context, FullContext)


def test_the_compaction_table_of_the_config_reaches_the_manager(workspace: Path) -> None:
    write_state(
        workspace,
        "config.toml",
        "[compaction]\nsnip_max_groups = 20\npersist_threshold_bytes = 4000\n",
    )

    agent = build_agent(
        P08, AgentDeps(ScriptedModel([]), Project.at(workspace), load_settings(workspace))
    )

    assert agent.compaction is not None
    expected = CompactionSettings(snip_max_groups=20, persist_threshold_bytes=4_000)
    assert agent.compaction.settings == expected


def test_a_subagents_large_results_are_persisted_without_touching_the_parents_context(
    workspace: Path,
) -> None:
    (workspace / "big.txt").write_text(("x" * 99 + "\n") * 400)  # 40,000 bytes
    task = '{"description": "skim", "prompt": "read big.txt"}'
    model = ScriptedModel(
        [
            tool_reply(tool_call("t1", "task", task)),
            tool_reply(tool_call("r1", "read_file", '{"path": "big.txt"}')),
            text_reply("it is all x"),
            text_reply("done"),
        ]
    )
    settings = load_settings(workspace, {"permission_mode": "auto"})
    earlier = history_with(2)
    agent = build_agent(P08, AgentDeps(model, Project.at(workspace), settings, history=earlier))
    assert agent.compaction is not None
    summary = summary_message(SUMMARY, ".agent_tutorial/artifacts/transcript-a.jsonl")
    agent.compaction.restore_summary(summary.content, covered_messages=len(earlier))

    agent.runner.run("delegate")

    child_request = model.requests[2].messages
    (child_result,) = [m for m in child_request if isinstance(m, ToolMessage)]
    assert child_result.content.startswith("<persisted-tool-result>\n")
    parent_after_task = model.requests[3].messages
    assert is_project_context(parent_after_task[1])
    assert parent_after_task[2] == summary  # after the project context: the parent's summary


def test_each_chapter_offers_a_prefix_of_the_chapter_8_tools(workspace: Path) -> None:
    settings = load_settings(workspace)
    for profile in PROFILES:
        names = build_agent(
            profile, AgentDeps(ScriptedModel([]), Project.at(workspace), settings)
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
