"""Print objects as kubectl does for -o yaml|json."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

import yaml

# libyaml's dumper is several times faster on large outputs.
_Base: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[misc]
    """No anchors and aliases: objects share parts (one profile dict for every pool), and
    kubectl's YAML spells every object out."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}


_YAML: dict[str, Any] = {
    "Dumper": _Dumper,
    "sort_keys": False,
    "allow_unicode": True,
    "default_flow_style": False,
    "width": 100,
}


def dump(obj: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    return str(yaml.dump(obj, **_YAML))


def write(obj: Any, fmt: str, stream: TextIO) -> None:
    """The same bytes as `dump`, written as they are produced. An indented json.dumps
    joins millions of small pieces into one string held beside the objects it encodes;
    written in chunks, the output never exists whole in memory."""
    if fmt == "json":
        pieces: list[str] = []
        for piece in json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(obj):
            pieces.append(piece)
            if len(pieces) >= 8192:  # one write per few hundred KiB, not per token
                stream.write("".join(pieces))
                pieces.clear()
        pieces.append("\n")
        stream.write("".join(pieces))
    elif isinstance(obj, dict) and list(obj)[-1:] == ["items"] and obj["items"]:
        # A List item by item: PyYAML builds a node for every value before it emits
        # anything (gigabytes for a large cluster's analysis). A sequence under a mapping key
        # is written without indentation, so each item dumped as a one-element sequence
        # is the very text it has inside the whole List (anchors aside: draview's
        # objects share no values, tests/unit check the bytes on every example).
        head = {k: v for k, v in obj.items() if k != "items"}
        stream.write(yaml.dump(head, **_YAML) if head else "")
        stream.write("items:\n")
        for item in obj["items"]:
            stream.write(yaml.dump([item], **_YAML))
    else:
        yaml.dump(obj, stream, **_YAML)


# What a shell reports for a process killed by SIGPIPE (128 + 13), as `yes | head` does.
EXIT_BROKEN_PIPE = 141


def broken_pipe() -> int:
    """The reader of stdout went away (`… -o json | head -1`): stop quietly. Point stdout
    at /dev/null so the interpreter's final flush does not fail again on exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced by something without a descriptor
        pass
    return EXIT_BROKEN_PIPE
