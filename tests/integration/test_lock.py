"""requirements.lock installs on the image's platforms: every pin has a wheel for
CPython 3.11 on glibc Linux, x86_64 and aarch64, whose hash the lock names, and what the
pins need is pinned too (pip refuses an unhashed dependency with --require-hashes).

Downloads the wheels from the package index (about 40 MB); no cluster needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def platforms(arch: str) -> list[str]:
    """The wheel platform tags glibc Linux of python:3.11-slim (bookworm, glibc 2.36)
    accepts: pip's --platform takes each tag literally."""
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(17, 37)]
    tags.append(f"manylinux2014_{arch}")
    if arch == "x86_64":
        tags += [f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    return [arg for tag in tags for arg in ("--platform", tag)]


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_lock_resolves_to_hashed_wheels(arch: str, tmp_path: Path) -> None:
    # Only the index: a local wheel directory (PIP_FIND_LINKS) is not what the image sees.
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    proc = subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--require-hashes",
            "--only-binary=:all:", *platforms(arch), "--python-version", "3.11",
            "--implementation", "cp", "--abi", "cp311",
            "-r", str(ROOT / "requirements.lock"), "-d", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    pins = [ln for ln in (ROOT / "requirements.lock").read_text().splitlines() if "==" in ln]
    assert len(list(tmp_path.glob("*.whl"))) == len(pins)
