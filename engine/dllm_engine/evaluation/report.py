"""Aggregate outcomes per (benchmark, arm) into a JSON summary and a markdown table."""

from __future__ import annotations

import statistics

from .harness import Outcome


def _pct(k: int, n: int) -> float:
    return round(100.0 * k / n, 1) if n else 0.0


def summarize(outcomes: list[Outcome]) -> list[dict]:
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.benchmark, o.arm), []).append(o)
    rows = []
    for (bench, arm), group in groups.items():
        n = len(group)
        ran = [o for o in group if o.passed is not None]
        called = [o for o in group if o.latency_ms > 0]  # the model was asked (not the empty-fill floor)
        decoded = [o for o in called if o.passes > 0]  # endpoints that report diffusion passes
        passes = sum(o.passes for o in decoded)
        rows.append({
            "benchmark": bench,
            "arm": arm,
            "n": n,
            "pass@1": _pct(sum(o.passed for o in ran), len(ran)) if ran else None,
            "exact_match": _pct(sum(o.exact for o in group), n),
            "syntax_valid": _pct(sum(bool(o.syntax_ok) for o in group), n),
            "passes_per_infill": round(passes / len(decoded), 2) if decoded else None,
            "tokens_per_pass": round(sum(o.committed for o in decoded) / passes, 2) if passes else None,
            # The fill's own tokens per pass: committed padding and end tokens left out.
            "fill_tokens_per_pass": round(sum(o.tokens for o in decoded) / passes, 2) if passes else None,
            "fill_tokens": round(statistics.mean(o.tokens for o in called), 1) if called else None,
            "latency_ms_median": round(statistics.median(o.latency_ms for o in called), 1) if called else None,
            "latency_ms_p90": round(sorted(o.latency_ms for o in called)[int(0.9 * (len(called) - 1))], 1) if called else None,
        })
    return rows


COLUMNS = [("benchmark", "benchmark"), ("arm", "decoding"), ("n", "n"), ("pass@1", "pass@1 %"),
           ("exact_match", "exact %"), ("syntax_valid", "syntax ok %"), ("passes_per_infill", "passes/infill"),
           ("tokens_per_pass", "tokens/pass"), ("fill_tokens_per_pass", "fill tokens/pass"), ("fill_tokens", "fill tokens"), ("latency_ms_median", "latency ms (median)")]


def markdown(rows: list[dict]) -> str:
    head = "| " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    body = []
    for r in rows:
        cells = ["-" if r.get(key) is None else str(r[key]) for key, _ in COLUMNS]
        body.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *body]) + "\n"
