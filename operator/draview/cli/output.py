"""Print objects as kubectl does for -o yaml|json."""

from __future__ import annotations

import json
from typing import Any

import yaml

# libyaml's dumper is several times faster on large outputs.
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}


def dump(obj: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    return yaml.dump(
        obj,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
