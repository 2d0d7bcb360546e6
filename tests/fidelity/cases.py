"""The worlds where draview once disagreed with the real allocator (tests/fixtures/
fidelity-cases, copied from the project's shared folder): each file's header records
what differed and the allocator's answer, which is the expectation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "fidelity-cases"


@dataclass(frozen=True)
class Case:
    path: Path
    objects: list[dict[str, Any]]
    device: tuple[str, str] | None  # (slice, device) whose state differed
    claim: tuple[str, str] | None  # (namespace, name) whose verdict differed
    allocator: str  # the allocator's answer: "allocatable" or "unallocatable"
    node: str | None  # where the allocator allocates, when it says so

    @property
    def name(self) -> str:
        return self.path.name[:2]


def _header(text: str, field: str) -> str | None:
    m = re.search(rf"^# {field}: (.*)$", text, re.MULTILINE)
    return m.group(1) if m else None


def load(path: Path) -> Case:
    text = path.read_text()
    device = claim = None
    if (d := _header(text, "device")) is not None:
        m = re.match(r"slice (\S+), device (\S+)", d)
        assert m, d
        device = (m.group(1), m.group(2))
    if (c := _header(text, "claim")) is not None:
        ns, _, name = c.split()[0].partition("/")
        claim = (ns, name)
    answer = _header(text, "allocator") or ""
    where = re.search(r"on (node-\S+)", answer)
    return Case(
        path,
        yaml.safe_load(text)["items"],
        device,
        claim,
        answer.split()[0] if answer else "",
        where.group(1) if where else None,
    )


def all_cases() -> list[Case]:
    return [load(p) for p in sorted(CASES.glob("*.yaml"))]
