"""`agent-tutorial artifacts list|show|prune` through the CLI: newest first, full bytes,
transcripts as tables, and pruning that is a dry run by default and never reaches outside
`.agent_tutorial/artifacts`."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import RunCli

DAY_S = 86_400
NOW = time.time()


def artifacts(workspace: Path) -> Path:
    directory = workspace / ".agent_tutorial" / "artifacts"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def write_aged(path: Path, data: bytes, age_days: float) -> Path:
    path.write_bytes(data)
    stamp = NOW - age_days * DAY_S
    os.utime(path, (stamp, stamp))
    return path


def transcript_bytes() -> bytes:
    messages = [
        {"role": "user", "content": "Read the notes"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "notes.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call-1", "content": "TODO: ship"},
    ]
    return b"".join(orjson.dumps(message) + b"\n" for message in messages)


def listed_ids(stdout: str) -> list[str]:
    return re.findall(r"^\s*(?:tool-result|transcript)\s+(\S+)", stdout, re.MULTILINE)


def test_list_shows_artifacts_newest_first(run_cli: RunCli, workspace: Path) -> None:
    directory = artifacts(workspace)
    write_aged(directory / "tool-result-middle.txt", b"m", age_days=2)
    write_aged(directory / "transcript-newest.jsonl", transcript_bytes(), age_days=0)
    write_aged(directory / "tool-result-oldest.txt", b"o", age_days=9)

    result = run_cli("artifacts", "list")

    assert result.exit_code == 0
    assert listed_ids(result.stdout) == ["newest", "middle", "oldest"]


def test_list_ignores_files_that_are_not_artifacts(run_cli: RunCli, workspace: Path) -> None:
    directory = artifacts(workspace)
    write_aged(directory / "tool-result-real.txt", b"r", age_days=0)
    write_aged(directory / "notes.txt", b"n", age_days=0)

    result = run_cli("artifacts", "list")

    assert listed_ids(result.stdout) == ["real"]


def test_list_without_artifacts_says_so(run_cli: RunCli) -> None:
    result = run_cli("artifacts", "list")

    assert result.exit_code == 0
    assert result.stdout.startswith("no artifacts yet")


def test_show_prints_the_full_bytes_of_a_tool_result(run_cli: RunCli, workspace: Path) -> None:
    data = "".join(f"line {n}: ünïcode and [brackets]\n" for n in range(5_000)).encode()
    write_aged(artifacts(workspace) / "tool-result-big.txt", data, age_days=0)

    result = run_cli("artifacts", "show", "big")

    assert result.exit_code == 0
    assert result.stdout.encode() == data


def test_show_prints_escape_sequences_in_a_tool_result_as_text(
    run_cli: RunCli, workspace: Path
) -> None:
    data = b"coloured \x1b[31mred\x1b[0m, titled \x1b]0;pwned\x07, csi \xc2\x9b2J, byte \xe9\n"
    write_aged(artifacts(workspace) / "tool-result-esc.txt", data, age_days=0)

    result = run_cli("artifacts", "show", "esc")

    assert result.exit_code == 0
    assert result.stdout == (
        r"coloured \x1b[31mred\x1b[0m, titled \x1b]0;pwned\x07, csi \x9b2J, byte \xe9" + "\n"
    )


def test_show_raw_prints_a_tool_result_byte_for_byte(run_cli: RunCli, workspace: Path) -> None:
    data = b"coloured \x1b[31mred\x1b[0m\n"
    write_aged(artifacts(workspace) / "tool-result-esc.txt", data, age_days=0)

    result = run_cli("artifacts", "show", "esc", "--raw")

    assert result.stdout.encode() == data


def test_show_finds_an_artifact_by_the_path_a_preview_names(
    run_cli: RunCli, workspace: Path
) -> None:
    write_aged(artifacts(workspace) / "tool-result-abc123.txt", b"payload\n", age_days=0)

    result = run_cli("artifacts", "show", ".agent_tutorial/artifacts/tool-result-abc123.txt")

    assert result.stdout == "payload\n"


def test_show_renders_a_transcript_as_a_table(run_cli: RunCli, workspace: Path) -> None:
    write_aged(artifacts(workspace) / "transcript-t1.jsonl", transcript_bytes(), age_days=0)

    result = run_cli("artifacts", "show", "t1")

    assert result.exit_code == 0
    rows = re.findall(r"^│\s*(\d)\s*│ (\w+)\s+│ (.+?)\s+│$", result.stdout, re.MULTILINE)
    assert [(number, role) for number, role, _ in rows[:3]] == [
        ("1", "user"),
        ("2", "assistant"),
        ("3", "tool"),
    ]
    assert "→ read_file" in result.stdout
    assert "[call-1]" in result.stdout
    assert '{"role"' not in result.stdout


def test_show_raw_prints_a_transcript_as_stored(run_cli: RunCli, workspace: Path) -> None:
    write_aged(artifacts(workspace) / "transcript-t1.jsonl", transcript_bytes(), age_days=0)

    result = run_cli("artifacts", "show", "t1", "--raw")

    assert result.stdout.encode() == transcript_bytes()


def test_show_of_an_unknown_artifact_is_a_usage_error(run_cli: RunCli, workspace: Path) -> None:
    write_aged(artifacts(workspace) / "tool-result-abc.txt", b"x", age_days=0)

    result = run_cli("artifacts", "show", "zzz")

    assert result.exit_code == 2
    assert "no artifact matches 'zzz'" in result.stderr


def test_prune_is_a_dry_run_without_yes(run_cli: RunCli, workspace: Path) -> None:
    directory = artifacts(workspace)
    old = write_aged(directory / "tool-result-old.txt", b"old", age_days=10)
    new = write_aged(directory / "tool-result-new.txt", b"new", age_days=1)

    result = run_cli("artifacts", "prune", "--older-than", "7d")

    assert result.exit_code == 0
    assert ".agent_tutorial/artifacts/tool-result-old.txt" in result.stdout
    assert "tool-result-new.txt" not in result.stdout
    assert "1 artifact(s) older than 7d; dry run, pass --yes to delete" in result.stdout
    assert old.exists()
    assert new.exists()


def test_prune_with_yes_deletes_only_older_artifacts(run_cli: RunCli, workspace: Path) -> None:
    directory = artifacts(workspace)
    old_result = write_aged(directory / "tool-result-old.txt", b"old", age_days=10)
    old_transcript = write_aged(directory / "transcript-old.jsonl", b"{}\n", age_days=30)
    new = write_aged(directory / "tool-result-new.txt", b"new", age_days=1)
    stranger = write_aged(directory / "keep-me.txt", b"mine", age_days=100)

    result = run_cli("artifacts", "prune", "--older-than", "7d", "--yes")

    assert result.exit_code == 0
    assert "deleted 2 artifact(s), 6 B freed" in result.stdout
    assert not old_result.exists()
    assert not old_transcript.exists()
    assert new.exists()
    assert stranger.read_bytes() == b"mine"


def test_prune_leaves_old_files_outside_the_artifacts_directory(
    run_cli: RunCli, workspace: Path
) -> None:
    artifacts(workspace)
    in_workspace = write_aged(workspace / "tool-result-mine.txt", b"w", age_days=30)
    in_state = write_aged(workspace / ".agent_tutorial" / "tool-result-x.txt", b"s", age_days=30)

    result = run_cli("artifacts", "prune", "--older-than", "1d", "--yes")

    assert "deleted 0 artifact(s)" in result.stdout
    assert in_workspace.exists()
    assert in_state.exists()


def test_prune_leaves_a_symlink_and_its_outside_target_alone(
    run_cli: RunCli, workspace: Path, tmp_path: Path
) -> None:
    target = write_aged(tmp_path / "precious.txt", b"precious", age_days=30)
    link = artifacts(workspace) / "tool-result-link.txt"
    link.symlink_to(target)
    stamp = NOW - 30 * DAY_S
    os.utime(link, (stamp, stamp), follow_symlinks=False)

    result = run_cli("artifacts", "prune", "--older-than", "7d", "--yes")

    assert result.exit_code == 0
    assert "deleted 0 artifact(s)" in result.stdout
    assert link.is_symlink()
    assert target.read_bytes() == b"precious"
    assert target.stat().st_mtime == pytest.approx(stamp)


@pytest.mark.parametrize("level", [".agent_tutorial", ".agent_tutorial/artifacts"])
def test_prune_does_not_follow_a_symlinked_directory_outside(
    run_cli: RunCli, workspace: Path, tmp_path: Path, level: str
) -> None:
    outside = tmp_path / "elsewhere"
    (outside / "artifacts").mkdir(parents=True)
    victim = write_aged(outside / "artifacts" / "tool-result-victim.txt", b"v", age_days=30)
    link = workspace / level
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside if level == ".agent_tutorial" else outside / "artifacts")

    result = run_cli("artifacts", "prune", "--older-than", "7d", "--yes")

    assert result.exit_code == 0
    assert "deleted 0 artifact(s)" in result.stdout
    assert victim.read_bytes() == b"v"


@pytest.mark.parametrize("age", ["7", "7 days", "-1d", "1.5d", "7x", ""])
def test_prune_with_bad_age_text_is_a_usage_error(
    run_cli: RunCli, workspace: Path, age: str
) -> None:
    old = write_aged(artifacts(workspace) / "tool-result-old.txt", b"old", age_days=30)

    result = run_cli("artifacts", "prune", "--older-than", age, "--yes")

    assert result.exit_code == 2
    assert "age must look like 30m, 12h, 7d or 2w" in result.stderr
    assert old.exists()


def test_prune_age_units_are_respected(run_cli: RunCli, workspace: Path) -> None:
    directory = artifacts(workspace)
    write_aged(directory / "tool-result-two-hours.txt", b"2h", age_days=2 / 24)
    write_aged(directory / "tool-result-ten-minutes.txt", b"10m", age_days=10 / 1440)

    result = run_cli("artifacts", "prune", "--older-than", "1h")

    assert "tool-result-two-hours.txt" in result.stdout
    assert "tool-result-ten-minutes.txt" not in result.stdout
