"""Chunked lists and their snapshots (explain/chunked.py), and the index's change log
that kept folds read (explain/index.py DeviceIndex.log)."""

from __future__ import annotations

import random

import pytest

from draview.explain.chunked import CHUNK, Chunked


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 3])
def test_a_snapshot_stays_as_it_was_whatever_is_put_later(size: int) -> None:
    rng = random.Random(size)
    items = Chunked(range(size))
    model = list(range(size))
    snapshots = []
    for step in range(40):
        snapshots.append((items.snapshot(), list(model)))
        if size:
            i = rng.randrange(size)
            items[i] = model[i] = 1000 + step
    for snap, was in snapshots:
        assert list(snap) == was and len(snap) == len(was)
        assert [snap[i] for i in range(len(was))] == was
        assert list(snap[1:3]) == was[1:3]
        if was:
            assert snap[-1] == was[-1]
    assert list(items) == model and [items[i] for i in range(size)] == model


def test_places_past_the_end_are_refused() -> None:
    items = Chunked("abc")
    with pytest.raises(IndexError):
        items[3] = "d"
    with pytest.raises(IndexError):
        items.snapshot()[3]
    with pytest.raises(IndexError):
        _ = items[-1]  # Chunked itself takes places from the start only


def test_the_index_logs_entries_replaced_until_pools_come_or_go() -> None:
    from builders import device, device_class, rslice, world

    from draview.engine.world import compute_world
    from draview.explain.index import DeviceIndex, index_pool

    w = world(
        device_class(),
        rslice("a", [device("d")], pool="a", node="n-a"),
        rslice("b", [device("d")], pool="b", node="n-b"),
    )
    a, b = compute_world(w)
    index = DeviceIndex.build([a, b])
    shape = index.shape
    index.add(b, index.pools[b.key])  # the same entry: nothing to log
    assert (index.log, index.shape) == ([], shape)
    index.add(b, index_pool(b))
    index.add(a, index_pool(a))
    assert (index.log, index.shape) == ([b.key, a.key], shape)
    index.drop(a.key)
    assert index.log == [] and index.shape == shape + 1
    index.add(a, index_pool(a))  # back, last: the pools' order changed
    assert list(index.pools) == [b.key, a.key] and index.shape == shape + 2
    for _ in range(200):  # the log is cleared as it outgrows the pools
        index.add(b, index_pool(b))
    assert len(index.log) <= len(index.pools) + 65 and index.shape > shape + 2
