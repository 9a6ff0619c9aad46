"""Chapter 3 — Permission policy: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch03.py --prompt "..."   # = agent-tutorial run --chapter 3
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(3)
