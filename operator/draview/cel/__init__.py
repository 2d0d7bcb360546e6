"""CEL for DRA selectors: cel-python with the Kubernetes DRA environment.

`CelEngine` compiles each expression once and evaluates it against devices the way the
scheduler does: attribute and capacity maps keyed by domain, list-typed attributes as the
profile's library reads them, quantity() and semver(), the string and list extensions,
cel-go's equality, and runtime errors kept apart from a plain non-match; and the values of
derived attributes (`CelEngine.derive`).
"""

from draview.cel.device import (
    LISTS_ABSENT,
    LISTS_EXPOSED,
    LISTS_REFUSED,
    DeviceInput,
    device_activation,
)
from draview.cel.env import CelCompileError, CelEngine, CelRuntimeError, EvalResult, Matcher

__all__ = [
    "LISTS_ABSENT",
    "LISTS_EXPOSED",
    "LISTS_REFUSED",
    "CelCompileError",
    "CelEngine",
    "CelRuntimeError",
    "DeviceInput",
    "EvalResult",
    "Matcher",
    "device_activation",
]
