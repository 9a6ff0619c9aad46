"""Chapter 5 — Todo planning: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch05.py --prompt "..."   # = agent-tutorial run --chapter 5
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(5)
