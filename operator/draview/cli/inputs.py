"""Read Kubernetes objects from files or stdin: a List, multi-document YAML, or JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

import yaml

from draview.api.world import iter_objects

# libyaml is several times faster on large cluster dumps.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class InputError(Exception):
    """Unreadable input; the message is one line for the user."""


def parse_text(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if not stripped:
        return []
    if stripped[0] in "{[":
        try:
            doc = json.loads(text)
            return doc if isinstance(doc, list) else [doc]
        except json.JSONDecodeError:
            pass  # YAML flow style also starts with { or [
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML or JSON"
        raise InputError(f"{source}:{where}: {problem}") from None


def read_sources(paths: Iterable[str]) -> list[dict[str, Any]]:
    docs: list[Any] = []
    for path in paths:
        if path == "-":
            if sys.stdin is None or sys.stdin.isatty():
                raise InputError("no input on stdin (pipe a cluster dump or give a FILE)")
            text = sys.stdin.read()
            source = "<stdin>"
        else:
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise InputError(f"{path}: {exc.strerror or exc}") from None
            except UnicodeDecodeError:
                raise InputError(f"{path}: not a text file") from None
            source = path
        if not text.strip():
            raise InputError(f"{source}: empty input")
        docs.extend(parse_text(text, source))
    return list(iter_objects(docs))
