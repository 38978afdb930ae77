"""The CPU dtype choice: bf16 only where the CPU multiplies it natively, overridable."""

import pytest

from dllm_engine import cpu_features
from dllm_engine.engine import EngineConfig


@pytest.fixture(autouse=True)
def fresh_cache():
    cpu_features.native_bf16.cache_clear()
    yield
    cpu_features.native_bf16.cache_clear()


@pytest.mark.parametrize("forced, dtype", [("1", "bfloat16"), ("0", "float32")])
def test_auto_dtype_follows_the_cpu(monkeypatch, forced, dtype):
    monkeypatch.setenv("DLLM_CPU_BF16", forced)
    assert EngineConfig(device="cpu").dtype == dtype
    assert EngineConfig(device="cpu", dtype="float32").dtype == "float32"  # an explicit dtype wins


def test_flags_are_read_from_cpuinfo(monkeypatch, tmp_path):
    monkeypatch.delenv("DLLM_CPU_BF16", raising=False)
    info = tmp_path / "cpuinfo"
    monkeypatch.setattr(cpu_features, "Path", lambda _: info)
    info.write_text("processor : 0\nflags : fpu sse2 avx512f avx512_bf16\n")
    assert cpu_features.native_bf16()
    cpu_features.native_bf16.cache_clear()
    info.write_text("processor : 0\nflags : fpu sse2 avx2\n")
    assert not cpu_features.native_bf16()
