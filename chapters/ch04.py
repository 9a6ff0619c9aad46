"""Chapter 4 — Hooks: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch04.py --prompt "..."   # = agent-tutorial run --chapter 4
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(4)
