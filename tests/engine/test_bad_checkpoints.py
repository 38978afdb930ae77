"""Malformed checkpoints fail with an error naming the file and the tensor."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from dllm_engine.checkpoint import load
from dllm_engine.model_config import CheckpointError


@pytest.fixture()
def copy(tiny_model, tmp_path):
    dst = tmp_path / "ckpt"
    shutil.copytree(tiny_model, dst)
    return dst


def rewrite(path, fn):
    state = load_file(str(path / "model.safetensors"))
    fn(state)
    save_file(state, str(path / "model.safetensors"))


def test_missing_tensor(copy):
    rewrite(copy, lambda s: s.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(CheckpointError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
        load(str(copy))


def test_wrong_shape(copy):
    def shrink(s):
        s["model.layers.0.self_attn.q_proj.weight"] = torch.zeros(3, 3)
    rewrite(copy, shrink)
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*q_proj\.weight.*shape"):
        load(str(copy))


def test_unexpected_tensor(copy):
    rewrite(copy, lambda s: s.__setitem__("model.layers.9.extra", torch.zeros(2)))
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*model\.layers\.9\.extra"):
        load(str(copy))


def test_corrupt_file(copy):
    (copy / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load(str(copy))


def test_missing_config(copy):
    (copy / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config\.json"):
        load(str(copy))


def test_unknown_architecture(copy):
    (copy / "config.json").write_text(json.dumps({"architectures": ["TotallyNewLM"], "model_type": "new"}))
    with pytest.raises(CheckpointError, match=r"config\.json.*TotallyNewLM"):
        load(str(copy))


def test_sharded_index_with_missing_shard(copy):
    (copy / "model.safetensors").unlink()
    (copy / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(CheckpointError, match=r"model-00001-of-00002\.safetensors"):
        load(str(copy))


def test_sharded_checkpoint_loads(copy):
    state = load_file(str(copy / "model.safetensors"))
    names = sorted(state)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    for shard, keys in shards.items():
        save_file({k: state[k] for k in keys}, str(copy / shard))
    (copy / "model.safetensors").unlink()
    (copy / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {k: s for s, ks in shards.items() for k in ks}}))
    lm = load(str(copy))
    torch.testing.assert_close(lm.model.model.embed_tokens.weight, state["model.embed_tokens.weight"])
