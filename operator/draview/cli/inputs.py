"""Read Kubernetes objects from files or stdin: a List, multi-document YAML, or JSON.

A JSON List (what `kubectl get … -o json` prints) is decoded one item at a time, so a
cluster dump never exists twice in memory, once decoded and once normalised.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import yaml

from draview.api.world import iter_objects

# libyaml is several times faster on large cluster dumps.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_decoder = json.JSONDecoder()
# The C string scanner json itself uses; typeshed does not list it.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_space = re.compile(r"[ \t\n\r]*")


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


def _json_items(text: str) -> Iterator[Any]:
    """The documents of one JSON object: its `items` one by one when it has an array
    there (only Lists do, by API convention), otherwise the object itself."""
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
            if key == "items" and text.startswith("[", pos):
                listed = True
                pos = _skip(text, pos + 1)
                if text.startswith("]", pos):
                    pos += 1
                else:
                    while True:
                        item, pos = _decoder.raw_decode(text, _skip(text, pos))
                        yield item
                        sep, pos = _expect(text, pos, ",]")
                        if sep == "]":
                            break
            else:
                head[key], pos = _decoder.raw_decode(text, pos)
            sep, pos = _expect(text, pos, ",}")
            if sep == "}":
                break
    if _skip(text, pos) != len(text):
        raise json.JSONDecodeError("extra data after the object", text, pos)
    if not listed:
        yield head


def _yaml_docs(text: str, source: str) -> list[Any]:
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML or JSON"
        raise InputError(f"{source}:{where}: {problem}") from None


def iter_text(text: str, source: str) -> Iterator[Any]:
    """The documents in one input, streamed when it is a JSON object."""
    stripped = text.lstrip()
    if not stripped:
        return
    if stripped[0] == "{":
        started = False
        try:
            for doc in _json_items(text):
                started = True
                yield doc
            return
        except json.JSONDecodeError as exc:
            if started:  # half a List is not YAML either
                raise InputError(f"{source}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
            # YAML flow style also starts with {
    elif stripped[0] == "[":
        try:
            doc = json.loads(text)
            yield from doc if isinstance(doc, list) else [doc]
            return
        except json.JSONDecodeError:
            pass
    yield from _yaml_docs(text, source)


def parse_text(text: str, source: str) -> list[Any]:
    return list(iter_text(text, source))


def _read(path: str) -> tuple[str, str]:
    if path == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("no input on stdin (pipe a cluster dump or give a FILE)")
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(), path
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file") from None


def iter_sources(paths: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Every object in the inputs, in order; raises InputError while iterating."""
    for path in paths:
        text, source = _read(path)
        if not text.strip():
            raise InputError(f"{source}: empty input")
        yield from iter_objects(iter_text(text, source))
        del text  # a dump can be large: do not hold it while the next one is read


def read_sources(paths: Iterable[str]) -> list[dict[str, Any]]:
    return list(iter_sources(paths))
