"""A one-line progress bar on stderr, so stdout stays free for the summary."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 30
_SETTLED_AFTER = 10


class Progress:
    """Redraws one line on a terminal; elsewhere (CI logs, pipes) prints every 10 %.

    ``enabled=False`` keeps it silent (tests, library use).
    """

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.done = 0
        self.started = time.monotonic()
        self._tty = self.stream.isatty()
        self._last_draw = 0.0
        self._last_decile = -1

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        finished = self.done >= self.total
        if self._tty:
            # Redrawing more than ten times a second costs time and shows nothing more.
            if finished or now - self._last_draw >= 0.1:
                self._last_draw = now
                self.stream.write("\r" + self._line(now))
                self.stream.flush()
        else:
            decile = self.done * 10 // self.total
            if decile != self._last_decile:
                self._last_decile = decile
                self.stream.write(self._line(now) + "\n")
                self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._tty:
            self.stream.write("\n")
            self.stream.flush()

    def _line(self, now: float) -> str:
        share = min(self.done / self.total, 1.0)
        filled = round(share * _WIDTH)
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        # The first answers come while caches fill: a rate from them would promise hours.
        settled = self.done >= _SETTLED_AFTER and elapsed > 0
        eta = _clock((self.total - self.done) / rate) if settled and rate > 0 else "-:--"
        return (
            f"{self.label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {self.done}/{self.total} "
            f"{share:4.0%} {rate:5.1f}/s eta {eta}"
        )


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"
