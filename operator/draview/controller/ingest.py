"""Ingest: every watched event into the store, and the pools it makes dirty onto the queue.

One handler per watched kind, each O(size of the object). Adding a watched kind is one
handler here, one key in KEYS and one line in informers.WATCHED.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from draview.api.fastclaim import read_claim
from draview.api.fastslice import Interner, slice_from_object
from draview.api.node_info import NodeInfo
from draview.api.taints import DeviceClass, DeviceTaintRule
from draview.api.world import ObjectProblem, object_name, pool_of, short_error
from draview.controller import metrics
from draview.controller.node_index import NodeIndex
from draview.controller.queue import PoolQueue
from draview.controller.store import Store

log = logging.getLogger("draview.controller")

Handler = Callable[[str, dict[str, Any]], None]  # (event type, object)

# Entries the slice interner may hold before it is cleared (see Ingest.interner).
INTERNER_MIN = 200_000


def metadata(obj: dict[str, Any]) -> dict[str, Any]:
    # The API server never sends metadata that is not a map, but a handler must not
    # raise on what it is given: such an object is read (and reported) as nameless.
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


# How each watched kind is keyed in the store, and the metadata field that key is: by
# uid (a name only if there is none; a claim's name needs its namespace); taint rules
# and Nodes (cluster-scoped, read as metadata only) by name.
def _by_uid(meta: dict[str, Any]) -> str:
    return str(meta.get("uid") or meta.get("name"))


def _claim_key(meta: dict[str, Any]) -> str:
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")


def _by_name(meta: dict[str, Any]) -> str:
    return str(meta.get("name"))


KEYS: dict[str, tuple[Callable[[dict[str, Any]], str], str]] = {
    "slice": (_by_uid, "uid"),
    "claim": (_claim_key, "uid"),
    "rule": (_by_name, "name"),
    "node": (_by_name, "name"),
}


class Ingest:
    def __init__(self, store: Store, nodes: NodeIndex, queue: PoolQueue) -> None:
        self.store = store
        self.nodes = nodes
        self.queue = queue
        # uid -> resourceVersion seen, as an int when it is one (etcd's revisions are):
        # 28 bytes instead of a 57-byte string, for each of a million objects.
        self.versions: dict[str, int | str] = {}
        # Shares equal values between the slices read; cleared when it grows past what
        # the slices alive can explain, so values of deleted devices do not pile up.
        self.interner = Interner()
        self.interner_limit = INTERNER_MIN

    def handler(self, kind: str) -> Handler:
        """The event handler of a watched kind ("slice", "claim", "rule", "node")."""
        return {
            "slice": self.slice_event,
            "claim": self.claim_event,
            "rule": self.taint_rule_event,
            "node": self.node_event,
        }[kind]

    def _seen(self, obj: dict[str, Any]) -> str | None:
        """The object's uid, or None when this exact version was already applied."""
        meta = metadata(obj)
        uid = _by_uid(meta)
        rv = str(meta.get("resourceVersion") or "")
        # Only plain decimals of at most 18 digits become ints ("007" or "+1" stay text:
        # equal ints must mean equal strings).
        plain = rv.isascii() and rv.isdecimal() and len(rv) < 19 and rv[0] != "0"
        seen: int | str = int(rv) if plain else rv
        if rv and self.versions.get(uid) == seen:
            return None
        self.versions[uid] = seen
        return uid

    def slice_event(self, kind: str, obj: dict[str, Any]) -> None:
        uid = _by_uid(metadata(obj))
        if kind == "DELETED":
            self.versions.pop(uid, None)
            self.queue.mark(self.store.delete_slice(uid))
            return
        if self._seen(obj) is None:
            return
        if len(self.interner) > self.interner_limit:
            self.interner.clear()
        try:
            s = slice_from_object(obj, self.interner)
        except (ValidationError, AttributeError, TypeError) as exc:
            msg = short_error(exc) if isinstance(exc, ValidationError) else str(exc)
            problem = ObjectProblem("ResourceSlice", object_name(obj), msg, pool_of(obj))
            metrics.INVALID_OBJECTS.labels("ResourceSlice").inc()
            log.warning("unreadable ResourceSlice", extra={"object": problem.name, "error": msg})
            self.queue.mark(self.store.put_slice(uid, None, problem))
            return
        self.queue.mark(self.store.put_slice(uid, s))

    def claim_event(self, kind: str, obj: dict[str, Any]) -> None:
        uid = _claim_key(metadata(obj))
        if kind == "DELETED":
            self.versions.pop(uid, None)
            self.queue.mark(self.store.delete_claim(uid))
        elif self._seen(obj) is not None:
            self._read_claim(uid, obj)
        metrics.CLAIMS_TRACKED.set(len(self.store.claim_pools))

    def _read_claim(self, uid: str, obj: dict[str, Any]) -> None:
        # As offline (api.world): a damaged claim keeps its allocated devices taken and
        # is a validation error of each pool its allocation names.
        claim, message = read_claim(obj)
        if message is not None:
            name = object_name(obj)
            metrics.INVALID_OBJECTS.labels("ResourceClaim").inc()
            log.warning("unreadable ResourceClaim", extra={"object": name, "error": message})
            if claim is None:
                self.queue.mark(self.store.delete_claim(uid))
                return
            pools = sorted({(r.driver, r.pool) for r in claim.results})
            problems = [ObjectProblem("ResourceClaim", name, message, p) for p in pools]
            self.queue.mark(self.store.put_claim(uid, claim, problems))
            return
        assert claim is not None
        self.queue.mark(self.store.put_claim(uid, claim))

    def taint_rule_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = _by_name(metadata(obj))
        if kind == "DELETED":
            self.queue.mark(self.store.delete_taint_rule(name))
            return
        try:
            rule = DeviceTaintRule.from_object(obj)
        except (ValidationError, AttributeError, TypeError) as exc:
            metrics.INVALID_OBJECTS.labels("DeviceTaintRule").inc()
            log.warning("unreadable DeviceTaintRule", extra={"object": name, "error": str(exc)})
            return
        self.queue.mark(self.store.put_taint_rule(name, rule))

    def node_event(self, kind: str, obj: dict[str, Any]) -> None:
        """Only pools whose slices select nodes can change (controller/node_index.py)."""
        if kind == "DELETED":
            self.queue.mark(self.nodes.delete(_by_name(metadata(obj))))
        else:
            try:
                node = NodeInfo.from_object(obj)
            except ValueError as exc:  # an API server sends named nodes with string labels
                log.warning(
                    "unreadable Node", extra={"object": object_name(obj), "error": str(exc)}
                )
                return
            self.queue.mark(self.nodes.put(node))
        metrics.NODES.set(len(self.nodes))

    def class_event(self, kind: str, obj: dict[str, Any]) -> None:
        """DeviceClasses only feed explanations of pending claims; they dirty no pool."""
        name = _by_name(metadata(obj))
        self.store.changes += 1
        if kind == "DELETED":
            self.store.classes.pop(name, None)
            return
        try:
            self.store.classes[name] = DeviceClass.from_object(obj)
        except (ValidationError, AttributeError, TypeError) as exc:
            metrics.INVALID_OBJECTS.labels("DeviceClass").inc()
            log.warning("unreadable DeviceClass", extra={"object": name, "error": str(exc)})

    def listed(self) -> None:
        """After a full list: let the interner grow to twice what the live slices need."""
        self.interner_limit = max(INTERNER_MIN, 2 * len(self.interner))
