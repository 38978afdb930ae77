"""Where loading puts each weight: written once, no second copy (issue 15).

- q/k/v and gate/up land back to back in one buffer, which `fuse_projections` reuses;
- same dtype on the CPU: every other weight stays memory-mapped (file-backed);
- another dtype or device: each tensor is read into its final buffer through a small
  staging buffer, one at a time (on CUDA, no full CPU copy first; checked here on `meta`).
"""

from __future__ import annotations

import pytest
import torch

from ckpt_writers import write_checkpoint, write_diffusion_gemma
from dllm_engine import shards
from dllm_engine.checkpoint import load
from dllm_engine.families.attention import forward_logits
from dllm_engine.shards import ShardReader


@pytest.fixture()
def spy(monkeypatch):
    """Counts mmap'd tensors and records the tensors read, in order."""
    seen = {"mmap": 0, "read": []}
    mmap, read_into = ShardReader.mmap, ShardReader.read_into

    def counted_mmap(self, ref):
        seen["mmap"] += 1
        return mmap(self, ref)

    def recorded_read(self, ref, dst):
        seen["read"].append((ref.name, dst.device.type))
        read_into(self, ref, dst)
        seen["staged"] = self.staged_bytes

    monkeypatch.setattr(ShardReader, "mmap", counted_mmap)
    monkeypatch.setattr(ShardReader, "read_into", recorded_read)
    return seen


def _ptr(t):
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize("family", ["dream", "llada"])  # Qwen2 names with biases; LLaDA's renamed OLMo names
def test_fused_layout_and_fuse_without_copy(tmp_path, family, spy):
    written = write_checkpoint(tmp_path, family, shards=2, dtype=torch.bfloat16)
    lm = load(str(tmp_path), dtype=torch.bfloat16)
    attn, mlp = lm.model.model.layers[1].self_attn, lm.model.model.layers[1].mlp
    q, k, v = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight
    assert _ptr(q) == _ptr(k) == _ptr(v)
    assert (k.storage_offset(), v.storage_offset()) == (q.numel(), q.numel() + k.numel())
    assert _ptr(mlp.gate_proj.weight) == _ptr(mlp.up_proj.weight)
    # Everything outside the fused groups is a view of the file mapping, never read by hand.
    assert {name for name, _ in spy["read"]} == {n for n in written if "_proj" in n and
                                                 any(p in n for p in ("q_proj", "k_proj", "v_proj", "ff_proj", "up_proj", "gate_proj"))}
    assert spy["mmap"] == len(written) - len(spy["read"]) - sum(n.endswith("inv_freq") for n in written)
    ids = torch.randint(0, 80, (2, 9))
    valid = torch.ones_like(ids, dtype=torch.bool)
    before = forward_logits(lm.model, ids, valid)
    lm.model.fuse_projections()
    fused_w, fused_b = attn.qkv
    assert _ptr(fused_w) == _ptr(q) and fused_w.storage_offset() == q.storage_offset()  # the same memory
    assert _ptr(mlp.gate_up[0]) == _ptr(lm.model.model.layers[1].mlp.gate_proj.weight)
    assert torch.equal(forward_logits(lm.model, ids, valid), before)


def test_fp32_from_bf16_is_converted_piece_by_piece(tmp_path, spy, monkeypatch):
    monkeypatch.setattr(shards, "CHUNK_BYTES", 64)  # many pieces per tensor, across the buffer's end
    written = write_checkpoint(tmp_path, "diffucoder", shards=2, dtype=torch.bfloat16)
    lm = load(str(tmp_path), dtype=torch.float32)
    state = lm.model.state_dict()
    for name, want in written.items():
        if not name.endswith("inv_freq"):
            assert torch.equal(state[name], want), name  # written as bf16, read back exactly as fp32
    assert spy["mmap"] == 0 and spy["staged"] <= 64


def test_device_path_places_each_tensor_on_the_device(tmp_path, spy, monkeypatch):
    """`meta` stands for CUDA: the loader allocates on the device, streams each tensor through
    a staging buffer of at most CHUNK_BYTES, and never maps a whole tensor on the host."""
    monkeypatch.setattr(shards, "CHUNK_BYTES", 4096)
    written = write_checkpoint(tmp_path, "llada", shards=2, dtype=torch.bfloat16)
    lm = load(str(tmp_path), device="meta", dtype=torch.bfloat16)
    assert {p.device.type for p in lm.model.parameters()} == {"meta"}
    assert spy["mmap"] == 0 and spy["staged"] <= 4096
    assert len(spy["read"]) == len(written) and {dev for _, dev in spy["read"]} == {"meta"}
    lm.model.fuse_projections()  # the fused buffers are laid out on the device too
    assert lm.model.model.layers[0].self_attn.qkv[0].device.type == "meta"


def test_diffusion_gemma_loads_straight_onto_the_device(tmp_path):
    """transformers' device_map (with accelerate) puts each tensor on the device as it is read.
    `meta` stands for the GPU in the load; transformers 5.25 refuses it in a device_map, so the
    device_map is checked for a CUDA device and the meta load goes through `.to`."""
    pytest.importorskip("accelerate")
    from dllm_engine.families.gemma_model import _placement

    assert _placement(torch.device("cuda")) == {"device_map": {"": "cuda"}}
    assert _placement(torch.device("meta")) == {}
    write_diffusion_gemma(tmp_path, shards=2, dtype=torch.bfloat16)
    lm = load(str(tmp_path), device="meta", dtype=torch.bfloat16)
    assert {p.device.type for p in lm.model.hf.parameters()} == {"meta"}
