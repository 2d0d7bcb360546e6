"""The krew plugin manifest (deploy/krew/draview.yaml) and what the release workflow fills
into it: krew installs what the manifest names, so a wrong binary or file name, or a
license other than the repository's, would only show on a user's machine."""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "krew" / "draview.yaml"
PLATFORMS = {("linux", "amd64"), ("linux", "arm64"), ("darwin", "amd64"), ("darwin", "arm64")}


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return data


def project() -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return data


def fill_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("krew_fill", MANIFEST.with_name("fill.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_manifest_is_a_krew_plugin_for_this_release() -> None:
    m = manifest()
    assert m["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert m["kind"] == "Plugin" and m["metadata"]["name"] == "draview"
    assert m["spec"]["version"] == "v" + project()["version"]
    assert m["spec"]["homepage"] == project()["urls"]["Repository"]
    assert len(m["spec"]["shortDescription"]) <= 50  # what krew's index accepts


def test_every_platform_installs_the_plugin_binary_and_the_license() -> None:
    platforms = manifest()["spec"]["platforms"]
    found = {
        (p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"])
        for p in platforms
    }
    assert found == PLATFORMS
    for p in platforms:
        labels = p["selector"]["matchLabels"]
        # krew links kubectl-<plugin name> to `bin`: kubectl then finds it as `kubectl draview`.
        assert p["bin"] == "kubectl-draview"
        assert {f["from"] for f in p["files"]} == {"kubectl-draview", "LICENSE"}
        assert p["uri"].endswith(f"/kubectl-draview_{labels['os']}_{labels['arch']}.tar.gz")
        assert len(p["sha256"]) == 64 and set(p["sha256"]) <= set("0123456789abcdef")


def test_the_license_it_ships_is_the_repository_s() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert project()["license"] == "Apache-2.0"
    assert project()["license-files"] == ["LICENSE"]
    chart = yaml.safe_load((ROOT / "charts" / "draview" / "Chart.yaml").read_text())
    assert chart["annotations"]["artifacthub.io/license"] == "Apache-2.0"


def test_a_release_fills_in_version_addresses_and_checksums(tmp_path: Path) -> None:
    sums = {}
    for os_name, arch in PLATFORMS:
        archive = tmp_path / f"kubectl-draview_{os_name}_{arch}.tar.gz"
        archive.write_bytes(f"{os_name}/{arch}".encode())
        sums[(os_name, arch)] = hashlib.sha256(archive.read_bytes()).hexdigest()
    fill = fill_module()
    text = fill.fill(MANIFEST.read_text(), "v9.8.7", "https://github.com/acme/draview/", tmp_path)
    filled = yaml.safe_load(text)
    assert filled["spec"]["version"] == "v9.8.7"
    assert filled["spec"]["homepage"] == "https://github.com/acme/draview"
    for p in filled["spec"]["platforms"]:
        key = (p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"])
        assert p["sha256"] == sums[key]
        assert p["uri"] == (
            "https://github.com/acme/draview/releases/download/v9.8.7/"
            f"kubectl-draview_{key[0]}_{key[1]}.tar.gz"
        )
    assert text.count("\n#") == MANIFEST.read_text().count("\n#")  # comments kept


def test_a_missing_archive_fails_rather_than_publishing_a_placeholder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="kubectl-draview_"):
        fill_module().fill(MANIFEST.read_text(), "v1.0.0", "https://example.com/r", tmp_path)
