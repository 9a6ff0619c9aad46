"""Layer 1: large tool results go to `.agent_tutorial/artifacts/` before entering history."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_tutorial.adapters.shell import OutputSpool
from agent_tutorial.core.loop import ProcessorError
from agent_tutorial.core.tools import ToolResult, tool_error, tool_success
from agent_tutorial.features.compaction import (
    ArtifactConflictError,
    ArtifactPathError,
    CompactionError,
    CompactionSettings,
)
from agent_tutorial.features.compaction.persist import (
    ResultPersister,
    utf8_head_end,
    utf8_tail_start,
)
from agent_tutorial.features.compaction.store import ArtifactStore
from tests.test_compaction_support import Recorder, make_manager, make_persister

ARTIFACTS = Path(".agent_tutorial") / "artifacts"


def artifact_names(workspace: Path) -> list[str]:
    directory = workspace / ARTIFACTS
    return sorted(entry.name for entry in directory.iterdir()) if directory.is_dir() else []


def test_result_of_exactly_the_threshold_stays_inline(workspace: Path) -> None:
    result = tool_success("a" * 30_000)

    batch = make_persister(workspace).persist([result])

    assert batch.results == (result,)
    assert batch.artifacts == ()
    assert not (workspace / ".agent_tutorial").exists()


def test_result_one_byte_over_the_threshold_is_persisted_with_its_full_bytes(
    workspace: Path,
) -> None:
    content = "a" * 30_001

    batch = make_persister(workspace).persist([tool_success(content)])

    (artifact,) = batch.artifacts
    assert artifact.result_index == 0
    assert artifact.reference.relative_path == ".agent_tutorial/artifacts/tool-result-id-1.txt"
    assert artifact.reference.path == workspace / ARTIFACTS / "tool-result-id-1.txt"
    assert artifact.reference.original_bytes == 30_001
    assert artifact.reference.path.read_bytes() == content.encode()


def test_a_persisted_name_byte_that_is_not_utf8_is_written_escaped(workspace: Path) -> None:
    """tool_success escapes such a byte already; a result built otherwise is escaped here."""
    content = "caf\udce9.txt\n" * 3_000  # 3,000 lines of a grep over a planted name

    batch = make_persister(workspace).persist([ToolResult(content=content)])

    (artifact,) = batch.artifacts
    assert artifact.reference.path.read_bytes() == b"caf\\xe9.txt\n" * 3_000


def test_threshold_counts_utf8_bytes_not_characters(workspace: Path) -> None:
    persister = make_persister(workspace)
    exactly = tool_success("é" * 15_000)  # 15,000 characters, 30,000 bytes
    over = tool_success("é" * 15_001)  # 15,001 characters, 30,002 bytes

    batch = persister.persist([exactly, over])

    assert [artifact.result_index for artifact in batch.artifacts] == [1]
    assert batch.results[0] == exactly


def test_persisted_result_keeps_exactly_the_reference_block(workspace: Path) -> None:
    persister = make_persister(
        workspace, persist_threshold_bytes=10, preview_head_bytes=4, preview_tail_bytes=3
    )

    batch = persister.persist([tool_success("0123456789abcdef")])

    assert batch.results == (
        ToolResult(
            content=(
                "<persisted-tool-result>\n"
                "path: .agent_tutorial/artifacts/tool-result-id-1.txt\n"
                "original_bytes: 16\n"
                "head_preview:\n"
                "0123\n"
                "tail_preview:\n"
                "def\n"
                "</persisted-tool-result>"
            )
        ),
    )


def test_default_previews_are_two_thousand_bytes_each(workspace: Path) -> None:
    content = "h" * 2_000 + "m" * 40_000 + "t" * 2_000

    batch = make_persister(workspace).persist([tool_success(content)])

    text = batch.results[0].content
    assert "head_preview:\n" + "h" * 2_000 + "\ntail_preview:\n" + "t" * 2_000 + "\n" in text


def test_previews_drop_characters_cut_at_either_end(workspace: Path) -> None:
    # Byte 2,000 falls inside "€" (3 bytes) at the head and inside "😀" (4 bytes) at the tail.
    head, tail = "a" * 1_999 + "€", "😀" + "z" * 1_998
    persister = make_persister(workspace)

    batch = persister.persist([tool_success(head + "m" * 40_000 + tail)])

    text = batch.results[0].content
    assert "head_preview:\n" + "a" * 1_999 + "\ntail_preview:\n" + "z" * 1_998 + "\n" in text


def test_previews_keep_characters_that_end_exactly_at_the_cut(workspace: Path) -> None:
    head, tail = "a" * 1_997 + "€", "😀" + "z" * 1_996
    persister = make_persister(workspace)

    batch = persister.persist([tool_success(head + "m" * 40_000 + tail)])

    assert f"head_preview:\n{head}\ntail_preview:\n{tail}\n" in batch.results[0].content


def test_tail_preview_never_overlaps_the_head(workspace: Path) -> None:
    persister = make_persister(
        workspace, persist_threshold_bytes=5, preview_head_bytes=6, preview_tail_bytes=6
    )

    batch = persister.persist([tool_success("0123456789")])

    assert "head_preview:\n012345\ntail_preview:\n6789\n" in batch.results[0].content


def test_a_zero_head_preview_still_shows_the_tail(workspace: Path) -> None:
    persister = make_persister(
        workspace, persist_threshold_bytes=5, preview_head_bytes=0, preview_tail_bytes=3
    )

    batch = persister.persist([tool_success("0123456789")])

    assert "head_preview:\n\ntail_preview:\n789\n" in batch.results[0].content


def test_batch_over_budget_persists_the_largest_result_first(workspace: Path) -> None:
    sizes = [25_000, 29_000, 27_000, 29_500, 28_000, 26_000, 25_000, 24_000]  # 213,500 bytes
    results = [tool_success("x" * size) for size in sizes]

    batch = make_persister(workspace).persist(results)

    assert [artifact.result_index for artifact in batch.artifacts] == [3]


def test_batch_budget_ties_are_persisted_in_result_order(workspace: Path) -> None:
    results = [tool_success("x" * 29_000) for _ in range(8)]  # 232,000 bytes

    batch = make_persister(workspace).persist(results)

    # Persisting result 0 leaves 203,000 bytes, result 1 then leaves 174,000.
    assert [artifact.result_index for artifact in batch.artifacts] == [0, 1]
    assert batch.results[2:] == tuple(results[2:])


def test_batch_budget_counts_only_results_kept_inline(workspace: Path) -> None:
    big = tool_success("b" * 100_000)
    results = [big, *(tool_success("x" * 25_000) for _ in range(8))]  # 200,000 inline

    batch = make_persister(workspace).persist(results)

    assert [artifact.result_index for artifact in batch.artifacts] == [0]


def test_compacted_batch_keeps_length_and_order(workspace: Path) -> None:
    results = [tool_success("small"), tool_success("L" * 30_001), tool_error("bad", "no")]

    batch = make_persister(workspace).persist(results)

    assert len(batch.results) == 3
    assert batch.results[0] == results[0]
    assert batch.results[2] == results[2]
    assert batch.results[1].content.startswith("<persisted-tool-result>\n")


def test_persisted_error_result_stays_an_error_with_its_code(workspace: Path) -> None:
    failure = tool_error("command_failed", "x" * 40_000)

    batch = make_persister(workspace).persist([failure])

    (result,) = batch.results
    assert result.is_error
    assert result.error_code == "command_failed"
    assert result.content.startswith("Error [command_failed]: ")
    assert "<persisted-tool-result>\npath: .agent_tutorial/artifacts/" in result.content
    assert batch.artifacts[0].reference.path.read_text() == failure.content


@pytest.mark.parametrize(
    "artifact_id", ["UPPER", "under_score", "-lead", "trail-", "two--dashes", "", "a" * 97, "../x"]
)
def test_invalid_artifact_id_is_refused_before_anything_is_written(
    workspace: Path, artifact_id: str
) -> None:
    persister = make_persister(workspace, id_generator=lambda: artifact_id)

    with pytest.raises(ArtifactPathError, match="artifact id"):
        persister.persist([tool_success("x" * 30_001)])

    assert not (workspace / ".agent_tutorial").exists()


def test_longest_valid_artifact_id_is_accepted(workspace: Path) -> None:
    artifact_id = "a" * 90 + "-b1c2d"  # 96 characters
    persister = make_persister(workspace, id_generator=lambda: artifact_id)

    batch = persister.persist([tool_success("x" * 30_001)])

    assert batch.artifacts[0].reference.path.name == f"tool-result-{artifact_id}.txt"


def test_default_ids_are_uuid4_hex(workspace: Path) -> None:
    persister = ResultPersister(ArtifactStore(workspace), CompactionSettings())

    batch = persister.persist([tool_success("x" * 30_001)])

    name = batch.artifacts[0].reference.path.name
    assert len(name.removeprefix("tool-result-").removesuffix(".txt")) == 32


def test_existing_artifact_is_never_overwritten(workspace: Path) -> None:
    (workspace / ARTIFACTS).mkdir(parents=True)
    existing = workspace / ARTIFACTS / "tool-result-id-1.txt"
    existing.write_bytes(b"earlier bytes")

    with pytest.raises(ArtifactConflictError, match="never overwritten"):
        make_persister(workspace).persist([tool_success("x" * 30_001)])

    assert existing.read_bytes() == b"earlier bytes"
    assert artifact_names(workspace) == ["tool-result-id-1.txt"]


def test_failed_batch_removes_the_files_it_already_wrote(workspace: Path) -> None:
    (workspace / ARTIFACTS).mkdir(parents=True)
    (workspace / ARTIFACTS / "tool-result-id-2.txt").write_bytes(b"keep me")
    results = [tool_success("1" * 30_001), tool_success("2" * 30_001)]

    with pytest.raises(ArtifactConflictError):
        make_persister(workspace).persist(results)

    assert artifact_names(workspace) == ["tool-result-id-2.txt"]
    assert (workspace / ARTIFACTS / "tool-result-id-2.txt").read_bytes() == b"keep me"


def test_an_id_repeated_within_a_batch_fails_the_whole_batch(workspace: Path) -> None:
    persister = make_persister(workspace, id_generator=lambda: "same")

    with pytest.raises(ArtifactConflictError):
        persister.persist([tool_success("1" * 30_001), tool_success("2" * 30_001)])

    assert artifact_names(workspace) == []


def test_successful_batch_leaves_no_temporary_files(workspace: Path) -> None:
    results = [tool_success("1" * 30_001), tool_success("2" * 30_001)]

    make_persister(workspace).persist(results)

    assert artifact_names(workspace) == ["tool-result-id-1.txt", "tool-result-id-2.txt"]


@pytest.mark.parametrize("link", [".agent_tutorial", ".agent_tutorial/artifacts"])
def test_symlinked_state_directories_are_refused(
    workspace: Path, tmp_path: Path, link: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / link).parent.mkdir(parents=True, exist_ok=True)
    (workspace / link).symlink_to(outside, target_is_directory=True)

    with pytest.raises(ArtifactPathError, match="real directory"):
        make_persister(workspace).persist([tool_success("x" * 30_001)])

    assert list(outside.iterdir()) == []


def test_symlink_to_a_directory_inside_the_workspace_is_refused_too(workspace: Path) -> None:
    (workspace / "elsewhere").mkdir()
    (workspace / ".agent_tutorial").symlink_to(workspace / "elsewhere")

    with pytest.raises(ArtifactPathError):
        make_persister(workspace).persist([tool_success("x" * 30_001)])

    assert list((workspace / "elsewhere").iterdir()) == []


@pytest.mark.parametrize("as_file", [".agent_tutorial", ".agent_tutorial/artifacts"])
def test_state_directories_that_are_files_are_refused(workspace: Path, as_file: str) -> None:
    (workspace / as_file).parent.mkdir(parents=True, exist_ok=True)
    (workspace / as_file).write_text("not a directory")

    with pytest.raises(ArtifactPathError):
        make_persister(workspace).persist([tool_success("x" * 30_001)])

    assert (workspace / as_file).read_text() == "not a directory"


def test_workspace_reached_through_a_symlink_writes_into_the_real_workspace(
    workspace: Path, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace, target_is_directory=True)

    batch = make_persister(alias).persist([tool_success("x" * 30_001)])

    assert batch.artifacts[0].reference.path == workspace.resolve() / ARTIFACTS / (
        "tool-result-id-1.txt"
    )
    assert artifact_names(workspace) == ["tool-result-id-1.txt"]


def test_compaction_errors_are_processor_errors() -> None:
    assert issubclass(CompactionError, ProcessorError)
    assert issubclass(ArtifactPathError, CompactionError)
    assert issubclass(ArtifactConflictError, CompactionError)


def test_process_tool_results_reports_what_it_persisted(workspace: Path) -> None:
    recorder = Recorder()
    manager = make_manager(workspace, recorder=recorder)

    results = manager.process_tool_results([tool_success("x" * 52_001), tool_success("ok")])

    assert results[1] == tool_success("ok")
    (event,) = recorder.applied("persist")
    assert event.text == (
        "persisted 1 result, 52,001 B → .agent_tutorial/artifacts/tool-result-id-1.txt"
    )
    assert event.count == 1
    assert event.bytes_saved == 52_001 - len(results[0].content.encode())


def test_process_tool_results_without_large_results_reports_nothing(workspace: Path) -> None:
    recorder = Recorder()
    manager = make_manager(workspace, recorder=recorder)

    assert manager.process_tool_results([tool_success("ok")]) == [tool_success("ok")]
    assert recorder.events == []


NY = "ñ".encode()  # c3 b1: the continuation byte has its lowest bit set


@pytest.mark.parametrize(
    ("data", "limit", "end"),
    [(b"abc", 3, 3), (b"abc", 5, 3), (NY, 1, 0), (b"a" + NY, 2, 1), (b"a" + NY, 3, 3)],
)
def test_a_head_ends_on_a_character_boundary(data: bytes, limit: int, end: int) -> None:
    assert utf8_head_end(data, limit) == end


@pytest.mark.parametrize(
    ("data", "limit", "start"), [(b"abc", 0, 3), (b"a" + NY, 1, 3), (b"a" + NY, 2, 1)]
)
def test_a_tail_starts_on_a_character_boundary(data: bytes, limit: int, start: int) -> None:
    assert utf8_tail_start(data, limit, not_before=0) == start


def test_a_spooled_output_is_persisted_whole(workspace: Path) -> None:
    spool = OutputSpool(10**6)
    whole = b"line\n" * 10_000
    spool.write(whole)
    spool.finish(whole[-100:])
    shown = "line\n" * 10 + "[...]"  # what the tool kept in memory is only part of it
    result = ToolResult(content=shown, whole_output=spool)

    batch = make_persister(workspace, persist_threshold_bytes=1_000).persist([result])

    (artifact,) = batch.artifacts
    assert artifact.reference.original_bytes == len(whole)
    assert artifact.reference.path.read_bytes() == whole
