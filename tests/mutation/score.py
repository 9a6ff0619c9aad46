"""The mutation score of `make mutate`, per module and overall, from mutmut's results.

mutmut (3.x) leaves its results in `mutants/`: one `.meta` file per mutated module (the
exit code of the tests against each mutant) beside the mutated copy of the module, in which
every mutant is a function of its own next to the original (`x_name__mutmut_orig`). A
mutant is killed when the tests failed or timed out against it. The score is
killed / (mutants - equivalent ones), where the equivalent ones are listed in
`equivalent.txt` beside this file, each with the mutated line it must still show, so an
entry that no longer names the same mutant is reported rather than silently excluded.

    python tests/mutation/score.py [--survivors]   # exits 1 below the target or on a stale entry
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TARGET = 1.0
"""The share of non-equivalent mutants the tests must kill: all of them. A survivor is
either a missing test or an equivalent mutant to list in `equivalent.txt` with its reason."""
MUTANTS = Path("mutants")
EQUIVALENT = Path(__file__).with_name("equivalent.txt")
KILLED_EXIT_CODES = {1, 3, 36, 24, -24, 152, 255}  # test failure, pytest error, timeouts
SURVIVED_EXIT_CODES = {0, 5, 33}  # tests passed, or no test reached the mutant


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str
    """mutmut's name: `package.module.x_function__mutmut_N` (methods: `xǁClassǁmethod…`)."""
    module: str
    killed: bool
    diff: list[str]
    """The changed lines, `-` original and `+` mutated, stripped; empty for a killed one."""


@dataclass(frozen=True, slots=True)
class Exclusion:
    name: str
    mutated_line: str
    why: str


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--survivors", action="store_true", help="print each survivor's diff")
    arguments = parser.parse_args()
    if not MUTANTS.is_dir():
        print("no mutants/ here: run `make mutate` (or `mutmut run`) first", file=sys.stderr)
        return 2
    mutants = [mutant for meta in sorted(MUTANTS.rglob("*.py.meta")) for mutant in _read(meta)]
    exclusions = _read_exclusions(EQUIVALENT)
    stale = _stale(exclusions, {mutant.name: mutant for mutant in mutants})
    excluded = {exclusion.name for exclusion in exclusions} - {entry.name for entry, _ in stale}
    score = _report(mutants, excluded)
    survivors = [m for m in mutants if not m.killed and m.name not in excluded]
    if arguments.survivors:
        for mutant in survivors:
            print(f"\n{mutant.name}\n  " + "\n  ".join(mutant.diff))
    for entry, problem in stale:
        print(f"stale entry in {EQUIVALENT.name}: {entry.name}: {problem}")
    return 0 if score >= TARGET and not stale else 1


def _read(meta: Path) -> list[Mutant]:
    exit_codes: dict[str, int | None] = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    source = meta.with_suffix("")  # the mutated module, `x.py` beside `x.py.meta`
    functions = _function_sources(source.read_text("utf-8"))
    module = ".".join(source.relative_to(MUTANTS).with_suffix("").parts)
    mutants = []
    for name, exit_code in exit_codes.items():
        killed = exit_code in KILLED_EXIT_CODES
        if not killed and exit_code not in SURVIVED_EXIT_CODES:
            raise SystemExit(f"{name}: mutmut left exit code {exit_code!r}; rerun `make mutate`")
        diff = [] if killed else _diff(functions, name.rpartition(".")[2])
        mutants.append(Mutant(name, module, killed, diff))
    return mutants


def _function_sources(text: str) -> dict[str, str]:
    """Every function and method of a mutated module by name, its source with the name
    taken out, so that the original and a mutant differ only where the mutation is (which
    may be a default value in the signature)."""
    lines = text.splitlines()
    found = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
            source = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            found[node.name] = source.replace(f"def {node.name}(", "def (", 1)
    return found


def _diff(functions: dict[str, str], mutant: str) -> list[str]:
    original = functions[mutant.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"]
    changed = difflib.unified_diff(original.splitlines(), functions[mutant].splitlines(), n=0)
    return [
        line[0] + line[1:].strip()
        for line in changed
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def _read_exclusions(path: Path) -> list[Exclusion]:
    """`name | mutated line | why` per line (the line may hold ` | ` itself, as in
    `Lead | None`; the name and the why do not); `#` starts a comment line."""
    exclusions = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, rest = line.partition(" | ")
        mutated_line, _, why = rest.rpartition(" | ")
        parts = [name.strip(), mutated_line.strip(), why.strip()]
        if not all(parts):
            raise SystemExit(f"{path}:{number}: expected `name | mutated line | why`")
        exclusions.append(Exclusion(*parts))
    return exclusions


def _stale(exclusions: list[Exclusion], by_name: dict[str, Mutant]) -> list[tuple[Exclusion, str]]:
    stale = []
    for exclusion in exclusions:
        mutant = by_name.get(exclusion.name)
        if mutant is None:
            stale.append((exclusion, "no such mutant"))
        elif mutant.killed:
            stale.append((exclusion, "the tests kill it: remove the entry"))
        elif "+" + exclusion.mutated_line not in mutant.diff:
            stale.append((exclusion, f"it now mutates {mutant.diff}"))
    return stale


def _report(mutants: list[Mutant], excluded: set[str]) -> float:
    counts: dict[str, Counter[str]] = {}
    for mutant in mutants:
        outcome = (
            "killed" if mutant.killed else "equivalent" if mutant.name in excluded else "survived"
        )
        counts.setdefault(mutant.module, Counter())[outcome] += 1
    print(f"{'module':<45} {'killed':>7} {'survived':>9} {'equivalent':>11} {'score':>7}")
    total: Counter[str] = Counter()
    for module, count in sorted(counts.items()):
        print(_row(module, count))
        total.update(count)
    print(_row("all listed modules", total))
    everything = total["killed"] + total["survived"] + total["equivalent"]
    print(f"killed {total['killed']} of all {everything} mutants, equivalent ones included")
    print(f"target: {TARGET:.0%} of the non-equivalent mutants killed")
    return _score(total)


def _row(label: str, count: Counter[str]) -> str:
    return (
        f"{label:<45} {count['killed']:>7} {count['survived']:>9} {count['equivalent']:>11} "
        f"{_score(count):>7.1%}"
    )


def _score(count: Counter[str]) -> float:
    judged = count["killed"] + count["survived"]
    return count["killed"] / judged if judged else 1.0


if __name__ == "__main__":
    sys.exit(main())
