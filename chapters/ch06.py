"""Chapter 6 — Subagents: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch06.py --prompt "..."   # = agent-tutorial run --chapter 6
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(6)
