"""What the sandbox costs per command: the median wall time of `bash -c true` started
plainly and started confined (workspace-write with the network off, and on), interleaved so
a machine that gets busier slows them alike, plus the time to decide the mounts alone and
a whole bash-tool run (`run_command`: start, pump, sweep) each way; and the CPU time the
children used (user + system), the steadier figure on a shared machine.

Run with `make bench` (`.venv/bin/python benchmarks/bench_sandbox.py [RUNS]`).
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agent_tutorial.adapters.sandbox import SandboxPolicy, sandbox_available, sandboxed
from agent_tutorial.adapters.shell import run_command

DEFAULT_RUNS = 20
COMMAND = ["bash", "-c", "true"]


def plain() -> None:
    subprocess.run(COMMAND, check=True)


def start(policy: SandboxPolicy) -> None:
    with sandboxed(policy, COMMAND, cwd=policy.workspace) as launch:
        subprocess.run(launch.argv, pass_fds=launch.pass_fds, check=True)


def decide_only(policy: SandboxPolicy) -> None:
    with sandboxed(policy, COMMAND, cwd=policy.workspace):
        pass


def through_the_tool(policy: SandboxPolicy | None, workspace: Path) -> None:
    result = run_command("true", cwd=workspace, timeout_s=60, sandbox=policy)
    assert result.exit_code == 0, result.output


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS
    reason = sandbox_available()
    if reason is not None:
        print(f"sandbox: not measured, {reason}")
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "workspace").mkdir()
        (root / "tmp").mkdir()
        policies = {
            network: SandboxPolicy(
                mode="workspace-write",
                network=network,
                workspace=root / "workspace",
                private_tmp=root / "tmp",
                home=Path.home(),
            )
            for network in (False, True)
        }
        contenders: dict[str, Callable[[], None]] = {
            "plain bash -c true": plain,
            "sandboxed, network off": lambda: start(policies[False]),
            "sandboxed, network on": lambda: start(policies[True]),
            "deciding the mounts alone": lambda: decide_only(policies[False]),
            "run_command, plain": lambda: through_the_tool(None, root / "workspace"),
            "run_command, sandboxed": lambda: through_the_tool(policies[False], root / "workspace"),
        }
        times: dict[str, list[float]] = {label: [] for label in contenders}
        cpu: dict[str, list[float]] = {label: [] for label in contenders}
        for _ in range(runs + 1):  # the first round warms caches and is dropped
            for label, contender in contenders.items():
                started, cpu_before = time.perf_counter(), child_cpu_seconds()
                contender()
                times[label].append(time.perf_counter() - started)
                cpu[label].append(child_cpu_seconds() - cpu_before)
    wall = {label: statistics.median(values[1:]) * 1000 for label, values in times.items()}
    used = {label: statistics.median(values[1:]) * 1000 for label, values in cpu.items()}
    baseline = wall["plain bash -c true"]
    print(f"sandbox cost per command, median of {runs} runs (wall, children's CPU):")
    for label, milliseconds in wall.items():
        base = wall["run_command, plain"] if label.startswith("run_command") else baseline
        ratio = f"  {milliseconds / base:4.1f}x plain" if "sandboxed" in label else ""
        print(f"  {label:<28} {milliseconds:7.1f} ms {used[label]:6.1f} ms CPU{ratio}")


if __name__ == "__main__":
    main()
