"""A token bucket for API writes (`--qps`, `--burst`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.tokens = float(self.burst)
        self.clock = clock
        self.sleep = sleep
        self.stamp = clock()
        self._lock = asyncio.Lock()
        # No token before this time: the API server asked every client to wait (429).
        self.paused_until = 0.0

    def pause(self, seconds: float) -> None:
        """Hand out no token for `seconds` (from now), nor any saved up before."""
        self.paused_until = max(self.paused_until, self.clock() + seconds)

    async def take(self) -> None:
        async with self._lock:
            while True:
                now = self.clock()
                if now < self.paused_until:
                    await self.sleep(self.paused_until - now)
                    self.tokens, self.stamp = 0.0, self.paused_until
                    continue
                self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
                self.stamp = now
                # The epsilon absorbs float rounding: after sleeping exactly the deficit the
                # bucket may hold 0.999…, and a clock that cannot advance by the last
                # 1e-17 would otherwise spin.
                if self.tokens >= 1 - 1e-9:
                    self.tokens = max(0.0, self.tokens - 1)
                    return
                await self.sleep((1 - self.tokens) / self.qps)
