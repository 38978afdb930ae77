"""Every family: detection, special ids, and logits equal to an independent forward."""

from __future__ import annotations

import pytest
import torch

from ckpt_reference import reference_logits
from ckpt_writers import EOS, EXTRA, FAMILY_NAMES, MASK, SPECS, write_checkpoint
from dllm_engine.checkpoint import load

IDS = [[5, 17, 33, 2, 60, 71, 8, 44, 12, 3], [40, 41, 9, 88, 1, 30, 29, 7, 6, 61]]
VALID = [[1] * 10, [0, 0, 0, 1, 1, 1, 1, 1, 1, 1]]  # second row left-padded


def engine_logits(loaded, ids, valid):
    from dllm_engine.families.attention import forward_logits

    return forward_logits(loaded.model, torch.tensor(ids), torch.tensor(valid, dtype=torch.bool)).double()


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_logits_match_independent_forward(tmp_path, family):
    tensors = write_checkpoint(tmp_path / family, family)
    loaded = load(str(tmp_path / family), dtype=torch.float32)
    assert loaded.config.family == family
    got = engine_logits(loaded, IDS, VALID)
    want = reference_logits(family, tensors, SPECS[family]["config"], IDS, VALID)
    real = torch.tensor(VALID, dtype=torch.bool)
    diff = (got - want).abs()[real].max().item()
    assert diff < 1e-4, f"{family}: max |diff| {diff}"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_left_padding_gives_unpadded_logits(tmp_path, family):
    write_checkpoint(tmp_path / family, family)
    loaded = load(str(tmp_path / family), dtype=torch.float32)
    padded = engine_logits(loaded, IDS[1:], VALID[1:])[0, 3:]
    plain = engine_logits(loaded, [IDS[1][3:]], [[1] * 7])[0]
    assert torch.allclose(padded, plain, atol=1e-5)


EXPECTED = {
    # family: (logits_shift, attention, block_size, pad id, infill kind)
    "llada": (False, "bidirectional", 0, EOS, "masks"),
    "dream": (True, "bidirectional", 0, EOS, "masks"),
    "diffucoder": (True, "bidirectional", 0, EXTRA, "dlm_pad"),
    "dreamon": (True, "bidirectional", 0, EOS, "expand"),
    "open_dcoder": (True, "bidirectional", 0, EOS, "masks"),
    "coda": (True, "bidirectional", 0, EOS, "masks"),
    "sdar": (False, "block", 4, EOS, "block"),
    "fast_dllm_v2": (True, "block", 4, EOS, "block"),
}


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_config_options_and_special_ids(tmp_path, family):
    write_checkpoint(tmp_path / family, family)
    cfg = load(str(tmp_path / family)).config
    shift, attention, block, pad, infill = EXPECTED[family]
    assert (cfg.logits_shift, cfg.attention, cfg.block_size, cfg.pad_token_id, cfg.extra["infill"]) == (shift, attention, block, pad, infill)
    assert (cfg.mask_token_id, cfg.eos_token_id) == (MASK, EOS)
    assert cfg.tie_word_embeddings == (family == "open_dcoder")  # CoDA: untied despite its config
    if family == "dreamon":
        assert cfg.extra["expand_token_id"] == EXTRA
    if family == "llada":
        assert EXTRA in cfg.extra["end_ids"]  # <|eot_id|> from the tokenizer


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("family", ["llada", "dream", "sdar"])
def test_half_precision_loads_and_agrees(tmp_path, family, dtype):
    write_checkpoint(tmp_path / family, family, dtype=dtype)  # stored in half precision, as released
    full = load(str(tmp_path / family), dtype=torch.float32)
    half = load(str(tmp_path / family), dtype=dtype)
    assert {p.dtype for p in half.model.parameters()} == {dtype}
    a, b = engine_logits(full, IDS[:1], VALID[:1]), engine_logits(half, IDS[:1], VALID[:1])
    assert (a - b).abs().max() / a.abs().max() < 0.05
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.7


def test_sharded_checkpoint_loads(tmp_path):
    write_checkpoint(tmp_path / "m", "dream", shards=2)
    assert (tmp_path / "m" / "model.safetensors.index.json").exists()
    assert load(str(tmp_path / "m")).config.family == "dream"


def test_every_family_has_defaults():
    from dllm_engine.families import FAMILIES
    from dllm_engine.families.defaults import defaults_for

    for fam in FAMILIES:
        d = defaults_for(fam.name)
        assert 0 < d.threshold <= 2 and d.buckets == tuple(sorted(d.buckets)) and d.refresh_every >= 1


def test_end_ids_from_generation_config_and_added_tokens(tmp_path):
    import json

    write_checkpoint(tmp_path, "dream")
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [EOS, 93]}))
    (tmp_path / "added_tokens.json").write_text(json.dumps({"<|im_end|>": 94}))
    cfg = load(str(tmp_path)).config
    assert {EOS, 93, 94} <= set(cfg.extra["end_ids"])
