"""The training corpus as a manifest: which files, split into train and held-out.

Source: the Python standard library (minus its test suites) and, optionally,
installed packages' sources. Any file that mentions HumanEval is excluded, so
the evaluation set never leaks into training.
"""

from __future__ import annotations

import hashlib
import json
import sysconfig
from pathlib import Path

EXCLUDE_DIRS = {"test", "tests", "idle_test", "__pycache__", "site-packages", "dist-packages", "lib2to3", "ensurepip"}
EXCLUDE_MARKERS = ("humaneval", "human_eval", "human-eval")
MAX_FILE_BYTES = 400_000
# The corpus options every trainer takes (flag, argparse keywords): one meaning everywhere.
OPTIONS = [
    ("--corpus", dict(action="append", help="a folder of Python sources (repeatable; default: the standard library, "
                                           "as this manifest takes it, files mentioning HumanEval excluded)")),
    ("--with-packages", dict(action="store_true", help="beside the standard library, the permissively licensed "
                                                      "installed packages' sources (packages.py)")),
    ("--package-cap-mb", dict(type=float, default=4.0, help="source megabytes kept per package")),
]


def _is_excluded(path: Path, text: str) -> str | None:
    if any(part in EXCLUDE_DIRS for part in path.parts):
        return "test or vendored folder"
    lowered = text.lower()
    if any(marker in lowered for marker in EXCLUDE_MARKERS):
        return "mentions HumanEval"
    return None


def collect(roots: list[Path]) -> tuple[list[Path], list[tuple[str, str]]]:
    kept, excluded = [], []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root)
            try:
                if path.stat().st_size > MAX_FILE_BYTES:
                    excluded.append((str(path), "too large"))
                    continue
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                excluded.append((str(path), "unreadable"))
                continue
            reason = _is_excluded(rel, text)
            if reason:
                excluded.append((str(path), reason))
            else:
                kept.append(path)
    return kept, excluded


def build_manifest(roots: list[Path], holdout_every: int = 40) -> dict:
    """Deterministic split: a file is held out when the hash of its path under its root falls in
    1/holdout_every. Under its root, not absolute: the same files are held out in every checkout
    and on every machine (a CPU run and a GPU run of one recipe evaluate on the same files)."""
    kept, excluded = collect(roots)
    train, held = [], []
    for path in kept:
        h = int(hashlib.sha256(_under_root(Path(path), roots).encode()).hexdigest()[:8], 16)
        (held if h % holdout_every == 0 else train).append(str(path))
    return {"roots": [str(r) for r in roots], "train": train, "heldout": held, "excluded": excluded}


def _under_root(path: Path, roots: list[Path]) -> str:
    """`path` relative to the root it was collected from (POSIX separators), or as it is."""
    for root in roots:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path)


def default_roots() -> list[Path]:
    return [Path(sysconfig.get_paths()["stdlib"])]


def write_manifest(path: Path, roots: list[Path] | None = None) -> dict:
    manifest = build_manifest(roots or default_roots())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(path: Path) -> dict:
    return json.loads(Path(path).read_text())
