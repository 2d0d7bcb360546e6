"""The little of a Node that decides which ResourceSlices reach it: its name and labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> NodeInfo:
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            raise ValueError("metadata.name must be a string")
        labels = meta.get("labels") or {}
        if not isinstance(labels, Mapping):
            raise ValueError("metadata.labels must be a map")
        return cls(meta["name"], {str(k): str(v) for k, v in labels.items()})
