"""The commands' argument parser: a usage error is one line on stderr (exit 2).

argparse prints the whole usage block before the error, eight lines for `kubectl dra
get`, which push the one line that says what is wrong out of sight; the line points at
--help instead."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line; its subcommands' parsers are too
    (add_subparsers makes them of the parser's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
