"""`why` with kept folds (Explainer(keep_folds=True), what a capacity probe's memo asks
with): a pool folded again after a small claim change reads back what became of the
devices that did not change, and explains exactly what a fresh Explainer explains; on
random counter pools (shares, capacity, taints, a selector that fails on some devices),
for every release that judges pools apart."""

from __future__ import annotations

import random
from typing import Any

import pytest
from builders import judged_counter_pool

from draview.api.claims import ResourceClaim
from draview.engine.judged import device_statuses
from draview.engine.model import AllocRef, EngineOptions
from draview.engine.profile import make_profile
from draview.explain import DeviceIndex, Explainer
from draview.explain.index import PoolDevices, index_judged

RELEASES = ["1.35", "1.36", "1.37"]
GATES = {"DRAPartitionableDevices": True}
CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {},
}
# Fails on a device without that capacity: a runtime error the fold keeps per device.
ERRS = "device.capacity['gpu.example.com'].bw.compareTo(quantity('5')) >= 0"


def _claim(rng: random.Random) -> ResourceClaim:
    body: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": rng.randint(1, 2)}
    roll = rng.random()
    if roll < 0.2:
        body["capacity"] = {"requests": {"bw": "3"}}
    elif roll < 0.35:
        body["selectors"] = [{"cel": {"expression": ERRS}}]
    if rng.random() < 0.3:
        body["tolerations"] = [{"key": "broken", "operator": "Exists"}]
    return ResourceClaim.from_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "want", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": body}]}},
        }
    )


def _ref(name: str, who: str, shareable: bool, rng: random.Random) -> AllocRef:
    share = f"s-{who}" if shareable else None
    consumed = (("bw", str(rng.randint(1, 4))),) if share and rng.random() < 0.5 else ()
    return AllocRef(name, "ns", who, f"uid-{who}", "r", False, share, consumed)


def _change(
    rng: random.Random, refs: list[AllocRef], names: list[str], shareable: set[str]
) -> list[AllocRef]:
    """A claim change as the operator sees them: one claim freed, one taken, or one
    device's holder replaced by another (the same devices in use)."""
    out = list(refs)
    kind = rng.choice(["free", "take", "rename", "rename"])
    if kind == "free" and out:
        out.pop(rng.randrange(len(out)))
    elif kind == "rename" and out:
        k = rng.randrange(len(out))
        who = f"c{rng.randint(0, 99)}"
        out[k] = _ref(out[k].device, who, out[k].share_id is not None, rng)
    else:
        used = {r.device for r in out}
        free = [n for n in names if n not in used or n in shareable]
        if free:
            name = rng.choice(free)
            out.append(_ref(name, f"c{rng.randint(0, 99)}", name in shareable, rng))
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_kept_folds_explain_as_fresh_ones(release: str) -> None:
    opts = EngineOptions(profile=make_profile(release, GATES))
    rng = random.Random(f"why-kept-{release}")
    read_back = moved = 0
    for _ in range(40):
        w, r, names, shareable = judged_counter_pool(rng, opts, CLASS)
        assert r.prepared is not None
        claims = [_claim(rng) for _ in range(2)]
        kept = Explainer(keep_folds=True)
        refs: list[AllocRef] = []
        judged = device_statuses(r.key, r.prepared, refs, (), opts)
        last: PoolDevices | None = None
        for _ in range(10):
            entry = index_judged(r, judged, (), last if judged.changed is not None else None)
            if last is not None and any(
                a is b for a, b in zip(last.devices, entry.devices, strict=True)
            ):
                read_back += 1
                moved += last.remaining != entry.remaining
            index = DeviceIndex()
            index.add(r, entry)
            for c in claims:
                fresh = Explainer().explain(c, index, w.classes)
                assert kept.explain(c, index, w.classes).to_dict() == fresh.to_dict()
            refs = _change(rng, refs, names, shareable)
            judged = device_statuses(r.key, r.prepared, refs, (), opts, judged)
            last = entry
    # Folds patched where devices changed, not only folded anew; with counters left
    # changed too (their debiting devices judged again).
    assert read_back > 100 and moved > 50, (read_back, moved)
