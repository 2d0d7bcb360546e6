"""Every offline command the README and the docs show runs as written: each `draview
analyze …` and `kubectl dra -f …` line of their shell and console blocks, and each such
command quoted inline with its files, exits 0 and prints something."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OFFLINE = re.compile(r"^(?:\$ )?((?:draview analyze|kubectl dra -f) [^#`]*)")
INLINE = re.compile(r"`((?:draview analyze|kubectl dra -f) [^`]*)`")
# Placeholders for the reader's own files, pipes and redirections: not runnable as written.
NOT_AS_WRITTEN = ("dump.yaml", "DUMP", "WORKLOAD", "FILE", "|", "<", ">", "…", "...")


def commands() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for page in PAGES:
        in_block = False
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                in_block = line.strip() in ("```sh", "```console", "```shell", "```bash")
                continue
            matches = [OFFLINE.match(line.strip())] if in_block else []
            # Inline, only whole commands: prose also quotes a flag alone (`draview analyze
            # --fit`), which names an option rather than showing a command.
            matches += [m for m in INLINE.finditer(line) if ".yaml" in m.group(1)]
            for m in matches:
                if m is None:
                    continue
                cmd = m.group(1).strip()
                if not any(p in cmd for p in NOT_AS_WRITTEN):
                    found.append((page.name, cmd))
    return sorted(set(found))


def test_the_pages_show_offline_commands() -> None:
    pages = {page for page, _ in commands()}
    assert "README.md" in pages and "analyze.md" in pages, pages


@pytest.mark.parametrize(("page", "cmd"), commands())
def test_the_command_runs_as_written(page: str, cmd: str) -> None:
    argv = shlex.split(cmd)
    if argv[0] == "draview":
        argv = [sys.executable, "-m", "draview.cli.main", *argv[1:]]
    else:
        argv = [sys.executable, "-m", "draview.cli.dra.main", *argv[2:]]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{page}: {cmd}\n{out.stderr[-2000:]}"
    assert out.stdout.strip(), f"{page}: {cmd} printed nothing"
