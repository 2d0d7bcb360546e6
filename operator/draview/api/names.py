"""Qualified attribute and capacity names: `domain/ident`, where a slice may leave out its
own driver's domain (the API allows it). One place, so the engine, CEL and explanations
resolve a name alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")


def split_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, ident); an unqualified name is in the driver's domain."""
    domain, _, ident = name.rpartition("/")
    return (domain or driver, ident)


def local_name(name: str, driver: str) -> str:
    """The name as the driver's own slice may write it: without its own domain."""
    domain, ident = split_name(name, driver)
    return ident if domain == driver else name


def lookup(values: Mapping[str, V], driver: str, name: str) -> V | None:
    """values[name], the driver's domain being optional in the name and in the keys."""
    if name in values:
        return values[name]
    domain, ident = split_name(name, driver)
    if domain != driver:
        return None
    for key in (ident, f"{driver}/{ident}"):
        if key in values:
            return values[key]
    return None
