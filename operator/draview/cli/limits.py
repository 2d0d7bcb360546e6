"""Bounds on what one input may cost to read, checked before anything large is built.

A 1 KB YAML file whose aliases expand a billion times, or a document nested 40,000 deep,
must be refused up front: expanding or recursing into it is what exhausts memory or the
C stack. Cluster dumps never use aliases and nest about 12 deep, so the defaults are far
beyond any real input.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import AliasEvent, ScalarEvent

MAX_INPUT_BYTES = 1 << 30
MAX_DEPTH = 100
MAX_ALIASES = 1000


@dataclass(frozen=True, slots=True)
class Limits:
    max_input_bytes: int = MAX_INPUT_BYTES
    max_depth: int = MAX_DEPTH
    max_aliases: int = MAX_ALIASES


DEFAULT_LIMITS = Limits()


class LimitExceeded(Exception):
    """The input is beyond a limit; the message names the limit and its flag."""


def check_depth(value: Any, max_depth: int, depth: int = 1) -> None:
    """Raise LimitExceeded when containers nest deeper than `max_depth`, `value` being at
    `depth`. Level by level, not recursive (a deep value must not overflow the stack that
    checks it). This walks every decoded container of a large slice, so a level's values
    are gathered by C-level extends and filtered in one pass, rather than by a Python
    comprehension per container."""
    level = [value] if type(value) in (dict, list) else []
    while level:
        if depth > max_depth:
            raise LimitExceeded(f"nested deeper than {max_depth} levels (--max-depth)")
        values: list[Any] = []
        gather = values.extend
        for node in level:
            gather(node.values() if type(node) is dict else node)
        level = [v for v in values if type(v) is dict or type(v) is list]
        depth += 1


# The bracket skeleton of a JSON text: every byte but brackets, quotes and backslashes
# deleted, both kinds of bracket made one. Bytes, because bytes.translate deletes in one
# C pass (str.translate has no such path for a table this size).
_KEEP = b'{}[]"\\'
_NOT_SKELETON = bytes(b for b in range(256) if b not in _KEEP)
_ONE_BRACKET = bytes.maketrans(b"{[}]", b"(())")
# Past this many levels the decoded walk is cheaper than more passes over the text.
TEXT_PASSES = 16


def text_nesting(text: str, start: int, end: int, most: int) -> int | None:
    """How many containers nest in the JSON value `text[start:end]` (a scalar: 0), read
    from its text, when that is cheap and certain; None when it is not (then walk the
    decoded value with check_depth). Cheaper than the walk on a large slice: the
    skeleton is a small part of the text and each pass is one C-level replace.

    Certain when no string holds a bracket: a string without escapes becomes `""` in
    the skeleton and goes with one replace, so any quote left means a string held a
    bracket (or another string's quote, which is the same case), and any backslash an
    escape that may hide a quote. Then each pass deletes every `()` pair present, the
    containers holding no container left: the number of passes that empty the skeleton
    is the value's nesting. At most `most` (or TEXT_PASSES) passes are made."""
    skeleton = text[start:end].encode("utf-8", "surrogatepass")
    skeleton = skeleton.translate(_ONE_BRACKET, _NOT_SKELETON).replace(b'""', b"")
    if b'"' in skeleton or b"\\" in skeleton:
        return None
    levels = 0
    while skeleton:
        if levels >= min(most, TEXT_PASSES):
            return None
        skeleton = skeleton.replace(b"()", b"")
        levels += 1
    return levels


class BoundedComposer(yaml.composer.Composer):
    """PyYAML's composer, counting nesting depth and what aliases would expand to.

    Composing shares an aliased node, so nothing is expanded yet; whoever walks the
    result later does expand it. So each anchored node's expanded size is recorded and
    every alias adds it: a document whose aliases would expand to more than ten times
    its own size (plus a small allowance for YAML merge keys) is refused, as are more
    than `max_aliases` alias uses and aliases into a node that contains them (a cycle).
    """

    limits: Limits = DEFAULT_LIMITS

    def compose_document(self) -> Any:
        self._depth = 0
        self._nodes = 0
        self._expanded = 0
        self._aliases = 0
        self._weights: dict[str, int] = {}
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[attr-defined]  # the parser's, mixed in
        if isinstance(event, AliasEvent):
            self._alias(event)
            return super().compose_node(parent, index)
        self._nodes += 1
        anchor = event.anchor
        if isinstance(event, ScalarEvent):
            node = super().compose_node(parent, index)
            if anchor is not None:
                self._weights[anchor] = 1
            return node
        self._depth += 1
        if self._depth > self.limits.max_depth:
            raise LimitExceeded(
                f"line {event.start_mark.line + 1}: nested deeper than "
                f"{self.limits.max_depth} levels (--max-depth)"
            )
        start = self._nodes + self._expanded
        node = super().compose_node(parent, index)
        self._depth -= 1
        if anchor is not None:
            self._weights[anchor] = self._nodes + self._expanded - start + 1
        return node

    def _alias(self, event: AliasEvent) -> None:
        mark = event.start_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        self._aliases += 1
        if self._aliases > self.limits.max_aliases:
            raise LimitExceeded(
                f"{line}more than {self.limits.max_aliases} YAML aliases (--max-aliases)"
            )
        if event.anchor in self.anchors and event.anchor not in self._weights:
            raise LimitExceeded(f"{line}YAML alias *{event.anchor} refers to its own container")
        self._expanded += self._weights.get(str(event.anchor), 0)
        if self._expanded > 10 * self._nodes + 10_000:
            raise LimitExceeded(f"{line}YAML aliases expand the document more than tenfold")


def bounded_loader(limits: Limits) -> type:
    """A SafeLoader class (on libyaml's parser when present) that enforces `limits`."""
    cparser = (
        getattr(getattr(yaml, "cyaml", None), "CParser", None) if yaml.__with_libyaml__ else None
    )
    if cparser is not None:
        bases: tuple[type, ...] = (
            BoundedComposer,
            cparser,
            yaml.constructor.SafeConstructor,
            yaml.resolver.Resolver,
        )

        def init(self: Any, stream: Any) -> None:
            cparser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            BoundedComposer.__init__(self)

    else:  # pragma: no cover - PyYAML without libyaml
        bases = (
            yaml.reader.Reader,
            yaml.scanner.Scanner,
            yaml.parser.Parser,
            BoundedComposer,
            yaml.constructor.SafeConstructor,
            yaml.resolver.Resolver,
        )

        def init(self: Any, stream: Any) -> None:
            yaml.SafeLoader.__init__(self, stream)

    return type("BoundedLoader", bases, {"__init__": init, "limits": limits})


def _positive(text: str) -> int:
    # ArgumentTypeError: argparse then says this, not "invalid _positive value".
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value


def add_limit_flags(group: Any, suppress: bool = False) -> None:
    """--max-input-bytes, --max-depth, --max-aliases on a parser or argument group.
    With `suppress`, unset flags stay absent (kubectl-dra fills its defaults later)."""
    flags = (
        ("--max-input-bytes", MAX_INPUT_BYTES, "refuse an input file larger than this"),
        ("--max-depth", MAX_DEPTH, "refuse input nested deeper than this"),
        ("--max-aliases", MAX_ALIASES, "refuse a YAML document with more alias uses"),
    )
    for flag, default, text in flags:
        extra = {} if suppress else {"default": default}
        group.add_argument(
            flag, type=_positive, metavar="N", help=f"{text} (default {default})", **extra
        )


def limits_from_args(args: Any) -> Limits:
    return Limits(
        max_input_bytes=getattr(args, "max_input_bytes", MAX_INPUT_BYTES),
        max_depth=getattr(args, "max_depth", MAX_DEPTH),
        max_aliases=getattr(args, "max_aliases", MAX_ALIASES),
    )
