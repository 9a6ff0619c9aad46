"""Chapter 1 — The agent loop: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch01.py --prompt "..."   # = agent-tutorial run --chapter 1
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(1)
