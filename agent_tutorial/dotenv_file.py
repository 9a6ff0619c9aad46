"""`.agent_tutorial/.env` read one way for everyone who reads it.

Settings (through pydantic-settings), the key that `api_key_env` names and the values the
redactor masks all come from python-dotenv's parsing, so the key sent is the value masked
(quotes, `export`, trailing `# comments` handled alike). python-dotenv is imported only
when a file is read: `--help` does not pay for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def read_dotenv(path: Path) -> Mapping[str, str | None]:
    """The variables of a `.env` file, none if there is no file; raises `OSError` or
    `UnicodeDecodeError` when there is one that cannot be read."""
    from dotenv import dotenv_values

    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as stream:
        return dotenv_values(stream=stream)
