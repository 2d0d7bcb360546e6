"""CEL for DRA selectors: cel-python with the Kubernetes DRA environment.

`CelEngine` compiles each expression once and evaluates it against devices the way the
scheduler does: attribute and capacity maps keyed by domain, quantity() and semver(),
the string extensions, and runtime errors kept apart from a plain non-match.
"""

from draview.cel.device import DeviceInput, device_activation
from draview.cel.env import CelCompileError, CelEngine, CelRuntimeError, EvalResult

__all__ = [
    "CelCompileError",
    "CelEngine",
    "CelRuntimeError",
    "DeviceInput",
    "EvalResult",
    "device_activation",
]
