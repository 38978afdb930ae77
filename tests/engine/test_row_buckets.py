"""Flat memory (issue 16, defect 8): a bounded set of row counts reaches the CPU's bf16 linear,
and the context cache's default budget is sized to the model.

oneDNN keeps a kernel and its buffers for every (rows, in, out) a CPU bf16 linear meets
(row_buckets.py), so what must hold is a shape property, checked directly: every row count
that reaches `F.linear` in bf16 on the CPU is a bucket, whatever the traffic. (An RSS check
would depend on the CPU's oneDNN kernels and on the other jobs of a shared box.)
"""

import dataclasses
from collections import defaultdict

import pytest
import torch
import torch.nn.functional as F

from dllm_engine import row_buckets
from dllm_engine.context_cache import BUDGET_CAP_MB, BUDGET_CONTEXTS, context_budget_bytes, entry_capacity
from dllm_engine.engine import Engine, EngineConfig
from dllm_engine.protocol import Hole, InfillRequest
from dllm_engine.row_buckets import EXACT_ROWS, STEPS_PER_OCTAVE, bucket_rows


def test_buckets_are_exact_then_a_geometric_ladder():
    assert [bucket_rows(m) for m in range(1, EXACT_ROWS + 1)] == list(range(1, EXACT_ROWS + 1))
    seen = set()
    for m in range(1, 8193):
        b = bucket_rows(m)
        assert m <= b <= m * (1 + 1 / STEPS_PER_OCTAVE)
        assert bucket_rows(b) == b  # a bucket is its own bucket: padding is idempotent
        seen.add(b)
    # 16 exact counts, then STEPS_PER_OCTAVE per power of two from 16 to 8192 (9 octaves)
    assert len(seen) == EXACT_ROWS + STEPS_PER_OCTAVE * 9


def test_padded_linear_is_the_same_linear():
    # Its own seed: under the global one the draw depended on the tests before it, and one
    # draw put a bf16 sum of 32 products 0.054 from fp32's (the tolerance below is 0.05).
    gen = torch.Generator().manual_seed(0)
    w, b = torch.randn(48, 32, generator=gen), torch.randn(48, generator=gen)
    x = torch.randn(3, 7, 32, generator=gen)  # 21 rows: padded to 24 in bf16
    torch.testing.assert_close(row_buckets.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()).float(),
                               F.linear(x, w, b), rtol=2e-2, atol=5e-2)
    assert row_buckets.linear(x.bfloat16(), w.bfloat16()).shape == (3, 7, 48)
    assert torch.equal(row_buckets.linear(x, w, b), F.linear(x, w, b))  # fp32 passes through


@pytest.fixture
def linear_rows(monkeypatch):
    """Row counts (per weight shape) of every CPU bf16 call of F.linear while the test runs."""
    rows: dict[tuple, set[int]] = defaultdict(set)
    real = F.linear

    def recording(x, weight, bias=None):
        if row_buckets.needs_buckets(x):
            rows[tuple(weight.shape)].add(x.reshape(-1, x.shape[-1]).shape[0])
        return real(x, weight, bias)

    monkeypatch.setattr(torch.nn.functional, "linear", recording)
    return rows


def test_engine_sends_only_bucket_row_counts_to_a_bf16_linear(linear_rows):
    """Thirty contexts of thirty lengths (each a fresh encode and a cached tail), and batches of
    1-3 canvases: before the fix every length was a new oneDNN kernel kept for good."""
    engine = Engine(EngineConfig(dtype="bfloat16", threads=1, heal=False))  # the small model
    try:
        for i in range(30):
            prefix = "def f(x):\n" + "    x = x + 1\n" * (i % 10 + 1) + "    y = " + "a" * i
            holes = [Hole(prefix=prefix + "b" * j, suffix="\n    return y\n", max_tokens=8) for j in range(i % 3 + 1)]
            engine.infill(InfillRequest(holes=holes))
    finally:
        engine.shutdown()
    counts = sorted({r for seen in linear_rows.values() for r in seen})
    assert counts, "no bf16 linear ran: the test no longer covers the engine's projections"
    assert max(counts) > 2 * EXACT_ROWS  # context encodes went through
    assert [r for r in counts if bucket_rows(r) != r] == []


def test_int4_dense_path_sends_only_bucket_row_counts(linear_rows):
    from dllm_engine.weight_only import DENSE_ROWS, Int4Linear, int4_available

    if not int4_available():
        pytest.skip("this torch has no CPU weight-only kernels")
    lin = Int4Linear(torch.randn(64, 64).bfloat16())
    for m in range(DENSE_ROWS, 80):
        assert lin(torch.randn(m, 64).bfloat16()).shape == (m, 64)
    assert {r for r in linear_rows[(64, 64)] if bucket_rows(r) != r} == set()


def test_default_cache_budget_is_full_contexts_of_the_model():
    engine = Engine(EngineConfig(dtype="bfloat16", threads=1))  # the small model: 256-token contexts
    try:
        cfg = engine.loaded.config
        per_token = cfg.num_layers * 2 * cfg.num_kv_heads * cfg.head_dim * 2  # bf16 K and V
        want = BUDGET_CONTEXTS * entry_capacity(cfg.extra["context_tokens"]) * per_token
        assert engine.runner.cache.max_bytes == want == context_budget_bytes(cfg, torch.bfloat16)
        assert engine.health()["cache_budget_bytes"] == want
        assert want < 64 * 2**20  # not 512 MB of a model whose contexts are a few hundred tokens
    finally:
        engine.shutdown()
    big = dataclasses.replace(cfg, num_layers=64, extra={})  # its 2048-token window: over the cap
    assert context_budget_bytes(big, torch.bfloat16) == BUDGET_CAP_MB * 2**20
    chosen = Engine(EngineConfig(cache_mb=7, threads=1))
    try:
        assert chosen.runner.cache.max_bytes == 7 * 2**20
    finally:
        chosen.shutdown()
