"""Adapters to the outside world: the OpenAI SDK, the shell, the filesystem, the demo model."""
