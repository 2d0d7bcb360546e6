"""The `draview` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from draview.cli import analyze, run, version
from draview.cli.output import broken_pipe
from draview.cli.parsing import OneLineParser


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = OneLineParser(
        prog="draview",
        description="Exact availability of Kubernetes DRA devices: what is free, what is "
        "taken and by whom, and why.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    analyze.add_parser(sub)
    run.add_parser(sub)
    version.add_parser(sub)
    parser.add_argument("--version", action="version", version=version.one_line())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        return broken_pipe()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
