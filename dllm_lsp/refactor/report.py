"""`--report FILE`: one JSON entry per hole (file, range, recipe, text, passes, time, applied or why not).

Ranges are 0-based lines and characters counted in code points (not UTF-16 units) of the file as read.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from dllm_lsp.refactor.runner import FileResult


def _hole_entry(result: FileResult, outcome, recipe: str) -> dict[str, Any]:
    hole, fill = outcome.hole, outcome.fill
    line, col, end_line, end_col = hole.position
    return {
        "file": result.path,
        "range": {"start": {"line": line, "character": col}, "end": {"line": end_line, "character": end_col}},
        "recipe": recipe,
        "text": fill.text if fill else None,  # what the model wrote
        "replacement": outcome.replacement,  # what went into the file (shaped, template included)
        "passes": fill.passes if fill else None,
        "finish_reason": fill.finish_reason if fill else None,
        "time_ms": round(fill.elapsed_ms, 1) if fill else None,  # of the engine request carrying this hole
        "applied": outcome.applied,
        "reason": outcome.reason,
    }


def build_report(results: list[FileResult], recipe: str, wrote: bool, elapsed_s: float) -> dict[str, Any]:
    holes = [_hole_entry(r, o, recipe) for r in results for o in r.outcomes]
    return {
        "recipe": recipe,
        "mode": "apply" if wrote else "diff",
        "elapsed_s": round(elapsed_s, 3),
        "summary": {
            "files": len(results),
            "changed": sum(r.status in ("changed", "written") for r in results),
            "written": sum(r.status == "written" for r in results),
            "skipped": sum(r.status == "skipped" for r in results),
            "not_written": sum(r.status == "not-written" for r in results),
            "holes": len(holes),
            "applied": sum(h["applied"] for h in holes),
        },
        "files": [{"file": r.path, "status": r.status, "reason": r.reason, "language": r.language} for r in results],
        "holes": holes,
    }


def write_report(path: str, report: dict[str, Any]) -> None:
    """Written atomically too, so an interrupted run never leaves half a report."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".report.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
