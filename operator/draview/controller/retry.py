"""One retry policy for status writes: what a failure means, and when to try again.

Transient failures (5xx, 429, 409, timeouts, lost connections) back off per object,
exponentially with jitter up to a cap, never sooner than a Retry-After the server sent.
Permanent ones (400, 403, 404, 413, 422 and other 4xx) would fail the same way again:
the object is parked for a long backoff instead of being retried every batch.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

TRANSIENT_CODES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Failure:
    code: str  # the HTTP status, or "timeout" / "connection"
    permanent: bool
    reason: str
    retry_after: float | None = None


def _retry_after(exc: ApiException) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: rare from the API server, use our own backoff
        return None


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        if status == 0:  # kubernetes_asyncio's way of saying no response arrived
            return Failure("connection", False, str(exc.reason or "no response"))
        transient = status in TRANSIENT_CODES or status >= 500
        return Failure(str(status), not transient, str(exc.reason or ""), _retry_after(exc))
    if isinstance(exc, TimeoutError):
        return Failure("timeout", False, "request timed out")
    if isinstance(exc, OSError | aiohttp.ClientError):
        return Failure("connection", False, str(exc) or type(exc).__name__)
    raise TypeError(f"not a request failure: {exc!r}") from exc


@dataclass(frozen=True)
class RetryPolicy:
    base: float = 0.5  # first transient backoff, seconds
    cap: float = 60.0  # longest transient backoff
    parked: float = 300.0  # backoff after a permanent failure
    jitter: float = 0.5  # fraction of each delay drawn at random, so retries spread out

    def delay(self, attempts: int, failure: Failure, rand: float) -> float:
        """Seconds before attempt `attempts + 1`; `rand` in [0, 1)."""
        if failure.permanent:
            raw = self.parked
        else:
            raw = min(self.cap, self.base * 2 ** max(0, attempts - 1))
        delay = raw * (1 - self.jitter) + raw * self.jitter * rand
        if failure.retry_after is not None:
            delay = max(delay, min(failure.retry_after, self.parked))
        return delay


K = TypeVar("K", bound=Hashable)


@dataclass
class _State:
    attempts: int
    not_before: float
    failure: Failure


class Backoffs(Generic[K]):
    """Backoff state per key (an object): only keys that failed are held."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.clock = clock
        self.rand = rand
        self.state: dict[K, _State] = {}

    def failed(self, key: K, failure: Failure) -> tuple[float, bool]:
        """Record a failure; returns when to retry and whether its reason is new for this
        key (the caller logs only then: once per object and reason)."""
        before = self.state.get(key)
        attempts = (before.attempts if before else 0) + 1
        delay = self.policy.delay(attempts, failure, self.rand())
        not_before = self.clock() + delay
        self.state[key] = _State(attempts, not_before, failure)
        new = before is None or (before.failure.code, before.failure.reason) != (
            failure.code,
            failure.reason,
        )
        return not_before, new

    def succeeded(self, key: K) -> None:
        self.state.pop(key, None)

    def not_before(self, key: K) -> float | None:
        """When `key` may be tried again, if it is still backing off."""
        st = self.state.get(key)
        return st.not_before if st is not None and st.not_before > self.clock() else None

    def clear(self) -> None:
        self.state.clear()

    def parked(self) -> dict[K, Failure]:
        return {k: s.failure for k, s in self.state.items() if s.failure.permanent}
