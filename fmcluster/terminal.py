"""Progress of long work (a synthesis takes 10 to 30 seconds), shown on a terminal and nowhere else.

One line on standard error, rewritten in place: the step under way and the seconds it has taken,
updated every second, and cleared when the work ends (or fails, or is interrupted), so that what
the command prints afterwards starts on a clean line. Nothing at all is written when standard
error is not a terminal (a pipe, a file, a test's capture), when the terminal cannot move its
cursor (TERM=dumb), or in CI (the CI variable that CI services set): logs stay as they were.
"""

from __future__ import annotations

import os
import threading
import time
from types import TracebackType
from typing import Callable, Mapping, TextIO

CLEAR = "\r\x1b[K"  # carriage return, then erase to the end of the line (ECMA-48 EL)


def wanted(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether progress belongs on `stream`: a terminal, outside CI, that can rewrite a line."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
    in_ci = env.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return terminal and not in_ci and env.get("TERM", "") != "dumb"


class Progress:
    """`with Progress(sys.stderr) as progress: progress.step("building ...")`. `on` says whether anything
    is shown; when it is not, `step` does nothing, and callers may skip the work of reporting."""

    def __init__(self, stream: TextIO, env: Mapping[str, str] | None = None,
                 prefix: str = "fmcluster: ", clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream  # the command line's standard error
        self.on = wanted(self.stream, os.environ if env is None else env)
        self.prefix = prefix
        self.clock = clock
        self._text = ""
        self._started = 0.0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._ticker: threading.Thread | None = None

    def step(self, text: str) -> None:
        """Show `text` as the step now under way (its seconds count from now)."""
        if not self.on:
            return
        with self._lock:
            self._text, self._started = text, self.clock()
            self._draw()
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="fmcluster-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._done.wait(1.0):
            with self._lock:
                self._draw()

    def _draw(self) -> None:
        """Rewrite the line; called with the lock held. A terminal that went away ends the display."""
        if self._done.is_set():
            return
        seconds = int(self.clock() - self._started)
        line = f"{self.prefix}{self._text}" + (f" ({seconds} s)" if seconds else "")
        try:
            self.stream.write(CLEAR + line)
            self.stream.flush()
        except (OSError, ValueError):
            self._done.set()

    def close(self) -> None:
        """Stop the display and clear its line (nothing to clear when no step was shown)."""
        if self._done.is_set() and self._ticker is None:
            return
        with self._lock:
            shown = self._ticker is not None and not self._done.is_set()
            self._done.set()
            if shown:
                try:
                    self.stream.write(CLEAR)
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
