"""A fixed clock for code that reads the real one (the Lambda handlers' `datetime.now`), so that no
test depends on the day it runs. Not a test module."""

from __future__ import annotations

from datetime import datetime, tzinfo


def frozen_at(now: datetime) -> type[datetime]:
    """A `datetime` class whose `now(tz)` is the aware time `now` in `tz`, to set as a module's
    `datetime` with monkeypatch; everything else is datetime's own."""
    if now.tzinfo is None:
        raise ValueError("frozen_at takes an aware time")

    class Frozen(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> "Frozen":
            return cls.fromtimestamp(now.timestamp(), tz)

        @classmethod
        def utcnow(cls) -> "Frozen":
            raise AssertionError("utcnow() reads a naive clock: use now(timezone.utc)")

    return Frozen
