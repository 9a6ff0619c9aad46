"""Chapter 2 — Tools: files and search: the fixed entry for this chapter's profile.

.venv/bin/python chapters/ch02.py --prompt "..."   # = agent-tutorial run --chapter 2
"""

from agent_tutorial.cli import run_chapter

if __name__ == "__main__":
    run_chapter(2)
