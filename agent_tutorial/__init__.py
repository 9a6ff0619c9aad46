"""agent-tutorial: a terminal coding agent built one chapter at a time."""

__version__ = "0.1.0"
