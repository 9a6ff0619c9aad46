"""The `agent-tutorial` subcommands apart from `run` (`sessions`, `artifacts`, `bench`),
the prompt `run` reads, and the one edge where every failure becomes a message and an exit
code (`edge`). `cli.py` holds the app and `run`'s flags and registers these."""
