"""`python -m agent_tutorial` is the same as the `agent-tutorial` command."""

from agent_tutorial.cli import main

if __name__ == "__main__":
    main()
