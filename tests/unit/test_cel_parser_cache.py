"""The CEL parser built from a cache file of Lark's grammar analysis (cel/env.py):
the same programs either way, and a cache that cannot be written is no error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import celpy.celparser
import pytest

from draview.cel.env import CelEngine, set_parser_cache


@pytest.fixture
def fresh_parser() -> Iterator[None]:
    """Each test builds the parser anew, and the one before it is put back."""
    before = celpy.celparser.CELParser.CEL_PARSER
    celpy.celparser.CELParser.CEL_PARSER = None
    try:
        yield
    finally:
        set_parser_cache(None)
        celpy.celparser.CELParser.CEL_PARSER = before


def _verdicts() -> list[bool]:
    engine = CelEngine()
    return [bool(engine.compile(e).evaluate({})) for e in ("1 + 2 == 3", "'a' in ['b']")]


def test_the_cache_is_written_once_and_read_after(fresh_parser: None, tmp_path: Path) -> None:
    cache = tmp_path / "cel-parser.lark"
    set_parser_cache(str(cache))
    first = _verdicts()
    assert cache.stat().st_size > 0
    written = cache.stat().st_mtime_ns
    celpy.celparser.CELParser.CEL_PARSER = None  # the next process
    assert _verdicts() == first == [True, False]
    assert cache.stat().st_mtime_ns == written  # read, not written again


def test_a_damaged_cache_is_rebuilt(fresh_parser: None, tmp_path: Path) -> None:
    cache = tmp_path / "cel-parser.lark"
    cache.write_bytes(b"not a pickle\n")
    set_parser_cache(str(cache))
    assert _verdicts() == [True, False]
    assert cache.read_bytes() != b"not a pickle\n"


def test_a_cache_that_cannot_be_written_is_skipped(fresh_parser: None, tmp_path: Path) -> None:
    set_parser_cache(str(tmp_path / "missing-directory" / "cel-parser.lark"))
    assert _verdicts() == [True, False]
    assert not (tmp_path / "missing-directory").exists()
