"""The engine's /metrics in Prometheus' text format, for scrapers that ask for it.

The numbers are the engine's health snapshot (metrics.py); each numeric field
becomes a `dllm_engine_<field>` gauge, labelled with the model. Written through
prometheus_client so the exposition format (escaping, content type, OpenMetrics)
is the library's, not ours.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


def wants_prometheus(accept: str, query_format: str | None) -> bool:
    """Prometheus scrapers send `Accept: application/openmetrics-text, text/plain;version=0.0.4`;
    JSON stays the answer for everyone else (and for `?format=json`)."""
    if query_format:
        return query_format == "prometheus"
    return "openmetrics" in accept or "text/plain" in accept


class _Snapshot:
    def __init__(self, snapshot: dict) -> None:
        self.snapshot = snapshot

    def collect(self):
        model = str(self.snapshot.get("model", ""))
        for key, value in sorted(self.snapshot.items()):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            gauge = GaugeMetricFamily(f"dllm_engine_{key}", f"dllm engine {key.replace('_', ' ')}", labels=["model"])
            gauge.add_metric([model], float(value))
            yield gauge


def render(snapshot: dict) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(snapshot))
    return generate_latest(registry)
