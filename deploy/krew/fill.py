"""Write a release into the krew manifest: its version, where each platform's archive is
downloaded from, and each archive's sha256.

    python deploy/krew/fill.py --version v0.2.0 \
        --repository https://github.com/OWNER/draview --archives DIR > draview.yaml

Reads deploy/krew/draview.yaml (the template) and prints it with those filled in, its
comments kept: each platform's `uri` names its archive, which must be in DIR. Fails,
naming the archive, when one is missing, so that no manifest is published with a
placeholder checksum."""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).with_name("draview.yaml")
_URI = re.compile(r"^(\s*)uri: \S+/releases/download/[^/]+/(?P<archive>[^/\s]+)$")
_SHA = re.compile(r'^(\s*)sha256: "?[0-9a-f]*"?$')
_VERSION = re.compile(r"^  version: v\S+$")  # spec.version


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fill(text: str, version: str, repository: str, archives: Path) -> str:
    """The manifest `text` for release `version` of `repository` (its https address),
    with the checksums of the archives in `archives`."""
    out: list[str] = []
    archive: str | None = None
    for line in text.splitlines():
        if m := _URI.match(line):
            archive = m["archive"]
            line = f"{m[1]}uri: {repository.rstrip('/')}/releases/download/{version}/{archive}"
        elif (m := _SHA.match(line)) and archive is not None:
            path = archives / archive
            if not path.is_file():
                raise FileNotFoundError(f"{path}: no such archive for the manifest")
            line = f'{m[1]}sha256: "{sha256(path)}"'
            archive = None
        elif _VERSION.match(line):
            line = f"  version: {version}"
        elif line.startswith("  homepage: "):
            line = f"  homepage: {repository.rstrip('/')}"
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="the release tag, e.g. v0.2.0")
    parser.add_argument("--repository", required=True, help="https address of the repository")
    parser.add_argument("--archives", required=True, type=Path, help="directory of archives")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"v\d+\.\d+\.\d+\S*", args.version):
        parser.error(f"--version {args.version}: krew wants a tag like v1.2.3")
    try:
        sys.stdout.write(fill(TEMPLATE.read_text(), args.version, args.repository, args.archives))
    except FileNotFoundError as exc:
        print(f"fill.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
