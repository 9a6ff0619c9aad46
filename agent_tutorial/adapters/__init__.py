"""Adapters to the outside world: to the model (the OpenAI SDK and the wire around it) and,
for the tools, to the operating system (the filesystem, gitignore, the shell, the sandbox,
processes and hooks). Neither side imports the features (tests/test_structure.py)."""
