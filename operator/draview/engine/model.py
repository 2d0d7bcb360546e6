"""The engine's own small value types."""

from __future__ import annotations

from dataclasses import dataclass, field

from draview.engine.profile import DEFAULT, Profile

PoolKey = tuple[str, str]  # (driver, pool name)


@dataclass(frozen=True, slots=True)
class AllocRef:
    """One allocation result of one claim, as seen from the device it names."""

    device: str
    claim_namespace: str
    claim_name: str
    claim_uid: str
    request: str
    admin_access: bool = False
    share_id: str | None = None
    consumed: tuple[tuple[str, str], ...] = ()

    @property
    def sort_key(self) -> tuple[str, str, str, str]:
        return (self.claim_namespace, self.claim_name, self.request, self.share_id or "")


@dataclass(frozen=True, slots=True)
class EngineOptions:
    # Attributes that name a partition type when a slice does not say which one it uses.
    partition_attributes: tuple[str, ...] = ()
    # Allocations listed per device before the list is capped (objects stay far below
    # the API server's 1.5 MB limit even for a shareable device with hundreds of shares).
    max_listed_allocations: int = 32
    # Partition groups up to this many candidate devices are solved exactly; larger
    # ones greedily, which gives a lower bound.
    exact_partition_limit: int = 20
    # The release and feature gates whose allocator the engine mirrors.
    profile: Profile = DEFAULT
    # Off for a world judged only to be explained (fit's world after its copies): the
    # pool status then has no fragmentation figures, which nothing there reads.
    fragmentation: bool = True


@dataclass(slots=True)
class ValidationErrors:
    """Validation errors of a pool; `allocator` ones make its devices unschedulable."""

    allocator: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    def all(self) -> list[str]:
        return self.allocator + self.other
