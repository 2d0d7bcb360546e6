"""Compile and evaluate DRA selector expressions with caches.

Each expression is compiled once (by text). Results are cached per (expression, device
key), where the caller's device key names the device and its pool generation, so a batch
that sees the same pool again evaluates nothing.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError

from draview.cel.device import DeviceInput, device_activation
from draview.cel.library import BUILTINS, FUNCTIONS


class CelCompileError(ValueError):
    """An expression the API server would reject."""


@dataclass(frozen=True, slots=True)
class CelRuntimeError:
    """Evaluating an expression on a device failed; the scheduler fails the claim."""

    message: str

    def __str__(self) -> str:
        return self.message


EvalResult = bool | CelRuntimeError

_ACTIVATION_NOISE = re.compile(r"\s*\(in activation .*$", re.DOTALL)


_GENERIC = ("return error for overflow", "no such overload")


def _short(err: Any) -> str:
    args: tuple[Any, ...] = tuple(getattr(err, "args", ()) or (str(err),))
    text = _ACTIVATION_NOISE.sub("", str(args[0]) if args else str(err))
    if text in _GENERIC and len(args) > 2 and args[2]:
        # The library function's own message says what was wrong with the argument.
        text = f"{text}: {args[2][0]}" if text == "no such overload" else str(args[2][0])
    text = text.replace("Token('RULE', 'relation_lt')", "<")
    return text.splitlines()[0] if text else "evaluation error"


def _called_names(tree: lark.Tree[Any]) -> set[str]:
    names: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg":
            token = node.children[1]
            names.add(str(token))
        elif node.data == "ident_arg":
            names.add(str(node.children[0]))
    return names


class CelEngine:
    """Compiles once per expression, evaluates once per (expression, device key)."""

    def __init__(self, max_results: int = 200_000) -> None:
        self._env = celpy.Environment()
        self._programs: dict[str, celpy.Runner | CelCompileError] = {}
        self._results: dict[tuple[str, Hashable], EvalResult] = {}
        self._activations: dict[Hashable, celtypes.MapType] = {}
        self._max = max_results
        self.evaluations = 0  # for tests: how many evaluations were not cached

    def compile(self, expression: str) -> celpy.Runner:
        """The program for an expression; raises CelCompileError like the API server."""
        cached = self._programs.get(expression)
        if cached is None:
            cached = self._compile(expression)
            self._programs[expression] = cached
        if isinstance(cached, CelCompileError):
            raise cached
        return cached

    def _compile(self, expression: str) -> celpy.Runner | CelCompileError:
        try:
            ast = self._env.compile(expression)
        except Exception as exc:  # celpy raises parser errors of several kinds
            return CelCompileError(f"syntax error: {_short(exc)}")
        unknown = sorted(_called_names(ast) - BUILTINS - FUNCTIONS.keys())
        if unknown:
            return CelCompileError(f"undeclared reference to {', '.join(unknown)}")
        return self._env.program(ast, FUNCTIONS)

    def evaluate(self, expression: str, inp: DeviceInput, key: Hashable = None) -> EvalResult:
        """True/False, or a CelRuntimeError; raises CelCompileError for a bad expression.

        `key` identifies the device at its pool generation; None disables caching.
        """
        program = self.compile(expression)
        if key is not None:
            hit = self._results.get((expression, key))
            if hit is not None:
                return hit
        activation = self._activations.get(key) if key is not None else None
        if activation is None:
            activation = device_activation(inp)
            if key is not None:
                self._activations[key] = activation
        self.evaluations += 1
        try:
            value = program.evaluate({"device": activation})
        except CELEvalError as exc:
            result: EvalResult = CelRuntimeError(_short(exc))
        except (TypeError, ValueError, KeyError, RecursionError) as exc:
            result = CelRuntimeError(_short(exc))
        else:
            if isinstance(value, CELEvalError):
                result = CelRuntimeError(_short(value))
            elif isinstance(value, celtypes.BoolType):
                result = bool(value)
            else:
                result = CelRuntimeError(f"expression returned {type(value).__name__}, not bool")
        if key is not None:
            if len(self._results) >= self._max:
                self._results.clear()
                self._activations.clear()
            self._results[(expression, key)] = result
        return result

    def matches_all(
        self, expressions: tuple[str, ...], inp: DeviceInput, key: Hashable = None
    ) -> EvalResult:
        """All selectors in order, stopping at the first non-match or error."""
        for expression in expressions:
            result = self.evaluate(expression, inp, key)
            if result is not True:
                return result
        return True
