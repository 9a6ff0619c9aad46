"""Chapter 8 — Context compaction: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch08.py --prompt "..."   # = agent-tutorial run --chapter 8
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(8)
