"""Pydantic model instances built from values already in their validated form.

The fast readers (fastslice.py, fastclaim.py) check what they read themselves and then
build the models without validating again: what `model_construct` does, without its
per-field alias lookups. Fields not given take the model's default, so the models stay
the one declaration of each shape: a field added there needs no edit in a reader unless
the reader reads it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from draview.api.common import Model

M = TypeVar("M", bound=Model)

_new = object.__new__  # what the models' own __new__ is, without the lookup through them
_setattr = object.__setattr__
# Per model: every field in its order with its default, and the fields-set all its
# instances share (pydantic copies it before any change, and the models are frozen).
_KNOWN: dict[type[Model], tuple[dict[str, Any], set[str]]] = {}


def construct(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of `cls` holding `values`, the other fields at their defaults. When
    `values` has every field (in the model's order, as tests/unit check), it becomes the
    instance's `__dict__` itself: the caller hands it over."""
    known = _KNOWN.get(cls)
    if known is None:
        known = _KNOWN[cls] = (_defaults(cls), set(cls.model_fields))
    defaults, fields_set = known
    m = _new(cls)
    _setattr(m, "__dict__", values if len(values) == len(defaults) else {**defaults, **values})
    _setattr(m, "__pydantic_fields_set__", fields_set)
    _setattr(m, "__pydantic_extra__", None)
    _setattr(m, "__pydantic_private__", None)
    return m


def _defaults(cls: type[Model]) -> dict[str, Any]:
    """Every field in the model's order with its default (required fields: None, always
    given by the reader), built once; defaults are shared between instances like the
    interned values (the engine never mutates what it reads)."""
    out: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            out[name] = field.default_factory()  # type: ignore[call-arg]
        else:
            out[name] = None if field.is_required() else field.default
    return out


def field_keys(*models: type[Model]) -> frozenset[str]:
    """Every key a model reads from its input: field names and aliases (the models
    accept both). A reader that meets one it does not handle leaves the object to the
    models; any other key the models ignore, and so may the reader."""
    keys: set[str] = set()
    for model in models:
        for name, field in model.model_fields.items():
            keys.add(name)
            if field.alias is not None:
                keys.add(field.alias)
    return frozenset(keys)
