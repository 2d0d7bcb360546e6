"""Selectors evaluated as Python closures instead of celpy's walk of the parse tree.

celpy interprets an expression by visiting its parse tree on every evaluation: about
sixteen nested rule nodes for `device.driver == "x"`, each a method lookup and a list of
child values. That walk, not the operators, is nearly all of a selector's cost.
`compile_tree` turns the tree into closures once per expression.

Exactness comes from doing nothing new: every node does what celpy's `Evaluator`
method of the same name does (celpy 0.5, `celpy/evaluation.py`), in the same order,
calling the same functions (the program's own function table, draview's library
first), turning the same exceptions into the same `CELEvalError` values, and letting
every other exception through. Only the shapes selectors use are compiled: `device`,
field selection, indexing, method and function calls, literals, list literals,
parentheses and the operators. Anything else (macros such as `has()` and `all()`, map
literals, other names) returns None, and the expression stays with celpy whole.
`tests/unit/test_cel_compiled.py` holds the two to the same answers and messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError, NameContainer

# One compiled node: the device activation in, the node's value (or a CELEvalError) out.
Node = Callable[[celtypes.MapType], Any]

_RELATIONS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_ge": "_>=_",
    "relation_gt": "_>_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "_in_",
}
_ADDITIONS = {"addition_add": "_+_", "addition_sub": "_-_"}
_MULTIPLICATIONS = {
    "multiplication_div": "_/_",
    "multiplication_mul": "_*_",
    "multiplication_mod": "_%_",
}
_UNARIES = {"unary_not": "!_", "unary_neg": "-_"}
# celpy's macros and function-like macros: evaluated in scopes of their own.
_MACROS = frozenset({"map", "filter", "all", "exists", "exists_one", "reduce", "min"})
_MACRO_FUNCTIONS = frozenset({"has", "dyn"})


class _Unsupported(Exception):
    """A shape this compiler leaves to celpy."""


def compile_tree(tree: lark.Tree[Any], functions: Mapping[str, Any]) -> Node | None:
    """The expression as one closure over the device activation, or None when it holds
    a shape left to celpy. `functions` is the program's function table (what celpy's
    `Activation.resolve_function` reads)."""
    try:
        return _Compiler(functions).node(tree)
    except _Unsupported:
        return None


def _overload(op: str, ex: Exception, *operands: Any) -> CELEvalError:
    types = ", ".join(str(type(v)) for v in operands)
    value = CELEvalError(
        f"found no matching overload for {op} applied to '({types})'", ex.__class__, ex.args
    )
    value.__cause__ = ex
    return value


def _error(message: str, ex: Exception) -> CELEvalError:
    value = CELEvalError(message, ex.__class__, ex.args)
    value.__cause__ = ex
    return value


class _Compiler:
    def __init__(self, functions: Mapping[str, Any]) -> None:
        self.functions = functions

    def function(self, name: str) -> Any:
        try:
            return self.functions[name]
        except KeyError:
            raise _Unsupported(name) from None  # celpy's runtime "undeclared reference"

    def node(self, tree: Any) -> Node:
        if not isinstance(tree, lark.Tree):
            raise _Unsupported(repr(tree))
        handler = getattr(self, f"_{tree.data}", None)
        if handler is None:
            raise _Unsupported(str(tree.data))
        built: Node = handler(tree)
        return built

    def _only(self, tree: lark.Tree[Any]) -> Node:
        """A rule node with one child: celpy returns that child's value."""
        if len(tree.children) != 1:
            raise _Unsupported(str(tree.data))
        return self.node(tree.children[0])

    # expr: conditionalor ["?" conditionalor ":" expr]
    def _expr(self, tree: lark.Tree[Any]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        if len(tree.children) != 3:
            raise _Unsupported("expr")
        func = self.function("_?_:_")
        cond, then, other = (self.node(c) for c in tree.children)

        def ternary(d: celtypes.MapType) -> Any:
            cond_value = cond(d)
            left = right = celtypes.BoolType(False)
            try:
                if cond_value:
                    left = then(d)
                else:
                    right = other(d)
                return func(cond_value, left, right)
            except TypeError as ex:
                return _overload("_?_:_", ex, cond_value, left, right)

        return ternary

    def _logical(self, tree: lark.Tree[Any], op: str) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        if len(tree.children) != 2:
            raise _Unsupported(op)
        func = self.function(op)
        first, second = (self.node(c) for c in tree.children)

        def logical(d: celtypes.MapType) -> Any:
            # Both sides, as celpy does: its && and || take errors as operands.
            left, right = first(d), second(d)
            try:
                return func(left, right)
            except TypeError as ex:
                return _overload(op, ex, left, right)

        return logical

    def _conditionalor(self, tree: lark.Tree[Any]) -> Node:
        return self._logical(tree, "_||_")

    def _conditionaland(self, tree: lark.Tree[Any]) -> Node:
        return self._logical(tree, "_&&_")

    def _binary(self, tree: lark.Tree[Any], ops: Mapping[str, str], arithmetic: bool) -> Node:
        """relation, addition, multiplication: [op-node(left)] right."""
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        if len(tree.children) != 2:
            raise _Unsupported(str(tree.data))
        op_tree, right_tree = tree.children
        if not isinstance(op_tree, lark.Tree) or op_tree.data not in ops:
            raise _Unsupported(str(tree.data))
        if len(op_tree.children) != 1:
            raise _Unsupported(str(op_tree.data))
        label = repr(op_tree.data)  # a Token: celpy prints it as Token(...)
        func = self.function(ops[op_tree.data])
        first, second = self.node(op_tree.children[0]), self.node(right_tree)
        divides = tree.data == "multiplication"

        def binary(d: celtypes.MapType) -> Any:
            left, right = first(d), second(d)
            try:
                return func(left, right)
            except TypeError as ex:
                return _overload(label, ex, left, right)
            except ZeroDivisionError as ex:
                if not divides:
                    raise
                return _error("modulus or divide by zero", ex)
            except (ValueError, OverflowError) as ex:
                if not arithmetic:
                    raise
                return _error("return error for overflow", ex)

        return binary

    def _relation(self, tree: lark.Tree[Any]) -> Node:
        return self._binary(tree, _RELATIONS, arithmetic=False)

    def _addition(self, tree: lark.Tree[Any]) -> Node:
        return self._binary(tree, _ADDITIONS, arithmetic=True)

    def _multiplication(self, tree: lark.Tree[Any]) -> Node:
        return self._binary(tree, _MULTIPLICATIONS, arithmetic=True)

    def _unary(self, tree: lark.Tree[Any]) -> Node:
        if len(tree.children) == 1:
            return self.node(tree.children[0])
        if len(tree.children) != 2:
            raise _Unsupported("unary")
        op_tree, right_tree = tree.children
        if not isinstance(op_tree, lark.Tree) or op_tree.data not in _UNARIES:
            raise _Unsupported("unary")
        label = repr(op_tree.data)  # a Token: celpy prints it as Token(...)
        func = self.function(_UNARIES[op_tree.data])
        operand = self.node(right_tree)

        def unary(d: celtypes.MapType) -> Any:
            right = operand(d)
            try:
                return func(right)
            except TypeError as ex:
                return _overload(label, ex, right)
            except ValueError as ex:
                return _error("return error for overflow", ex)

        return unary

    def _member(self, tree: lark.Tree[Any]) -> Node:
        return self._only(tree)

    def _member_dot(self, tree: lark.Tree[Any]) -> Node:
        member_tree, token = tree.children
        if not isinstance(token, lark.Token):
            raise _Unsupported("member_dot")
        member = self.node(member_tree)
        name = token.value

        def member_dot(d: celtypes.MapType) -> Any:
            value = member(d)
            if isinstance(value, CELEvalError):
                return value
            if isinstance(value, NameContainer):
                if name in value:
                    return value[name].value
                keys = sorted(value.keys())
                return CELEvalError(f"No {name!r} in bindings {keys}", KeyError, None)
            if isinstance(value, celtypes.MessageType):
                return value.get(name)
            if isinstance(value, celtypes.MapType):
                try:
                    return value[name]
                except KeyError:
                    return CELEvalError(f"no such member in mapping: {name!r}", KeyError, None)
            return CELEvalError(
                f"{value!r} with type: '{type(value)}' does not support field selection",
                TypeError,
                None,
            )

        return member_dot

    def _member_dot_arg(self, tree: lark.Tree[Any]) -> Node:
        member_tree, token = tree.children[:2]
        if not isinstance(token, lark.Token) or token.value in _MACROS:
            raise _Unsupported("macro")
        member = self.node(member_tree)
        func = self.function(token.value)
        if len(tree.children) == 2:
            args: Node | None = None
        elif len(tree.children) == 3:
            args = self._exprlist(tree.children[2])
        else:
            raise _Unsupported("member_dot_arg")

        def method(d: celtypes.MapType) -> Any:
            target = member(d)
            values = args(d) if args is not None else None
            if isinstance(target, CELEvalError):
                return target
            if isinstance(values, CELEvalError):
                return values
            try:
                return func(target, *(values or []))
            except ValueError as ex:
                return _error("return error for overflow", ex)
            except (TypeError, AttributeError) as ex:
                return _error("no such overload", ex)

        return method

    def _exprlist(self, tree: Any) -> Node:
        """celpy's exprlist: the first error among the values, else a ListType."""
        if not isinstance(tree, lark.Tree) or tree.data != "exprlist":
            raise _Unsupported("exprlist")
        items = [self.node(c) for c in tree.children]

        def exprlist(d: celtypes.MapType) -> Any:
            values = [item(d) for item in items]
            for v in values:
                if isinstance(v, CELEvalError):
                    return v
            return celtypes.ListType(values)

        return exprlist

    def _member_index(self, tree: lark.Tree[Any]) -> Node:
        if len(tree.children) != 2:
            raise _Unsupported("member_index")
        func = self.function("_[_]")
        first, second = (self.node(c) for c in tree.children)

        def member_index(d: celtypes.MapType) -> Any:
            member, index = first(d), second(d)
            try:
                return func(member, index)
            except TypeError as ex:
                return _overload("_[_]", ex, member, index)
            except KeyError as ex:
                return _error("no such key", ex)
            except IndexError as ex:
                return _error("invalid_argument", ex)

        return member_index

    def _primary(self, tree: lark.Tree[Any]) -> Node:
        if len(tree.children) != 1 or not isinstance(tree.children[0], lark.Tree):
            raise _Unsupported("primary")
        child = tree.children[0]
        kind = child.data
        if kind == "literal":
            return self._literal(child)
        if kind == "paren_expr":
            return self._only(child)
        if kind == "list_lit":
            if not child.children:
                return lambda d: celtypes.ListType()
            if len(child.children) != 1:
                raise _Unsupported("list_lit")
            return self._exprlist(child.children[0])
        if kind == "ident" and str(child.children[0]) == "device":
            return _device
        if kind == "ident_arg":
            return self._call(child)
        raise _Unsupported(str(kind))

    def _call(self, tree: lark.Tree[Any]) -> Node:
        token = tree.children[0]
        if not isinstance(token, lark.Token) or token.value in _MACRO_FUNCTIONS:
            raise _Unsupported("ident_arg")
        func = self.function(token.value)
        if len(tree.children) == 1:
            items: list[Node] = []
        elif len(tree.children) == 2 and isinstance(tree.children[1], lark.Tree):
            items = [self.node(c) for c in tree.children[1].children]
        else:
            raise _Unsupported("ident_arg")

        def call(d: celtypes.MapType) -> Any:
            # Each argument as is (celpy's function_eval, not its exprlist rule).
            values = [item(d) for item in items]
            for v in values:
                if isinstance(v, CELEvalError):
                    return v
            try:
                return func(*values)
            except ValueError as ex:
                return _error("return error for overflow", ex)
            except (TypeError, AttributeError) as ex:
                return _error("no such overload", ex)

        return call

    def _literal(self, tree: lark.Tree[Any]) -> Node:
        # A literal's value does not depend on the device: celpy's own reading of it,
        # once (an int out of range is an error value, every time alike).
        from celpy.evaluation import Activation, Evaluator

        try:
            value = Evaluator(tree, Activation()).visit(tree)
        except Exception as exc:  # celpy raises for some bad literals: leave them to it
            raise _Unsupported("literal") from exc
        if isinstance(value, (celtypes.ListType, celtypes.MapType)):
            raise _Unsupported("mutable literal")
        return lambda d: value


def _device(d: celtypes.MapType) -> celtypes.MapType:
    return d
