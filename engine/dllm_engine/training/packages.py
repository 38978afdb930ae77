"""A larger corpus for GPU runs: permissively licensed installed packages' sources.

The standard library alone is ~2.7 M tokens, dozens of epochs for one short
GPU run; installed packages hold ~10 times more Python. Only packages whose
metadata declares a permissive licence (MIT, BSD, Apache, PSF, ISC, ...) are
used, each capped so a few giants (transformers, torch) do not drown the rest.
The corpus manifest's own rules still apply: no tests, nothing that mentions
HumanEval.
"""

from __future__ import annotations

import re
import sysconfig
from email.parser import Parser
from pathlib import Path

from . import corpus

PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache|PSF|Python Software Foundation|ISC|Unlicense|Zlib|HPND|0BSD)\b", re.I)
COPYLEFT = re.compile(r"\b(GPL|LGPL|AGPL|MPL|Mozilla|EPL|CDDL|copyleft)\b", re.I)


def license_of(metadata_text: str) -> str:
    msg = Parser().parsestr(metadata_text, headersonly=True)
    parts = [msg.get("License-Expression") or "", (msg.get("License") or "").splitlines()[0] if msg.get("License") else ""]
    parts += [c.split("::")[-1].strip() for c in msg.get_all("Classifier") or [] if c.startswith("License ::")]
    return "; ".join(p for p in parts if p)


def is_permissive(license_text: str) -> bool:
    return bool(PERMISSIVE.search(license_text)) and not COPYLEFT.search(license_text)


def _top_levels(dist: Path) -> list[str]:
    top = dist / "top_level.txt"
    if top.exists():
        return [t.strip() for t in top.read_text().split() if t.strip()]
    record = dist / "RECORD"
    names = set()
    if record.exists():
        for line in record.read_text(errors="replace").splitlines():
            first = line.split(",", 1)[0].split("/", 1)
            if len(first) == 2 and not first[0].endswith((".dist-info", ".data")) and first[0] != "..":
                names.add(first[0])
    return sorted(names)


def permissive_package_dirs(site: Path | None = None) -> list[tuple[Path, str]]:
    """(package folder, licence) for every installed distribution with a permissive licence."""
    site = Path(site or sysconfig.get_paths()["purelib"])
    out: dict[Path, str] = {}
    for dist in sorted(site.glob("*.dist-info")):
        meta = dist / "METADATA"
        if not meta.exists():
            continue
        lic = license_of(meta.read_text(errors="replace"))
        if not is_permissive(lic):
            continue
        for name in _top_levels(dist):
            path = site / name
            if path.is_dir() and name != "__pycache__" and not name.endswith(".libs"):
                out.setdefault(path, lic)
    return sorted(out.items())


def cap_files(files: list[str], roots: list[Path], cap_bytes: int) -> list[str]:
    """Keep, per root, files in sorted order until `cap_bytes` of source (deterministic)."""
    used: dict[Path, int] = {}
    kept = []
    for name in sorted(files):
        root = next((r for r in roots if Path(name).is_relative_to(r)), None)
        size = Path(name).stat().st_size
        if root is not None and used.get(root, 0) + size > cap_bytes:
            continue
        if root is not None:
            used[root] = used.get(root, 0) + size
        kept.append(name)
    return kept


def training_manifest(with_packages: bool = False, package_cap_mb: float = 4.0, site: Path | None = None) -> dict:
    """The corpus manifest every trainer splits: the standard library, and with `with_packages`
    the permissively licensed installed packages, each capped at `package_cap_mb` of source so a
    few giants do not drown the rest (their licences recorded in the manifest)."""
    if not with_packages:
        return corpus.build_manifest(corpus.default_roots())
    licences = {str(p): lic for p, lic in permissive_package_dirs(site)}
    pkg_roots = [Path(p) for p in licences]
    manifest = corpus.build_manifest(corpus.default_roots() + pkg_roots)
    manifest["train"] = cap_files(manifest["train"], pkg_roots, int(package_cap_mb * 2**20))
    manifest["licences"] = licences
    return manifest
