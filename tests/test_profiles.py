"""Specification of chapter profiles: each chapter is the previous one plus what it adds,
and code asks `capability in profile`."""

from __future__ import annotations

import dataclasses

import pytest

from agent_tutorial.profiles import (
    P01,
    P02,
    P08,
    P09,
    PROFILES,
    Capability,
    ChapterProfile,
    profile_for_chapter,
)

ADDED_BY_CHAPTER = {
    2: {Capability.TOOL_REGISTRY, Capability.FILE_TOOLS, Capability.SEARCH_TOOLS},
    3: {Capability.PERMISSIONS},
    4: {Capability.HOOKS},
    5: {Capability.TODOS},
    6: {Capability.SUBAGENTS},
    7: {Capability.SKILLS, Capability.PROJECT_INSTRUCTIONS},
    8: {Capability.ARTIFACTS, Capability.COMPACTION},
    9: {Capability.MCP},
}


def test_chapter_one_has_the_loop_and_bash_only() -> None:
    assert P01.capabilities == {Capability.LOOP, Capability.BASH}


def test_chapter_two_adds_the_registry_and_file_and_search_tools() -> None:
    assert P02.capabilities == P01.capabilities | ADDED_BY_CHAPTER[2]


@pytest.mark.parametrize("chapter", sorted(ADDED_BY_CHAPTER))
def test_each_chapter_is_the_previous_one_plus_its_own(chapter: int) -> None:
    previous = profile_for_chapter(chapter - 1)
    current = profile_for_chapter(chapter)

    assert current.capabilities - previous.capabilities == ADDED_BY_CHAPTER[chapter]
    assert previous.capabilities < current.capabilities


@pytest.mark.parametrize("chapter", range(1, 10))
def test_profile_for_chapter_returns_that_chapter(chapter: int) -> None:
    profile = profile_for_chapter(chapter)

    assert profile.chapter == chapter
    assert profile.title


@pytest.mark.parametrize("chapter", [0, 10, -1])
def test_profile_for_an_unknown_chapter_is_rejected(chapter: int) -> None:
    with pytest.raises(ValueError, match="chapter must be 1 to 9"):
        profile_for_chapter(chapter)


def test_chapter_eight_has_hooks() -> None:
    # The bug seen in the field: chapter 8 lost hooks because a hand-kept list missed it.
    assert Capability.HOOKS in P08


def test_chapter_eight_has_every_capability_but_mcp() -> None:
    assert all(capability in P08 for capability in Capability if capability != Capability.MCP)
    assert Capability.MCP not in P08


def test_chapter_nine_has_every_capability() -> None:
    assert all(capability in P09 for capability in Capability)


def test_profiles_are_listed_in_chapter_order() -> None:
    assert [profile.chapter for profile in PROFILES] == list(range(1, 10))


def test_membership_asks_about_capabilities_only() -> None:
    assert Capability.BASH in P01
    assert Capability.PERMISSIONS not in P02
    assert "bash" not in P01


def test_plus_builds_a_new_profile_and_leaves_the_old_one_alone() -> None:
    extended = P01.plus(99, "Experiment", Capability.TODOS)

    assert extended == ChapterProfile(99, "Experiment", P01.capabilities | {Capability.TODOS})
    assert Capability.TODOS not in P01


def test_profiles_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        P01.chapter = 2  # type: ignore[misc]
