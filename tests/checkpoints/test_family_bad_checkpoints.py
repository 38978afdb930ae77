"""Broken checkpoints give a CheckpointError that names the file and the tensor or key."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_writers import write_checkpoint
from dllm_engine.checkpoint import load
from dllm_engine.model_config import CheckpointError


def _rewrite(path, edit):
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path))


def test_missing_tensor_names_file_and_checkpoint_name(tmp_path):
    write_checkpoint(tmp_path, "llada", shards=1)
    _rewrite(tmp_path / "model.safetensors", lambda t: t.pop("model.transformer.blocks.1.ff_proj.weight"))
    with pytest.raises(CheckpointError, match=r"model\.safetensors.*missing tensor 'model\.transformer\.blocks\.1\.ff_proj\.weight'"):
        load(str(tmp_path))


def test_missing_tensor_in_sharded_index(tmp_path):
    write_checkpoint(tmp_path, "dream", shards=2)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    del index["weight_map"]["model.layers.0.self_attn.k_proj.bias"]
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"index\.json: missing tensor 'model\.layers\.0\.self_attn\.k_proj\.bias'"):
        load(str(tmp_path))


def test_index_pointing_at_wrong_shard(tmp_path):
    write_checkpoint(tmp_path, "dream", shards=2)
    index_file = tmp_path / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    name = "model.norm.weight"
    other = {"model-00001-of-00002.safetensors": "model-00002-of-00002.safetensors",
             "model-00002-of-00002.safetensors": "model-00001-of-00002.safetensors"}[index["weight_map"][name]]
    index["weight_map"][name] = other
    index_file.write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=rf"{other}: has no tensor 'model\.norm\.weight'"):
        load(str(tmp_path))


def test_wrong_shape_names_file_and_tensor(tmp_path):
    write_checkpoint(tmp_path, "coda")
    _rewrite(tmp_path / "model.safetensors", lambda t: t.update({"model.layers.1.self_attn.q_norm.weight": torch.ones(7)}))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: tensor 'model\.layers\.1\.self_attn\.q_norm\.weight' has shape \(7,\)"):
        load(str(tmp_path))


def test_coda_without_its_own_head_is_an_error(tmp_path):
    write_checkpoint(tmp_path, "coda")
    _rewrite(tmp_path / "model.safetensors", lambda t: t.pop("lm_head.weight"))
    with pytest.raises(CheckpointError, match="missing tensor 'lm_head.weight'"):
        load(str(tmp_path))


def test_unexpected_tensor_is_named(tmp_path):
    write_checkpoint(tmp_path, "sdar")
    _rewrite(tmp_path / "model.safetensors", lambda t: t.update({"model.layers.0.mlp.experts.0.weight": torch.ones(2)}))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: unexpected tensor 'model\.layers\.0\.mlp\.experts\.0\.weight'"):
        load(str(tmp_path))


def test_corrupt_safetensors_names_file(tmp_path):
    write_checkpoint(tmp_path, "dream")
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(CheckpointError, match=r"model\.safetensors: not a readable safetensors file"):
        load(str(tmp_path))


def test_truncated_shard_names_file(tmp_path):
    write_checkpoint(tmp_path, "llada", shards=2)
    shard = tmp_path / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"model-00002-of-00002\.safetensors"):
        load(str(tmp_path))


@pytest.mark.parametrize("arch,model_type,message", [
    ("MambaForCausalLM", "mamba", "unsupported architecture 'MambaForCausalLM'"),
    ("SDARMoeForCausalLM", "sdar_moe", "recognised but not supported"),
    ("LLaDAMoEModelLM", "lladamoe", "mixture-of-experts"),
])
def test_unknown_or_unsupported_architecture(tmp_path, arch, model_type, message):
    write_checkpoint(tmp_path, "dream")
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(architectures=[arch], model_type=model_type)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=rf"config\.json: .*{message}"):
        load(str(tmp_path))


def test_autoregressive_qwen2_is_refused(tmp_path):
    write_checkpoint(tmp_path, "open_dcoder", tokenizer=False)
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["mask_token_id"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="no mask token"):
        load(str(tmp_path))


def test_unsupported_option_names_key(tmp_path):
    write_checkpoint(tmp_path, "dream")
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_scaling"] = {"type": "yarn", "factor": 4.0}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"config\.json: rope_scaling="):
        load(str(tmp_path))


def test_missing_config_key_is_named(tmp_path):
    write_checkpoint(tmp_path, "llada")
    cfg = json.loads((tmp_path / "config.json").read_text())
    del cfg["d_model"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"config\.json: missing key 'd_model'"):
        load(str(tmp_path))


def test_missing_mask_id_without_tokenizer(tmp_path):
    write_checkpoint(tmp_path, "fast_dllm_v2", tokenizer=False)  # its mask id lives in the tokenizer
    with pytest.raises(CheckpointError, match=r"config\.json: cannot find the mask id"):
        load(str(tmp_path))
    # ...but raw logits need no special ids at all
    cfg = load(str(tmp_path), logits_only=True).config
    assert cfg.extra["unresolved_special_ids"] == ["mask"]


def test_inconsistent_dims_name_config(tmp_path):
    write_checkpoint(tmp_path, "dream")
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["num_key_value_heads"] = 3  # 4 heads are not a multiple of 3
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"config\.json: num_heads 4 not a multiple of num_kv_heads 3"):
        load(str(tmp_path))
