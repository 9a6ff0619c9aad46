"""The offline demo model (`--model demo`): a deterministic script, not an LLM, that tours
the workspace with whichever tools the request offers and ends with a short report.

Start in `model.py` (`DemoModel` routes each request), then `tour.py` (which tool calls to
make), `long_tour.py` (chapter 8's tour, sized so every compaction layer fires) and
`report.py` (the closing report). `script.py` holds the shared value types.
"""

from agent_tutorial.demo.long_tour import (
    BULK_CAT_MIN_BYTES,
    BULK_RESULT_MIN_BYTES,
    LARGE_READ_MIN_BYTES,
    LARGE_READ_TARGET_BYTES,
    LARGE_READS,
    LONG_PHASES,
    LONG_TOUR_ROUNDS_BEFORE_BULK,
    READ_FILE_MAX_LINES,
    SKIM_LINES,
)
from agent_tutorial.demo.model import BYTES_PER_TOKEN, STREAM_PIECES, DemoModel
from agent_tutorial.demo.report import write_report
from agent_tutorial.demo.script import (
    DEFINITION_PATTERN,
    DEMO_BANNER,
    LISTED_LINES,
    SOURCE_SUFFIXES,
    SUBAGENT_MARKER,
    Outcome,
    Script,
    SourceFile,
    Step,
    StepKind,
)
from agent_tutorial.demo.tour import (
    BASE_PHASES,
    READ_LINES,
    find_source_files,
    plan_tour,
)

__all__ = [
    "BASE_PHASES",
    "BULK_CAT_MIN_BYTES",
    "BULK_RESULT_MIN_BYTES",
    "BYTES_PER_TOKEN",
    "DEFINITION_PATTERN",
    "DEMO_BANNER",
    "LARGE_READS",
    "LARGE_READ_MIN_BYTES",
    "LARGE_READ_TARGET_BYTES",
    "LISTED_LINES",
    "LONG_PHASES",
    "LONG_TOUR_ROUNDS_BEFORE_BULK",
    "READ_FILE_MAX_LINES",
    "READ_LINES",
    "SKIM_LINES",
    "SOURCE_SUFFIXES",
    "STREAM_PIECES",
    "SUBAGENT_MARKER",
    "DemoModel",
    "Outcome",
    "Script",
    "SourceFile",
    "Step",
    "StepKind",
    "find_source_files",
    "plan_tour",
    "write_report",
]
