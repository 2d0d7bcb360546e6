"""Progress of long reads on stderr, for a person watching a terminal.

Quiet until a command has read more objects than a small cluster holds (a few thousand),
then one line rewritten in place: objects, pages and seconds so far. Never written when
stderr is not a terminal, so scripts and logs see only the answer.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

SHOW_AFTER = 2000  # objects


class Progress:
    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.objects = 0
        self.pages = 0
        self.started = time.monotonic()
        self.shown = False
        self._lock = threading.Lock()

    def add(self, objects: int) -> None:
        """One page of `objects` read (lists of several kinds may run side by side)."""
        with self._lock:
            self.objects += objects
            self.pages += 1
            if not self.enabled or self.objects < SHOW_AFTER:
                return
            seconds = time.monotonic() - self.started
            self.stream.write(
                f"\rkubectl-dra: read {self.objects:,} objects in {self.pages} pages, "
                f"{seconds:.1f} s"
            )
            self.stream.flush()
            self.shown = True

    def done(self) -> None:
        """Clear the line before the answer is printed."""
        with self._lock:
            if self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.shown = False
