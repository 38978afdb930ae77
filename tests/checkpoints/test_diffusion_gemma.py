"""DiffusionGemma through transformers' native class: loading, logits against transformers'
own forward (the independent reference here), the engine runner's cache / noise /
self-conditioning, a round trip through the resident Engine, `model logits`, bad checkpoints."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from ckpt_writers import EOS, EXTRA, GEMMA_BOS, GEMMA_CANVAS, GEMMA_PAD, MASK, VOCAB, write_diffusion_gemma
from dllm_engine.checkpoint import load
from dllm_engine.model_config import CheckpointError

# Prompts longer than the 6-token sliding window, so the sliding layers' cache is trimmed.
PREFIXES = [[5, 17, 33, 2, 60, 71, 8, 44, 12], [40, 41], []]
T_SC = 0.4  # self-conditioning temperature (transformers' t_min default)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gemma") / "m"
    model = write_diffusion_gemma(folder)
    return folder, model


def hf_logits(model, prompt, canvas, sc=None):
    """transformers' own forward: encoder over the prompt, decoder over the canvas, positions as generate sets them."""
    pos = torch.arange(len(prompt), len(prompt) + len(canvas))[None]
    with torch.no_grad():
        return model(input_ids=torch.tensor([prompt]), decoder_input_ids=torch.tensor([canvas]),
                     decoder_position_ids=pos, self_conditioning_logits=sc).logits[0].double()


def test_detection_config_and_special_ids(ckpt):
    from dllm_engine.families.gemma_model import GemmaModel

    folder, model = ckpt
    raw = json.loads((folder / "config.json").read_text())
    assert raw["architectures"] == ["DiffusionGemmaForBlockDiffusion"] and raw["model_type"] == "diffusion_gemma"
    loaded = load(str(folder))
    cfg = loaded.config
    assert isinstance(loaded.model, GemmaModel)
    assert (cfg.family, cfg.attention, cfg.block_size, cfg.logits_shift) == ("diffusion_gemma", "encoder_decoder", GEMMA_CANVAS, False)
    assert (cfg.mask_token_id, cfg.eos_token_id, cfg.pad_token_id, cfg.extra["bos_token_id"]) == (MASK, EOS, GEMMA_PAD, GEMMA_BOS)
    assert EXTRA in cfg.extra["end_ids"]  # <end_of_turn> from the tokenizer
    assert cfg.num_params == sum(p.numel() for p in model.parameters())
    hf = loaded.model.hf  # the encoder is tied to the decoder, as transformers ties it
    assert hf.model.encoder.language_model.layers[2].self_attn.q_proj.weight is hf.model.decoder.layers[2].self_attn.q_proj.weight


def test_forward_logits_equal_transformers(ckpt):
    folder, model = ckpt
    loaded = load(str(folder))
    prompt, canvas = [GEMMA_BOS, *PREFIXES[0]], [3, 9, 27, 81, 14, 5, 7, 7]
    ids = torch.tensor([prompt + canvas])
    got = loaded.model.forward_logits(ids, torch.ones_like(ids, dtype=torch.bool))[0].double()
    want = hf_logits(model, prompt, canvas)
    assert (got[len(prompt):] - want).abs().max() < 1e-4
    assert got[: len(prompt)].abs().max() == 0  # the prompt's rows: this family predicts canvas slots only


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sharded_half_precision(tmp_path, dtype):
    write_diffusion_gemma(tmp_path, shards=2, dtype=dtype)
    assert (tmp_path / "model.safetensors.index.json").exists()
    full, half = load(str(tmp_path), dtype=torch.float32), load(str(tmp_path), dtype=dtype)
    assert {p.dtype for p in half.model.parameters()} == {dtype}
    ids = torch.tensor([[GEMMA_BOS, *PREFIXES[0], 3, 9, 27, 81, 14, 5, 7, 7]])
    valid = torch.ones_like(ids, dtype=torch.bool)
    a, b = full.model.forward_logits(ids, valid)[0, -8:], half.model.forward_logits(ids, valid)[0, -8:]
    assert (a - b).abs().max() / a.abs().max() < 0.05


def _runner(folder):
    from dllm_engine.families.family_runner import make_runner
    from dllm_engine.families.gemma_runner import DiffusionGemmaRunner

    runner = make_runner(load(str(folder)), 0)
    assert isinstance(runner, DiffusionGemmaRunner)
    return runner


def test_runner_batch_equals_transformers_with_self_conditioning(ckpt):
    folder, model = ckpt
    runner = _runner(folder)
    ctxs = [runner.encode_context(p, [1, 2], 8) for p in PREFIXES]  # the suffix is not seen
    lens = [8, 5, 8]
    canvas = torch.tensor([[3, 9, 27, 81, 14, 5, 7, 7], [11, 12, 13, 14, 15, EOS, EOS, EOS], [20, 21, 22, 23, 24, 25, 26, 27]])
    first = runner.canvas_logits(ctxs, canvas, torch.tensor(lens)).double()
    second = runner.canvas_logits(ctxs, canvas, torch.tensor(lens)).double()
    for r, prefix in enumerate(PREFIXES):
        prompt, n = [GEMMA_BOS, *prefix], lens[r]
        want = hf_logits(model, prompt, canvas[r, :n].tolist())
        assert (first[r, :n] - want).abs().max() < 1e-4, r
        sc = (first[r:r + 1, :n] / T_SC).float()  # the previous pass's logits, temperature-scaled
        want2 = hf_logits(model, prompt, canvas[r, :n].tolist(), sc=sc)
        assert (second[r, :n] - want2).abs().max() < 1e-4, r
        assert (second[r, :n] - want).abs().max() > 1e-3  # self-conditioning changes the logits
    assert runner.stats.misses == 3 and len(runner) == 3 and runner.nbytes > 0
    # The 10-token prompt: sliding layers (window 6) keep 5 positions, the global layer all 10,
    # with its own head_dim (16) and kv heads (1); the batched cache pads each layer separately.
    layers = ctxs[0].cache.layers
    assert [tuple(layer.keys.shape[1:]) for layer in layers] == [(2, 5, 8), (2, 5, 8), (1, 10, 16)]


def test_uncommitted_slots_are_uniform_noise(ckpt):
    from dllm_engine.families.gemma_runner import NOISE_SEED

    folder, model = ckpt
    runner = _runner(folder)
    ctx = runner.encode_context(PREFIXES[0], [], 8)
    canvas = torch.tensor([[3, MASK, 27, MASK, MASK, 5, MASK, MASK]])
    got = runner.canvas_logits([ctx], canvas, torch.tensor([8]))[0].double()
    draw = torch.randint(0, VOCAB, (8,), generator=torch.Generator().manual_seed(NOISE_SEED))
    fed = torch.where(canvas[0] == MASK, draw, canvas[0]).tolist()
    assert (got - hf_logits(model, [GEMMA_BOS, *PREFIXES[0]], fed)).abs().max() < 1e-4
    literal = hf_logits(model, [GEMMA_BOS, *PREFIXES[0]], canvas[0].tolist())
    assert (got - literal).abs().max() > 1e-3  # the placeholder id itself is never fed


def test_long_canvas_runs_block_by_block_with_exact_cache(ckpt):
    folder, model = ckpt
    runner = _runner(folder)
    ctx = runner.encode_context(PREFIXES[1], [], 12)
    done = [3, 9, 27, 81, 14, 5, 7, 7]  # block 0 finished
    canvas = torch.tensor([done + [30, 31, 32, 33]])
    got = runner.canvas_logits([ctx], canvas, torch.tensor([12]))[0].double()
    # Block 0 is final: all mass on its tokens. Block 1 is decoded after prompt + block 0, as generate does.
    assert (got[:8].argmax(-1) == torch.tensor(done)).all() and (got[:8].softmax(-1).max(-1).values > 0.999).all()
    want = hf_logits(model, [GEMMA_BOS, *PREFIXES[1], *done], [30, 31, 32, 33])
    assert (got[8:] - want).abs().max() < 1e-4
    assert ctx.encoded == done and runner.stats.misses == 2  # the prompt, then block 0 appended to its cache
    canvas[0, 8] = MASK  # a later block not yet started gets flat logits; here block 1 is current
    canvas2 = torch.tensor([[MASK] * 8 + [30, 31, 32, 33]])
    flat = runner.canvas_logits([runner.encode_context(PREFIXES[1], [], 12)], canvas2, torch.tensor([12]))[0]
    assert flat[8:].abs().max() == 0


def test_engine_infill_round_trip(ckpt):
    from dllm_engine.engine import Engine, EngineConfig
    from dllm_engine.families.gemma_runner import DiffusionGemmaRunner
    from dllm_engine.protocol import Hole, InfillRequest, ScoreRequest

    folder, _ = ckpt
    eng = Engine(EngineConfig(model=str(folder), device="cpu", dtype="float32"))
    try:
        assert isinstance(eng.runner, DiffusionGemmaRunner) and eng.config.buckets == (256,)
        req = InfillRequest(holes=[Hole(prefix="w5 w17 w33 w2 w60 w71 w8", suffix="w8 w44", max_tokens=8),
                                   Hole(prefix="w40", suffix="w9", max_tokens=6)])
        result = eng.infill(req, timeout=120)
        again = eng.infill(req, timeout=120)
        assert len(result.holes) == 2
        for hole, cap in zip(result.holes, (8, 6)):
            assert hole.finish_reason in ("end", "max_tokens")
            assert hole.passes >= 1 and 0 <= hole.tokens <= cap
            assert "<mask>" not in hole.text
        assert [h.text for h in again.holes] == [h.text for h in result.holes]  # greedy + per-hole noise seed
        assert eng.health()["status"] == "ok" and eng.health()["parameters"] > 0
        scored = eng.score(ScoreRequest(prefix="w5 w17", span="w33 w2 w60", suffix="w8"))
        assert len(scored.tokens) == 3 and all(0.0 <= t.prob <= 1.0 for t in scored.tokens)
    finally:
        eng.shutdown()


def test_model_logits_cli_left_padding(tmp_path):
    from dllm_lsp.cli import main

    model = write_diffusion_gemma(tmp_path / "m", tokenizer=False)  # config.json + weights only
    ids = [[GEMMA_BOS, 5, 17, 33, 3, 9, 27, 81, 14, 5, 7, 7], [0, 0, GEMMA_BOS, 40, 11, 12, 13, 14, 15, 16, 17, 18]]
    mask = [[1] * 12, [0, 0] + [1] * 10]
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    (tmp_path / "mask.json").write_text(json.dumps(mask))
    rc = main(["model", "logits", str(tmp_path / "m"), "--ids", str(tmp_path / "ids.json"),
               "--attention-mask", str(tmp_path / "mask.json"), "--out", str(tmp_path / "out.safetensors")])
    assert rc == 0
    out = load_file(str(tmp_path / "out.safetensors"))["logits"]
    assert out.shape == (2, 12, VOCAB) and out.dtype == torch.float32
    for r in range(2):  # canvas = the last canvas_length columns; padding only changes nothing
        prompt = [t for t, m in zip(ids[r][:4], mask[r][:4]) if m]
        assert (out[r, 4:].double() - hf_logits(model, prompt, ids[r][4:])).abs().max() < 1e-4


def test_missing_tensor_names_file_and_tensor(tmp_path):
    write_diffusion_gemma(tmp_path)
    name = "model.decoder.layers.1.self_attn.q_proj.weight"
    state = load_file(str(tmp_path / "model.safetensors"))
    del state[name]
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=rf"model\.safetensors: missing tensor '{name}'"):
        load(str(tmp_path))


def test_missing_shard_and_text_config(tmp_path):
    write_diffusion_gemma(tmp_path / "a", shards=2)
    (tmp_path / "a" / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model-00002-of-00002\.safetensors.*missing"):
        load(str(tmp_path / "a"))
    write_diffusion_gemma(tmp_path / "b")
    cfg = json.loads((tmp_path / "b" / "config.json").read_text())
    del cfg["text_config"]
    (tmp_path / "b" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"config\.json: missing key 'text_config'"):
        load(str(tmp_path / "b"))


def test_one_context_at_two_blocks_in_one_batch(ckpt):
    """Scoring batches one context several times; rows at different blocks must not share a cache."""
    folder, model = ckpt
    runner = _runner(folder)
    ctx = runner.encode_context(PREFIXES[1], [], 12)
    prompt, done = [GEMMA_BOS, *PREFIXES[1]], [3, 9, 27, 81, 14, 5, 7, 7]
    canvas = torch.tensor([[MASK] + done[1:] + [30, 31, 32, 33], done + [30, MASK, 32, 33]])
    got = runner.canvas_logits([ctx, ctx], canvas, torch.tensor([12, 12])).double()
    gen = torch.Generator().manual_seed(0)  # the hole's one noise stream: row 0's block, then row 1's
    d0, d1 = torch.randint(0, VOCAB, (8,), generator=gen), torch.randint(0, VOCAB, (4,), generator=gen)
    fed0 = torch.where(canvas[0, :8] == MASK, d0, canvas[0, :8]).tolist()
    fed1 = torch.where(canvas[1, 8:] == MASK, d1, canvas[1, 8:]).tolist()
    assert (got[0, :8] - hf_logits(model, prompt, fed0)).abs().max() < 1e-4  # block 0 over the bare prompt
    assert got[0, 8:].abs().max() == 0  # row 0's block 1 has not started: flat
    assert (got[1, 8:] - hf_logits(model, prompt + done, fed1)).abs().max() < 1e-4  # block 1 after block 0
    assert ctx.encoded == []  # row 1 extended its own copy of the cache
