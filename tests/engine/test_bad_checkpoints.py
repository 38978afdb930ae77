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


def _edit_config(path, fn):
    cfg = json.loads((path / "config.json").read_text())
    fn(cfg["dllm_lsp_config"])
    (path / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize("key, value, message", [
    ("hidden_size", "256", r"config\.json: hidden_size must be an integer, got '256'"),
    ("qkv_bias", 1, r"qkv_bias must be true or false"),
    ("rope_theta", "1e4", r"rope_theta must be a number"),
    ("mask_token_id", 10**6, r"mask_token_id 1000000 is outside the vocabulary"),
    ("extra", [], r"extra must be an object"),
])
def test_bad_config_values_are_one_clear_error(copy, key, value, message):
    """Issue 16, defect 7: these were a raw torch TypeError, an IndexError at the first fill,
    and an AttributeError."""
    _edit_config(copy, lambda c: c.__setitem__(key, value))
    with pytest.raises(CheckpointError, match=message):
        load(str(copy))


def test_config_that_is_not_an_object(copy):
    (copy / "config.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="must hold a JSON object"):
        load(str(copy))
    (copy / "config.json").write_text('{"dllm_lsp_config": [1]}')
    with pytest.raises(CheckpointError, match="dllm_lsp_config must be an object"):
        load(str(copy))
