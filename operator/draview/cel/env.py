"""Compile and evaluate DRA selector expressions with caches.

Each expression is compiled once (by text). Results are cached per (expression, device
key), where the caller's device key names the device and its pool generation, so a batch
that sees the same pool again evaluates nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import celpy
import celpy.celparser
import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError, Evaluator

from draview.api.attrvalues import Typed
from draview.api.slices import Device
from draview.cel.compiled import compile_tree
from draview.cel.derived import as_attribute
from draview.cel.device import (
    LISTS_ABSENT,
    LISTS_EXPOSED,
    DeviceInput,
    UnsupportedAttribute,
    attribute_problem,
    check_attributes,
    device_activation,
    driver_activation,
)
from draview.cel.library import BUILTINS, FUNCTIONS
from draview.cel.reads import Keyer, Reads, keyer, plain_keyer, reads
from draview.cel.values import CelValueError

# Where cel-python's CEL parser is cached (set_parser_cache); None: built in memory.
_parser_cache: str | None = None


def set_parser_cache(path: str | None) -> None:
    """Build cel-python's CEL parser, when first needed, from a cache file of Lark's
    grammar analysis, made on first use: building the LALR tables costs about a fifth of
    a second, which a short-lived command pays at every start. The file holds the
    analysis of this very grammar and these options (Lark checks a digest of both) and is
    read with pickle: keep it where only its owner writes. A cache that cannot be read
    or written is skipped: Lark then builds the parser as usual."""
    global _parser_cache
    _parser_cache = path


def _build_parser() -> None:
    parser = celpy.celparser
    if _parser_cache is None or parser.CELParser.CEL_PARSER is not None:
        return
    build = parser.Lark  # type: ignore[attr-defined]
    parser.Lark = functools.partial(build, cache=_parser_cache)  # type: ignore[attr-defined,assignment]
    try:
        parser.CELParser()
    finally:
        parser.Lark = build  # type: ignore[attr-defined]


class CelCompileError(ValueError):
    """An expression the API server would reject."""


@dataclass(frozen=True, slots=True)
class CelRuntimeError:
    """Evaluating an expression on a device failed; the scheduler fails the claim."""

    message: str

    def __str__(self) -> str:
        return self.message


EvalResult = bool | CelRuntimeError
# A device's result for a fixed list of selectors: (driver, device, device key).
Matcher = Callable[[str, Device, Hashable], EvalResult]

_DRIVER_ONLY = frozenset({("driver",)})

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


def _attribute_of(value: Any) -> Typed | CelRuntimeError:
    try:
        return as_attribute(value)
    except CelValueError as exc:
        return CelRuntimeError(str(exc))


class _Runner(celpy.InterpretedRunner):
    """celpy's interpreter, with the base activation (annotations and functions) built
    once per program instead of on every evaluation, where building it would be a
    large part of the cost of a short selector. Safe to share: the evaluator clones it
    before binding the context (`Evaluator.set_activation`) and never writes to it
    otherwise.

    An expression in the shapes selectors use runs as closures (cel/compiled.py), given
    the same function table; `fast` is None for the rest, which celpy walks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._base = self.new_activation()
        self.fast = compile_tree(self.ast, self._base.functions)

    def evaluate(self, context: Any) -> Any:
        if self.fast is not None and context and context.keys() == {"device"}:
            value = self.fast(context["device"])
            if isinstance(value, CELEvalError):
                raise value  # as Evaluator.evaluate does with an error result
            return value
        if not context:
            return super().evaluate(context)  # the evaluator would use the base as is
        return Evaluator(ast=self.ast, activation=self._base).evaluate(context)


class CelEngine:
    """Compiles once per expression, evaluates once per (expression, device key)."""

    def __init__(self, max_results: int = 200_000) -> None:
        _build_parser()
        self._env = celpy.Environment(runner_class=_Runner)
        self._programs: dict[str, tuple[celpy.Runner, frozenset[str]] | CelCompileError] = {}
        self._driver_only: dict[str, bool] = {}
        # What each expression reads of a device, where only fixed paths (cel/reads.py).
        self._reads: dict[str, Reads | None] = {}
        # Per device key: None where every attribute converts, else the error that fails
        # every selector on the device (device.check_attributes).
        self._convertible: dict[Hashable, CelRuntimeError | None] = {}
        self._results: dict[tuple[str, Hashable], EvalResult] = {}
        # Per expression and list mode, a selector's evaluator by what it reads (_by_content).
        self._content: dict[tuple[str, str], _Evaluate] = {}
        self._values: dict[tuple[str, Hashable], Typed | CelRuntimeError] = {}
        self._activations: dict[Hashable, celtypes.MapType | CelRuntimeError] = {}
        self._max = max_results
        self.evaluations = 0  # for tests: how many evaluations were not cached

    def compile(self, expression: str) -> celpy.Runner:
        """The program for an expression; raises CelCompileError like the API server."""
        return self._program(expression)[0]

    def _program(self, expression: str) -> tuple[celpy.Runner, frozenset[str]]:
        cached = self._programs.get(expression)
        if cached is None:
            cached = self._compile(expression)
            self._programs[expression] = cached
        if isinstance(cached, CelCompileError):
            raise cached
        return cached

    def _compile(self, expression: str) -> tuple[celpy.Runner, frozenset[str]] | CelCompileError:
        try:
            ast = self._env.compile(expression)
        except Exception as exc:  # celpy raises parser errors of several kinds
            return CelCompileError(f"syntax error: {_short(exc)}")
        called = _called_names(ast)
        unknown = sorted(called - BUILTINS - FUNCTIONS.keys())
        if unknown:
            return CelCompileError(f"undeclared reference to {', '.join(unknown)}")
        paths = reads(ast)
        self._reads[expression] = paths
        # Most DeviceClass selectors: nothing of the device but its driver.
        self._driver_only[expression] = paths is not None and paths <= _DRIVER_ONLY
        return self._env.program(ast, FUNCTIONS), frozenset(called)

    def _runnable(self, expression: str, inp: DeviceInput) -> celpy.Runner:
        program, called = self._program(expression)
        if inp.lists == LISTS_ABSENT and "includes" in called:
            # Releases before list-typed attributes (1.34, 1.35) do not declare it.
            raise CelCompileError("undeclared reference to includes")
        return program

    @staticmethod
    def _key(inp: DeviceInput, key: Hashable) -> Hashable:
        # How lists are seen changes the activation; the common case keeps the plain key.
        return key if key is None or inp.lists == LISTS_EXPOSED else (inp.lists, key)

    def _activation(self, inp: DeviceInput, key: Hashable) -> celtypes.MapType | CelRuntimeError:
        activation = self._activations.get(key) if key is not None else None
        if activation is None:
            try:
                activation = device_activation(inp)
            except UnsupportedAttribute as exc:
                activation = CelRuntimeError(str(exc))
            if key is not None:
                self._activations[key] = activation
        return activation

    def _run(self, program: celpy.Runner, activation: celtypes.MapType) -> Any:
        """The expression's value; CelRuntimeError for what the scheduler reports as a
        runtime error."""
        self.evaluations += 1
        try:
            value = program.evaluate({"device": activation})
        except CELEvalError as exc:
            return CelRuntimeError(_short(exc))
        except (TypeError, ValueError, KeyError, RecursionError) as exc:
            return CelRuntimeError(_short(exc))
        if isinstance(value, CELEvalError):
            return CelRuntimeError(_short(value))
        return value

    def _remember(
        self, table: dict[tuple[str, Hashable], Any], entry: tuple[str, Hashable], result: Any
    ) -> None:
        if len(self._results) + len(self._values) >= self._max:
            self._results.clear()
            self._values.clear()
            self._activations.clear()
            self._convertible.clear()
        table[entry] = result

    def evaluate(self, expression: str, inp: DeviceInput, key: Hashable = None) -> EvalResult:
        """True/False, or a CelRuntimeError; raises CelCompileError for a bad expression.

        `key` identifies the device at its pool generation; None disables caching.
        """
        program = self._runnable(expression, inp)
        key = self._key(inp, key)
        if key is not None:
            hit = self._results.get((expression, key))
            if hit is not None:
                return hit
        return self._evaluate(expression, program, inp, key)

    def _evaluate(
        self, expression: str, program: celpy.Runner, inp: DeviceInput, key: Hashable
    ) -> EvalResult:
        """evaluate past its lookup: `key` as _key makes it, with no result cached."""
        paths = self._reads.get(expression) if key is not None else None
        if self._driver_only.get(expression):
            result = self._by_driver(expression, program, inp, key)
        elif paths is not None:
            by_content = self._by_content(expression, program, paths, inp.lists)
            return by_content(inp.driver, inp.device, key)  # caches under `key` itself
        else:
            result = self._result(program, self._activation(inp, key))
        if key is not None:
            self._remember(self._results, (expression, key), result)
        return result

    def _problem(self, inp: DeviceInput, key: Hashable) -> CelRuntimeError | None:
        """Why every selector fails on the device (an attribute CEL cannot hold), or None;
        checked without building its values, remembered per device key."""
        if key is not None and key in self._convertible:
            return self._convertible[key]
        try:
            check_attributes(inp)
            problem = None
        except UnsupportedAttribute as exc:
            problem = CelRuntimeError(str(exc))
        if key is not None:
            self._convertible[key] = problem
        return problem

    def _result(
        self, program: celpy.Runner, activation: celtypes.MapType | CelRuntimeError
    ) -> EvalResult:
        if isinstance(activation, CelRuntimeError):
            return activation
        value = self._run(program, activation)
        if isinstance(value, CelRuntimeError):
            return value
        if isinstance(value, celtypes.BoolType):
            return bool(value)
        return CelRuntimeError(f"expression returned {type(value).__name__}, not bool")

    def _by_driver(
        self, expression: str, program: celpy.Runner, inp: DeviceInput, key: Hashable
    ) -> EvalResult:
        """A selector that reads only `device.driver`: evaluated once per driver, after
        the check that fails it on a device whose attributes CEL cannot hold."""
        problem = self._problem(inp, key)
        if problem is not None:
            return problem
        by_driver = ("driver", inp.driver)
        hit = self._results.get((expression, by_driver))
        if hit is None:
            hit = self._result(program, driver_activation(inp.driver))
            self._remember(self._results, (expression, by_driver), hit)
        return hit

    def derive(
        self, expression: str, inp: DeviceInput, key: Hashable = None
    ) -> Typed | CelRuntimeError:
        """A derived attribute's value on the device (DRADerivedAttributes): what the
        expression returns as an attribute would hold it, or why it cannot be one.
        Raises CelCompileError for a bad expression."""
        program = self._runnable(expression, inp)
        key = self._key(inp, key)
        if key is not None:
            hit = self._values.get((expression, key))
            if hit is not None:
                return hit
        activation = self._activation(inp, key)
        result: Typed | CelRuntimeError
        if isinstance(activation, CelRuntimeError):
            result = activation
        else:
            value = self._run(program, activation)
            result = value if isinstance(value, CelRuntimeError) else _attribute_of(value)
        if key is not None:
            self._remember(self._values, (expression, key), result)
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

    def matcher(self, expressions: tuple[str, ...], lists: str = LISTS_EXPOSED) -> Matcher:
        """matches_all for many devices, seen as `lists` says: a device met before costs
        a lookup per selector, not an evaluate call (a pass over every device of a
        cluster makes hundreds of thousands). Evaluated as matches_all does, so a
        selector that does not compile raises where matches_all would."""
        results = self._results  # cleared in place when full (_remember)
        exposed = lists == LISTS_EXPOSED
        # Each expression's evaluator once it has run with `lists` (_runnable raises until
        # then, as evaluate would): a first pass over a cluster misses on every device.
        evaluators: dict[str, _Evaluate] = {}

        def match(driver: str, device: Device, key: Hashable) -> EvalResult:
            if key is None:
                return self.matches_all(expressions, DeviceInput(driver, device, lists))
            # As _key makes them: every hit was evaluated (and compiled) with `lists`.
            seen = key if exposed else (lists, key)
            for expression in expressions:
                result = results.get((expression, seen))
                if result is None:
                    run = evaluators.get(expression)
                    if run is None:
                        run = evaluators[expression] = self._evaluator(
                            expression,
                            self._runnable(expression, DeviceInput(driver, device, lists)),
                            lists,
                        )
                    result = run(driver, device, seen)
                if result is not True:
                    return result
            return True

        return match

    def _evaluator(self, expression: str, program: celpy.Runner, lists: str) -> _Evaluate:
        """_evaluate for one expression and `lists`, for a device not met before: without
        a DeviceInput for a selector that reads fixed paths (most; _by_content)."""
        paths = self._reads.get(expression)
        if paths is None or self._driver_only.get(expression):

            def general(driver: str, device: Device, seen: Hashable) -> EvalResult:
                return self._evaluate(expression, program, DeviceInput(driver, device, lists), seen)

            return general
        return self._by_content(expression, program, paths, lists)

    def _by_content(
        self, expression: str, program: celpy.Runner, paths: Reads, lists: str
    ) -> _Evaluate:
        """A selector that reads fixed paths of the device, seen as `lists`: evaluated once
        per distinct value of those paths (cel/reads.py), after the check that fails it on
        a device whose attributes CEL cannot hold; the result cached under the device's
        key as well. One per expression and `lists`, kept: evaluate and every matcher
        share it, its keys planned once per driver."""
        found = self._content.get((expression, lists))
        if found is not None:
            return found
        results = self._results
        # Per driver: the one-pass key of a device whose attributes are plain, and keyer.
        planned: dict[str, tuple[Callable[[Device], tuple[Any, ...] | None], Keyer]] = {}

        def by_content(driver: str, device: Device, seen: Hashable) -> EvalResult:
            plan = planned.get(driver)
            if plan is None:
                plan = planned[driver] = (
                    plain_keyer(paths, driver, lists),
                    keyer(paths, driver, lists),
                )
            # The key and the convertibility check in one pass, for most devices.
            values = plan[0](device)
            problem = attribute_problem(device, lists) if values is None else None
            result: EvalResult | None
            if problem is not None:
                result = CelRuntimeError(problem)
            else:
                if values is None:
                    values = plan[1](device)
                entry = (expression, ("values", values))
                result = results.get(entry)
                if result is None:
                    activation = self._activation(DeviceInput(driver, device, lists), seen)
                    result = self._result(program, activation)
                    self._remember(results, entry, result)
            self._remember(results, (expression, seen), result)
            return result

        self._content[(expression, lists)] = by_content
        return by_content


# A device's result for one expression, not met before: (driver, device, device key).
_Evaluate = Callable[[str, Device, Hashable], EvalResult]
