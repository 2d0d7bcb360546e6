"""The packer behind the writer's memory of objects and the kept status bodies."""

from __future__ import annotations

import json
import random
import tracemalloc

from draview.controller.packing import Packer


def status_text(i: int, rng: random.Random) -> bytes:
    """A pool status as the writer remembers it: the same keys, other names and figures."""
    devices = {
        f"gpu-{d}": {
            "state": rng.choice(["Available", "Allocated", "Unavailable"]),
            "consumers": [f"ns-{rng.randrange(50)}/claim-{rng.randrange(10**6)}"],
        }
        for d in range(8)
    }
    return json.dumps(
        {
            "metadata": {"labels": {"resource.draview.io/driver": "gpu.example.com"}},
            "spec": {"driver": "gpu.example.com", "pool": f"node-{i}"},
            "status": {
                "summary": {"total": 8, "available": rng.randrange(9)},
                "devices": devices,
                "conditions": [{"type": "Complete", "status": "True", "reason": "AllSlices"}],
            },
        }
    ).encode()


def test_texts_packed_before_and_after_the_dictionary_all_read_back() -> None:
    rng = random.Random(7)
    texts = [status_text(i, rng) for i in range(300)]
    packer = Packer(samples=100)
    blobs = [packer.pack(t) for t in texts]
    assert packer.dict_id != 0  # learnt after the 100th
    assert [packer.unpack(b) for b in blobs] == texts


def test_the_dictionary_makes_what_is_kept_smaller() -> None:
    rng = random.Random(8)
    learn = [status_text(i, rng) for i in range(200)]
    later = [status_text(i, rng) for i in range(200, 400)]
    alone, learnt = Packer(samples=10**9), Packer(samples=200)
    for t in learn:
        alone.pack(t), learnt.pack(t)
    assert alone.dict_id == 0 and learnt.dict_id != 0
    size_alone = sum(len(alone.pack(t)) for t in later)
    size_learnt = sum(len(learnt.pack(t)) for t in later)
    assert size_learnt * 2 < size_alone, (size_learnt, size_alone)


def test_too_little_to_learn_from_packs_each_text_alone() -> None:
    packer = Packer(samples=3)
    blobs = [packer.pack(b"{}") for _ in range(3)]
    assert packer.dict_id == 0  # zstd cannot learn from three tiny texts: given up, not raised
    blobs.append(packer.pack(b'{"a": 1}'))
    assert [packer.unpack(b) for b in blobs] == [b"{}", b"{}", b"{}", b'{"a": 1}']


def test_no_more_is_held_for_learning_than_the_byte_bound() -> None:
    rng = random.Random(9)
    packer = Packer(samples=10**9, sample_bytes=50_000)
    for i in range(100):
        packer.pack(status_text(i, rng))  # ~1.5 KB each: the bound is reached by the 34th
    assert packer.dict_id != 0


def test_a_huge_text_is_packed_but_not_learnt_from() -> None:
    packer = Packer(samples=2)
    huge = b"x" * (1 << 20)
    assert packer.unpack(packer.pack(huge)) == huge
    assert packer.dict_id == 0 and packer._sampled == []  # nothing sampled yet


def test_a_packed_text_holds_the_memory_of_its_frame_only() -> None:
    rng = random.Random(10)
    texts = [status_text(i, rng) for i in range(400)]
    packer = Packer(samples=100)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        blobs = [packer.pack(t) for t in texts[100:]]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    framed = sum(len(b) for b in blobs)
    # Each bytes object's header and the list are ~40 B a text; a bound-sized object
    # would hold the text's size (~1.5 KB) instead of its frame's.
    assert held < framed + 100 * len(blobs), (held, framed)
