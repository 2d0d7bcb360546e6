"""Pool conditions; they keep lastTransitionTime while their status stays the same."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from draview.api.status import Condition


def condition(
    type_: str,
    ok: bool,
    reason: str,
    message: str,
    previous: Mapping[str, Condition] | None,
    now: str | None,
) -> Condition:
    status: Literal["True", "False"] = "True" if ok else "False"
    cond: Condition = {"type": type_, "status": status, "reason": reason, "message": message}
    before = (previous or {}).get(type_)
    if before is not None and before.get("status") == status and "lastTransitionTime" in before:
        cond["lastTransitionTime"] = before["lastTransitionTime"]
    elif now is not None:
        cond["lastTransitionTime"] = now
    return cond


def pool_conditions(
    *,
    observed: int,
    expected: int,
    generation: int,
    errors: int,
    previous: Mapping[str, Condition] | None = None,
    now: str | None = None,
) -> list[Condition]:
    # A pool draview knows of but has no readable slice of (every one is InvalidObject)
    # is not "0 of 0 complete": nothing of it can be counted.
    complete = observed == expected and observed > 0
    if observed == 0:
        reason, message = "NoReadableSlices", "none of the pool's slices could be read"
    else:
        reason = "SliceCountMatch" if complete else "SlicesMissing"
        message = f"{observed} of {expected} slices published at generation {generation}"
    return [
        condition("Complete", complete, reason, message, previous, now),
        condition(
            "Valid",
            errors == 0,
            "ValidationPassed" if errors == 0 else "ValidationFailed",
            "no validation errors" if errors == 0 else f"{errors} validation error(s)",
            previous,
            now,
        ),
    ]
