"""Client of draview-oracle (e2e/oracle): the real DRA allocator as a differential oracle.

The Go program imports k8s.io/dynamic-resource-allocation/structured, the allocator the
kube-scheduler runs, and answers JSON-line cases: for a world of Kubernetes objects, can each
probe claim be allocated on each node? Tests compare draview's engine against it without a
cluster. One process serves many cases, so a test pays the start-up once.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from draview.engine.profile import Profile

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "e2e" / "oracle" / "build"


def oracle_binary(release: str | None = None) -> Path:
    """Build (or find in its cache) the oracle binary of `release` (default: the default
    release of e2e/releases) and return its path.

    The build script is the one place that knows the pin and the cache layout; it does
    nothing when the sources are unchanged, so calling this once per test run is cheap.
    """
    proc = subprocess.run(
        [str(BUILD_SCRIPT), *([release] if release else [])],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"{BUILD_SCRIPT} failed (exit {proc.returncode}):\n{proc.stderr.strip()}"
        )
    binary = Path(lines[-1])
    if not binary.is_file():
        raise RuntimeError(f"{BUILD_SCRIPT} printed {binary}, which is not a file")
    return binary


def profile_args(profile: Profile) -> list[str]:
    """The oracle's flags for a profile: every gate named, so none falls back to "on"."""
    return ["-gates", ",".join(f"{n}={str(v).lower()}" for n, v in profile.gate_values)]


class Oracle:
    """A running draview-oracle process: one JSON line in, one JSON line out, in order.

    Use as a context manager. Not thread-safe: one caller at a time.
    """

    def __init__(
        self, binary: Path | None = None, args: Sequence[str] = (), profile: Profile | None = None
    ) -> None:
        """profile: answer as that release's scheduler with those gates (its own binary)."""
        if profile is not None:
            binary = binary or oracle_binary(profile.release)
            args = [*profile_args(profile), *args]
        self._binary = binary if binary is not None else oracle_binary()
        # stderr goes to a file, not a pipe: nobody reads it while the oracle runs, and a
        # full pipe would block the process; it is read back to explain a crash.
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        # The allocator allocates a CEL activation and cost tracker per device per call;
        # with Go's default GOGC=100 a third of the oracle's CPU went to the collector.
        # GOGC=400 keeps it at about 60 MB and answers the same (bench/HISTORY.md, 2026-11-26).
        env = {**os.environ, "GOGC": os.environ.get("GOGC", "400")}
        self._proc = subprocess.Popen(
            [str(self._binary), *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )

    def __enter__(self) -> Oracle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def ask(self, case: dict[str, Any]) -> dict[str, Any]:
        """Answer one case (see e2e/oracle/README.md for both shapes)."""
        return self.ask_many([case])[0]

    def ask_many(self, cases: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Answer many cases, pipelined: a writer thread feeds stdin while this thread
        reads stdout, so neither pipe buffer can fill up and deadlock the two processes."""
        lines = [json.dumps(case, separators=(",", ":")) + "\n" for case in cases]
        stdin, stdout = self._pipes()
        write_error: list[BaseException] = []

        def write() -> None:
            try:
                for line in lines:
                    stdin.write(line)
                stdin.flush()
            except BaseException as err:  # reported by the reader below
                write_error.append(err)

        writer = threading.Thread(target=write, name="oracle-writer", daemon=True)
        writer.start()
        answers: list[dict[str, Any]] = []
        try:
            for _ in lines:
                line = stdout.readline()
                if not line:
                    raise RuntimeError(f"draview-oracle stopped: {self._stopped()}")
                answers.append(json.loads(line))
        finally:
            writer.join()
        if write_error:
            raise RuntimeError(f"writing to draview-oracle failed: {write_error[0]}")
        return answers

    def close(self) -> None:
        """End the process (closing stdin lets it exit on its own) and free its files."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        stdin, stdout = self._proc.stdin, self._proc.stdout
        if stdin is None or stdout is None or stdin.closed:
            raise RuntimeError("draview-oracle is closed")
        return stdin, stdout

    def _stopped(self) -> str:
        code = self._proc.poll()
        self._stderr.seek(0)
        err = self._stderr.read().decode(errors="replace").strip()
        return f"exit code {code}, stderr: {err or '(empty)'}"
