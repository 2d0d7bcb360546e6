"""Read Kubernetes objects from files or stdin: a List, multi-document YAML, or JSON.

A JSON List (what `kubectl get … -o json` prints) is decoded one item at a time, so a
cluster dump never exists twice in memory, once decoded and once normalised.

Every way an input can be unreadable ends in one InputError (one line for the user):
too large, not UTF-8, not YAML or JSON, cut off, nested too deep, or expanded by aliases
beyond the limits in `draview.cli.limits`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

import yaml

from draview.api.world import iter_objects
from draview.cli.limits import (
    DEFAULT_LIMITS,
    LimitExceeded,
    Limits,
    bounded_loader,
    check_depth,
    text_nesting,
)

_decoder = json.JSONDecoder()
# The C string scanner json itself uses; typeshed does not list it.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_space = re.compile(r"[ \t\n\r]*")
_CHUNK = 1 << 20


class InputError(Exception):
    """Unreadable input; the message is one line for the user."""


def _skip(text: str, pos: int) -> int:
    """The position after any JSON whitespace at `pos`."""
    return _space.match(text, pos).end()  # type: ignore[union-attr]  # always matches


def _expect(text: str, pos: int, chars: str) -> tuple[str, int]:
    pos = _skip(text, pos)
    if pos >= len(text) or text[pos] not in chars:
        raise json.JSONDecodeError(f"expected one of {chars!r}", text, pos)
    return text[pos], pos + 1


def _decode(text: str, pos: int, max_depth: int, depth: int = 1) -> tuple[Any, int]:
    """One JSON value at `pos` (at `depth` in its document), refused when it nests deeper
    than `max_depth` (the C decoder recurses and fails near the recursion limit)."""
    try:
        value, end = _decoder.raw_decode(text, pos)
    except RecursionError:
        raise LimitExceeded(f"nested deeper than {max_depth} levels (--max-depth)") from None
    # Nesting is never deeper than the number of containers, which the C string search
    # counts (brackets inside strings too: an upper bound). Items with few, such as
    # claims, need nothing more; larger ones (slices) are measured on their text, and
    # walked only when that cannot tell (the walk visits every container).
    allowed = max_depth - depth + 1  # containers the value may nest
    if text.count("{", pos, end) + text.count("[", pos, end) > allowed:
        nesting = text_nesting(text, pos, end, allowed)
        if nesting is None or nesting > allowed:
            check_depth(value, max_depth, depth)
    return value, end


def _listing(head: dict[str, Any]) -> bool:
    """Whether an object with an `items` array is a List, as iter_objects decides."""
    kind = head.get("kind", "List")
    return isinstance(kind, str) and kind.endswith("List")


class NotAList(json.JSONDecodeError):
    """Items streamed, then a kind that says the object is not a List."""


def _json_items(text: str, max_depth: int) -> Iterator[Any]:
    """The documents of one JSON object: its `items` one by one when it is a List (an
    `items` array, and a kind that ends in List or none), otherwise the object itself.
    `kubectl get -o json` puts `items` before `kind`: those items are streamed before the
    kind is known, and a kind after them that is not a List's is refused (NotAList)."""
    _, pos = _expect(text, 0, "{")
    head: dict[str, Any] = {}
    listed = False
    pos = _skip(text, pos)
    if text.startswith("}", pos):
        pos += 1
    else:
        while True:
            _, pos = _expect(text, pos, '"')
            key, pos = scanstring(text, pos)
            _, pos = _expect(text, pos, ":")
            pos = _skip(text, pos)
            if key == "items" and text.startswith("[", pos) and _listing(head):
                listed = True
                pos = _skip(text, pos + 1)
                if text.startswith("]", pos):
                    pos += 1
                else:
                    while True:
                        # An item sits two levels down (the List, its items array).
                        item, pos = _decode(text, _skip(text, pos), max_depth, 3)
                        yield item
                        sep, pos = _expect(text, pos, ",]")
                        if sep == "]":
                            break
            else:
                head[key], pos = _decode(text, pos, max_depth, 2)
                if listed and key == "kind" and not _listing(head):
                    raise NotAList(f"kind {head[key]!r} after items: not a List", text, pos)
            sep, pos = _expect(text, pos, ",}")
            if sep == "}":
                break
    if _skip(text, pos) != len(text):
        raise json.JSONDecodeError("extra data after the object", text, pos)
    if not listed:
        yield head


_LIBYAML_DEPTH = "exceeded maximum nesting depth"


def _yaml_docs(text: str, source: str, limits: Limits) -> list[Any]:
    try:
        return [d for d in yaml.load_all(text, Loader=bounded_loader(limits)) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML or JSON"
        if problem == _LIBYAML_DEPTH:
            # libyaml 0.2.6 (PyYAML 6.0.4) stops deep flow collections in its scanner,
            # ahead of the composer that counts --max-depth: say which limit holds.
            problem = (
                f"nested deeper than {limits.max_depth} levels (--max-depth)"
                if limits.max_depth < 1000
                else "nested deeper than 1000 levels (the YAML parser's own limit)"
            )
        raise InputError(f"{source}:{where}: {problem}") from None
    except (ValueError, OverflowError) as exc:  # e.g. a timestamp like 2024-02-30
        raise InputError(f"{source}: not valid YAML: {str(exc)[:200]}") from None


def _iter_text(text: str, source: str, limits: Limits) -> Iterator[Any]:
    stripped = text.lstrip()
    if not stripped:
        return
    if stripped[0] == "{":
        started = False
        try:
            for doc in _json_items(text, limits.max_depth):
                started = True
                yield doc
            return
        except NotAList as exc:
            raise InputError(f"{source}: line {exc.lineno}: {exc.msg}") from None
        except json.JSONDecodeError as exc:
            if started:  # half a List is not YAML either
                raise InputError(f"{source}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
            # YAML flow style also starts with {
    elif stripped[0] == "[":
        try:
            doc, end = _decode(text, len(text) - len(stripped), limits.max_depth)
            if _skip(text, end) == len(text):
                yield from doc if isinstance(doc, list) else [doc]
                return
        except json.JSONDecodeError:
            pass
    yield from _yaml_docs(text, source, limits)


def iter_text(text: str, source: str, limits: Limits = DEFAULT_LIMITS) -> Iterator[Any]:
    """The documents in one input, streamed when it is a JSON object."""
    try:
        yield from _iter_text(text, source, limits)
    except LimitExceeded as exc:
        raise InputError(f"{source}: {exc}") from None


def parse_text(text: str, source: str, limits: Limits = DEFAULT_LIMITS) -> list[Any]:
    return list(iter_text(text, source, limits))


def _read_bounded(stream: BinaryIO, source: str, max_bytes: int) -> str:
    """At most `max_bytes` of a stream as UTF-8 (`/dev/zero` stops there, too)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_CHUNK, max_bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise InputError(f"{source}: larger than {max_bytes} bytes (--max-input-bytes)")
    data = b"".join(chunks)
    del chunks
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{source}: line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}); convert it, e.g. iconv -f latin1 -t utf-8"
        ) from None


def _read(path: str, limits: Limits) -> tuple[str, str]:
    if path == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("no input on stdin (pipe a cluster dump or give a FILE)")
        return _read_bounded(sys.stdin.buffer, "<stdin>", limits.max_input_bytes), "<stdin>"
    try:
        with open(path, "rb") as fh:
            return _read_bounded(fh, path, limits.max_input_bytes), path
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None


def iter_sources(paths: Iterable[str], limits: Limits = DEFAULT_LIMITS) -> Iterator[dict[str, Any]]:
    """Every object in the inputs, in order; raises InputError while iterating."""
    for path in paths:
        text, source = _read(path, limits)
        if not text.strip():
            raise InputError(f"{source}: empty input")
        yield from iter_objects(iter_text(text, source, limits))
        del text  # a dump can be large: do not hold it while the next one is read


def read_sources(paths: Iterable[str], limits: Limits = DEFAULT_LIMITS) -> list[dict[str, Any]]:
    return list(iter_sources(paths, limits))
