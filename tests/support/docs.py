"""What the docs show of a command's output, for the tests that hold it to the real output. Not a test
module."""

from __future__ import annotations

from tests.support.paths import ROOT


def readme_output(command: str) -> str:
    """What the docs' Commands page shows under `$ COMMAND`, up to the next prompt or the end of the block."""
    text = (ROOT / "docs" / "commands.md").read_text()
    start = text.index(f"$ {command}\n") + len(command) + 3
    end = min(i for i in (text.find("\n$ ", start), text.find("\n```", start)) if i >= 0)
    return text[start:end + 1]
