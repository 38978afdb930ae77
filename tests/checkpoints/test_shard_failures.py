"""Checkpoints that cannot load fail with an error naming the file, before any tensor is read
(at 16 GB, reading first and failing later costs minutes): a truncated shard, a shard with a
dtype the engine cannot load, not enough RAM for the chosen dtype, not enough disk to save."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_writers import write_checkpoint, write_diffusion_gemma
from dllm_engine import room
from dllm_engine.checkpoint import load, save_native
from dllm_engine.model_config import CheckpointError
from dllm_engine.shards import ShardReader

SHARD2 = "model-00002-of-00002.safetensors"


@pytest.fixture()
def no_reads(monkeypatch):
    """Any tensor read fails the test: the error must come from the headers alone."""
    def refuse(*args, **kwargs):
        raise AssertionError("a tensor was read before the checkpoint was checked")
    monkeypatch.setattr(ShardReader, "read_into", refuse)
    monkeypatch.setattr(ShardReader, "mmap", refuse)


def _truncate(file, drop=100):
    data = file.read_bytes()
    file.write_bytes(data[:-drop])


@pytest.mark.parametrize("family", ["llada", "diffucoder"])
def test_truncated_shard_is_named(tmp_path, family, no_reads):
    write_checkpoint(tmp_path, family, shards=2, dtype=torch.bfloat16)
    _truncate(tmp_path / SHARD2)
    with pytest.raises(CheckpointError, match=rf"{SHARD2}: truncated: its header describes \d+ bytes but the file has"):
        load(str(tmp_path), dtype=torch.bfloat16)


def test_truncated_diffusion_gemma_shard_is_named(tmp_path):
    write_diffusion_gemma(tmp_path, shards=2)
    _truncate(tmp_path / SHARD2)
    with pytest.raises(CheckpointError, match=rf"{SHARD2}: truncated"):
        load(str(tmp_path))


def test_shard_cut_inside_its_header(tmp_path, no_reads):
    write_checkpoint(tmp_path, "dream", shards=1)
    file = tmp_path / "model.safetensors"
    file.write_bytes(file.read_bytes()[:40])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: not a readable safetensors file"):
        load(str(tmp_path))


def test_integer_tensor_in_a_shard_is_named(tmp_path, no_reads):
    write_checkpoint(tmp_path, "llada", shards=2)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    name = "model.transformer.blocks.1.q_proj.weight"
    shard = tmp_path / index["weight_map"][name]
    state = load_file(str(shard))
    state[name] = state[name].to(torch.int8)  # what a quantized export looks like
    save_file(state, str(shard))
    with pytest.raises(CheckpointError, match=rf"{shard.name}: tensor '{name}' is stored as I8"):
        load(str(tmp_path))


def test_not_enough_ram_for_the_dtype(tmp_path, monkeypatch, no_reads):
    write_checkpoint(tmp_path, "dream", shards=2, dtype=torch.bfloat16)
    on_disk = sum(f.stat().st_size for f in tmp_path.glob("*.safetensors"))
    # Room for the bf16 weights, not for twice that in fp32.
    monkeypatch.setattr(room, "mem_available", lambda: int(on_disk * 1.5))
    with pytest.raises(CheckpointError, match=r"index\.json: the weights need .* GiB as float32 but only .* GiB of RAM "
                                              r"\(MemAvailable in /proc/meminfo\) is available; free some or load in bfloat16"):
        load(str(tmp_path), dtype=torch.float32)


def test_bf16_fits_where_fp32_does_not(tmp_path, monkeypatch):
    write_checkpoint(tmp_path, "dream", shards=2, dtype=torch.bfloat16)
    on_disk = sum(f.stat().st_size for f in tmp_path.glob("*.safetensors"))
    monkeypatch.setattr(room, "mem_available", lambda: int(on_disk * 1.5))
    assert load(str(tmp_path), dtype=torch.bfloat16).model.lm_head.weight.dtype == torch.bfloat16


def test_not_enough_ram_for_diffusion_gemma(tmp_path, monkeypatch):
    write_diffusion_gemma(tmp_path)
    monkeypatch.setattr(room, "mem_available", lambda: 1000)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: the weights need .* GiB as float32"):
        load(str(tmp_path))


def test_not_enough_disk_to_save(tmp_path, monkeypatch):
    write_checkpoint(tmp_path / "in", "dream")
    model = load(str(tmp_path / "in")).model
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=10))
    with pytest.raises(CheckpointError, match=r"out: writing the weights needs .* GiB of disk, only .* GiB is free"):
        save_native(model, tmp_path / "out")
    assert not (tmp_path / "out" / "model.safetensors").exists()
