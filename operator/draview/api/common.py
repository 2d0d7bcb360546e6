"""Small shapes and coercions shared by the input models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# What a warning may quote of the input: a value can be a megabyte (or, before the input
# limits, a billion aliases), and a warning that repeats it is useless.
MAX_QUOTE = 200


def clip(text: str, limit: int = MAX_QUOTE) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def text_of(value: Any) -> str:
    """A name or message from the input, never a huge value: non-strings by type only."""
    return clip(value) if isinstance(value, str) else f"<{type(value).__name__}>"


def error_text(exc: Exception) -> str:
    """One short line for why an object could not be read."""
    if isinstance(exc, ValidationError):
        first = exc.errors(include_input=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        msg = str(first.get("msg", "invalid"))
        return clip(f"{where}: {msg}" if where else msg)
    return clip(str(exc) or type(exc).__name__)


# Kubernetes integers are int64; a larger or negative generation or count would be echoed
# into a status the API server then refuses, so the models reject it (InvalidObject).
INT64_MAX = 2**63 - 1


def in_int64(value: Any, low: int = 0) -> bool:
    """Exactly an int (a bool is none) within [low, int64 max]."""
    return type(value) is int and low <= value <= INT64_MAX


def is_optional(value: Any, kind: type) -> bool:
    """None, or exactly a `kind` (no subclass: for the fast readers a bool is no int)."""
    return value is None or type(value) is kind


def quantity_text(v: Any) -> str:
    """A quantity as written: `1`, `"40Gi"`, `{value: 40Gi}` (v1) or `{quantity: 40Gi}` (draft).

    Anything else becomes a string the quantity parser will reject, so the problem
    surfaces as InvalidQuantity on the pool instead of a crash here.
    """
    if isinstance(v, dict):
        v = v.get("value", v.get("quantity", ""))
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def as_str_map(v: Any) -> dict[str, str]:
    """Counters as {name: quantity text} from {name: {value: q}} or {name: q}."""
    if not isinstance(v, dict):
        return {}
    return {str(k): quantity_text(q) for k, q in v.items()}


def names_of(v: Any) -> tuple[str, ...]:
    """References written as ["a"] (KEP-5234) or [{name: a}] (composite draft)."""
    if not v:
        return ()
    if isinstance(v, (str, dict)):
        v = [v]
    out: list[str] = []
    for item in v:
        if isinstance(item, dict):
            out.append(str(item.get("name", "")))
        else:
            out.append(str(item))
    return tuple(out)


def to_capacity(v: Any) -> dict[str, Any]:
    """Device capacity in any shape, flattened to the Capacity model's fields."""
    if not isinstance(v, dict):
        return {}
    out: dict[str, Any] = {}
    for name, raw in v.items():
        entry: dict[str, Any] = {"value": quantity_text(raw)}
        policy = raw.get("requestPolicy") if isinstance(raw, dict) else None
        if isinstance(policy, dict):
            if policy.get("default") is not None:
                entry["request_default"] = quantity_text(policy["default"])
            valid_range = policy.get("validRange")
            if isinstance(valid_range, dict):
                if valid_range.get("min") is not None:
                    entry["valid_min"] = quantity_text(valid_range["min"])
                if valid_range.get("max") is not None:
                    entry["valid_max"] = quantity_text(valid_range["max"])
                if valid_range.get("step") is not None:
                    entry["valid_step"] = quantity_text(valid_range["step"])
            values = policy.get("validValues")
            if isinstance(values, list):
                entry["valid_values"] = tuple(quantity_text(x) for x in values)
        out[str(name)] = entry
    return out


def cel_expressions(v: Any) -> tuple[str, ...]:
    """The CEL expressions of a `selectors` list (other selector kinds do not exist yet)."""
    if not isinstance(v, list):
        return ()
    out = []
    for sel in v:
        cel = sel.get("cel") if isinstance(sel, dict) else None
        if isinstance(cel, dict) and isinstance(cel.get("expression"), str):
            out.append(cel["expression"])
    return tuple(out)


class Model(BaseModel):
    """Base of every input model: immutable, unknown fields ignored, aliases accepted."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class SelectorRequirement(Model):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class NodeSelectorTerm(Model):
    match_expressions: tuple[SelectorRequirement, ...] = Field((), alias="matchExpressions")
    match_fields: tuple[SelectorRequirement, ...] = Field((), alias="matchFields")


class NodeSelector(Model):
    """core/v1 NodeSelector: the terms are ORed, requirements inside a term ANDed."""

    node_selector_terms: tuple[NodeSelectorTerm, ...] = Field((), alias="nodeSelectorTerms")
