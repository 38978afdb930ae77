"""The loss curve: appended to a CSV as training runs, drawn as PNG (matplotlib) or SVG.

matplotlib is not a dependency; without it a small hand-written SVG shows the
same curves, so every run still has a picture.
"""

from __future__ import annotations

import csv
from pathlib import Path

FIELDS = ["split", "step", "tokens", "seconds", "lr", "loss", "diff_loss", "masked_ce", "next_ce", "tokens_per_s"]


class LossLog:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def append(self, row: dict) -> None:
        new = not self.path.exists()
        with self.path.open("a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: (f"{v:.5g}" if isinstance(v, float) else v) for k, v in row.items()})

    def truncate_after(self, step: int) -> None:
        """On resume, drop rows logged after the checkpoint (they will be logged again)."""
        if not self.path.exists():
            return
        rows = self.rows()
        self.path.unlink()
        for row in rows:
            if int(row["step"]) <= step:
                self.append(row)

    def rows(self) -> list[dict]:
        if not self.path.exists():
            return []
        with self.path.open() as f:
            return list(csv.DictReader(f))


def _series(rows: list[dict], split: str, key: str) -> list[tuple[float, float]]:
    out = []
    for r in rows:
        if r["split"] == split and r.get(key):
            out.append((float(r["tokens"]), float(r[key])))
    return out


def plot(csv_path: Path, out_stem: Path) -> Path | None:
    rows = LossLog(csv_path).rows()
    curves = {f"{split} {key}": _series(rows, split, key)
              for split in ("train", "heldout") for key in ("masked_ce", "next_ce")}
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _svg(curves, out_stem.with_suffix(".svg"))
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, pts in curves.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name)
    ax.set_xlabel("training tokens")
    ax.set_ylabel("cross-entropy (nats)")
    ax.legend()
    out = out_stem.with_suffix(".png")
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return out


def _svg(curves: dict[str, list[tuple[float, float]]], out: Path) -> Path:
    w, h, m = 700, 400, 50
    xs = [p[0] for pts in curves.values() for p in pts]
    ys = [p[1] for pts in curves.values() for p in pts]
    x0, x1 = min(xs), max(xs) or 1.0
    y0, y1 = min(ys), max(ys)
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > y0 else y0 + 1

    def sx(x):
        return m + (x - x0) / (x1 - x0) * (w - 2 * m)

    def sy(y):
        return h - m - (y - y0) / (y1 - y0) * (h - 2 * m)

    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
             f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">training tokens ({x0:.3g} to {x1:.3g})</text>',
             f'<text x="5" y="{m - 10}">nats: {y0:.2f} to {y1:.2f}</text>']
    for i, (name, pts) in enumerate(curves.items()):
        c = colors[i % len(colors)]
        line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{line}"/>')
        parts.append(f'<text x="{w - m - 150}" y="{m + 15 * i}" fill="{c}">{name}</text>')
    parts.append("</svg>")
    out.write_text("\n".join(parts) + "\n")
    return out
