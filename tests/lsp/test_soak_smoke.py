"""benchmarks/bench_soak.py end to end at tiny counts (its figures come from the benchmark, not from here):
every language-server request answered exactly once, nothing but protocol on stdout, no 5xx
from the daemon, both processes exiting cleanly."""

from __future__ import annotations

import importlib.util
import sys

from .conftest import ROOT


def test_soak_runs_with_tiny_counts(capsys):
    spec = importlib.util.spec_from_file_location("bench_soak", ROOT / "benchmarks" / "bench_soak.py")
    soak = importlib.util.module_from_spec(spec)
    sys.modules["bench_soak"] = soak  # dataclasses look their module up while the class is built
    spec.loader.exec_module(soak)
    out = soak.main(["--lsp", "30", "--daemon", "12", "--clients", "4", "--settle", "0.5"])
    lsp, daemon = out["lsp"], out["daemon"]
    assert lsp["sent"] >= 30 and lsp["answered_once"] == lsp["sent"], lsp
    assert lsp["unanswered"] == 0 and lsp["answered_twice"] == 0 and lsp["protocol_violations"] == 0
    assert lsp["cancel_sent"] > 0 and lsp["engine_requests"] > 0 and lsp["exit"] == 0
    assert daemon["answered"] + daemon["dropped_by_client"] == daemon["sent"] == 12, daemon
    assert daemon["answered"] > 0 and not [s for s in daemon["statuses"] if s.startswith("5")], daemon
    assert daemon["queue_after"] == 0 and daemon["active_after"] == 0 and daemon["exit"] == 0
    assert lsp["rss_warm_mb"] > 0 and lsp["rss_end_mb"] > 0 and daemon["rss_warm_mb"] > 0 and daemon["rss_end_mb"] > 0
    assert "| language server (engine in process) |" in capsys.readouterr().out
