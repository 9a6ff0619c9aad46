"""Chapter 7 — Skills: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch07.py --prompt "..."   # = agent-tutorial run --chapter 7
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(7)
