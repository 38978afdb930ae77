"""The base's own LoRA (training/base_lora.py) and its suffix-reading run (training/suffix_lora.py),
on the small model: an adapter starts as the base exactly, merges into the same function it
computes, round-trips through its folder, and a run lowers its loss, resumes and exports a
checkpoint the engine loads."""

import argparse
import csv
import random
from pathlib import Path

import pytest
import torch

from dllm_engine.checkpoint import load
from dllm_engine.layout import causal_mask
from dllm_engine.training import base_lora, suffix_lora

ROOT = Path(__file__).resolve().parents[2]


def _logits(model, ids):
    pos = torch.arange(ids.shape[1])[None]
    out, _ = model(ids, pos, mask=causal_mask(0, ids.shape[1], ids.device))
    return out


def _small_trainer(tmp_path, *extra: str) -> suffix_lora.SuffixTrainer:
    """A trainer on the small model over short windows of the engine's own source."""
    args = argparse.ArgumentParser()
    suffix_lora.add_arguments(args)
    return suffix_lora.SuffixTrainer(args.parse_args([
        "--model", "small", "--run", str(tmp_path / "run"), "--corpus", str(ROOT / "engine" / "dllm_engine"),
        "--prefix-max", "48", "--suffix-max", "32", "--middle-max", "16", *extra]))


def test_an_adapter_starts_as_the_base_and_merges_into_what_it_computes(tmp_path):
    torch.manual_seed(0)
    model = load("small", dtype=torch.float32).model
    ids = torch.randint(10, 200, (2, 24))
    before = _logits(model, ids)
    params = base_lora.attach(model, rank=4, alpha=8.0)
    assert len(params) == 2 * 7 * len(model.model.layers)
    assert torch.equal(_logits(model, ids), before)  # B starts at zero: step 0 is the base
    for p in params:
        p.data.normal_(0, 0.05)
    adapted = _logits(model, ids)
    assert (adapted - before).abs().max() > 1e-2
    with base_lora.disabled(model):  # the frozen base, for a teacher, without a second copy
        assert torch.equal(_logits(model, ids), before)
    assert torch.equal(_logits(model, ids), adapted)
    base_lora.save(model, tmp_path / "a", {"steps": 1})
    again = load("small", dtype=torch.float32).model
    assert base_lora.load_into(again, tmp_path / "a")
    assert torch.allclose(_logits(again, ids), adapted, atol=1e-5)
    base_lora.merge(again)
    assert not any(isinstance(m, base_lora.LoRALinear) for m in again.modules())
    assert torch.allclose(_logits(again, ids), adapted, atol=1e-4)
    assert not base_lora.load_into(load("small", dtype=torch.float32).model, tmp_path / "none")


def test_a_sequence_scores_the_prefix_the_middle_and_the_suffix_again():
    loaded = load("small", dtype=torch.float32)
    files = [str(p) for p in sorted((ROOT / "engine" / "dllm_engine").glob("*.py"))]
    rng = random.Random(3)
    got = None
    while got is None:
        got = suffix_lora.sample_fim(rng, files, loaded.tokenizer, loaded.config, 64, 96, 32, 8)
    ids, parts = got
    cfg = loaded.config
    assert len(ids) == len(parts)
    start = ids.index(cfg.prefix_token_id)
    assert all(p == -1 for p in parts[:start + 1]) and parts[start + 1] == suffix_lora.PREFIX
    assert suffix_lora.MIDDLE in parts
    shown = ids[ids.index(cfg.suffix_token_id) + 1:start]  # the suffix, in front of the prefix
    echo = [i for i, p in zip(ids, parts) if p == suffix_lora.SUFFIX]
    n = min(len(shown), len(echo))
    assert echo[:n] == shown[:n]  # after the middle, the suffix's start again
    bare, bare_parts = suffix_lora.without_suffix(ids, parts, cfg)
    assert len(bare) == len(ids) - len(shown) and bare[bare.index(cfg.suffix_token_id) + 1] == cfg.prefix_token_id
    assert bare_parts[-len(parts) + start:] == parts[start:]  # everything scored is scored the same


def test_the_anchor_holds_the_suffixless_view_to_the_base(tmp_path):
    """--anchor: a step also pays the KL from the frozen base to the model on the sequences
    without their suffix, logged beside the cross-entropy; at step 0 it is zero."""
    run = tmp_path / "run"
    args = ["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"), "--rank", "4",
            "--lr", "3e-3", "--warmup", "1", "--prefix-max", "48", "--suffix-max", "32", "--middle-max", "16",
            "--batch", "2", "--held", "2", "--log-every", "1", "--eval-every", "1000", "--anchor", "1.0"]
    suffix_lora.main([*args, "--max-steps", "3"])
    with (run / "loss.csv").open() as f:
        kl = [float(r["anchor_kl"]) for r in csv.DictReader(f) if r["split"] == "train"]
    assert len(kl) == 3 and abs(kl[0]) < 1e-4 and kl[-1] > kl[0]


def test_a_run_lowers_its_loss_resumes_and_exports_a_checkpoint(tmp_path):
    run = tmp_path / "run"
    common = ["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"),
              "--rank", "4", "--lr", "3e-4", "--warmup", "2", "--prefix-max", "64", "--suffix-max", "32",
              "--middle-max", "16", "--batch", "2", "--held", "4", "--log-every", "5", "--eval-every", "1000"]
    suffix_lora.main([*common, "--max-steps", "30"])
    with (run / "loss.csv").open() as f:
        held = [float(r["loss"]) for r in csv.DictReader(f) if r["split"] == "heldout"]
    assert held[-1] < held[0] - 0.02  # 5.60 -> 5.56 when written
    with (run / "loss.csv").open() as f:
        first = next(r for r in csv.DictReader(f) if r["split"] == "heldout")
    # What the suffix is worth to the middle: its CE without the suffix, less its CE with it
    assert abs(float(first["suffix_worth"]) - (float(first["middle_ce_bare"]) - float(first["middle_ce"]))) < 1e-3
    suffix_lora.main([*common, "--max-steps", "32"])
    with (run / "loss.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["step"] for r in rows if r["split"] == "heldout"] == ["0", "30", "32"]
    out = tmp_path / "merged"
    suffix_lora.main([*common, "--export", str(out)])
    merged = load(str(out), dtype=torch.float32)
    assert merged.tokenizer is not None and merged.config.prefix_token_id == load("small").config.prefix_token_id
    shipped = tmp_path / "shipped"
    suffix_lora.main([*common, "--ship", str(shipped)])
    from dllm_engine import low_rank

    meta, tensors = low_rank.read(shipped)
    assert meta["trained"]["steps"] == 32 and (shipped / "loss.csv").exists()
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}


def test_the_prefix_weight_counts_the_prefix_tokens_that_much_in_the_loss(tmp_path):
    """--prefix-weight 0: the loss is the infill's alone (the middle and the suffix again),
    while the held-out rows still report every part."""
    trainer = _small_trainer(tmp_path, "--held", "2")
    seqs = trainer.held
    with torch.no_grad():
        full, parts, n = trainer.losses(seqs)
        infill, same_parts, _ = trainer.losses(seqs, prefix_weight=0.0)
        half, _, _ = trainer.losses(seqs, prefix_weight=0.5)
    assert parts[:3] == same_parts[:3]
    counts = [sum(sum(1 for x in p[1:] if x == k) for _, p in seqs) for k in range(3)]
    assert sum(counts) == n
    want = (parts[1] * counts[1] + parts[2] * counts[2]) / (counts[1] + counts[2])
    assert abs(float(infill) - want) < 1e-3
    assert abs(float(full) - sum(v * c for v, c in zip(parts, counts)) / n) < 1e-3
    assert abs(float(half) - (0.5 * parts[0] * counts[0] + parts[1] * counts[1] + parts[2] * counts[2])
               / (0.5 * counts[0] + counts[1] + counts[2])) < 1e-3


def test_the_middle_tokens_the_suffix_shows_are_weighted_and_reported_with_and_without_it(tmp_path):
    """shown_by_suffix marks a middle token the suffix holds and the prefix does not (a name
    the middle introduces); --shown-weight counts those that much in the loss, and the
    held-out rows report their CE with the suffix and without it."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(suffix_token_id=1, prefix_token_id=2)
    P, M, S = suffix_lora.PREFIX, suffix_lora.MIDDLE, suffix_lora.SUFFIX
    ids = [0, 1, 40, 41, 2, 30, 41, 40, 41, 30, 50, 40]
    parts = [-1, -1, -1, -1, -1, P, P, M, M, M, M, S]
    # 40: in the suffix, not the prefix; 41: in both; 30: the prefix's; 50: nowhere; the echo is not the middle
    assert suffix_lora.shown_by_suffix(ids, parts, cfg) == [False] * 7 + [True, False, False, False, False]
    trainer = _small_trainer(tmp_path, "--held", "8")
    seqs = trainer.held
    masks = [suffix_lora.shown_by_suffix(q, p, trainer.cfg) for q, p in seqs]
    shown_count = sum(sum(m[1:]) for m in masks)
    assert shown_count > 0  # real code: the middle names what the suffix uses
    with torch.no_grad():
        plain, parts, n = trainer.losses(seqs)
        heavy, _, _ = trainer.losses(seqs, shown_weight=3.0)
    want = (float(plain) * n + 2.0 * parts[3] * shown_count) / (n + 2.0 * shown_count)
    assert abs(float(heavy) - want) < 1e-3
    row = trainer.held_row(trainer.held_out())
    assert abs(row["shown_ce"] - parts[3]) < 1e-3
    assert row["shown_ce_bare"] == row["shown_ce_bare"] and row["shown_ce_bare"] != row["shown_ce"]


def test_the_anchor_can_hold_the_infill_rows_alone(tmp_path):
    """--anchor-rows infill: the KL is averaged over the middle's and the suffix's rows only,
    where the prefix's many rows would otherwise hide a drift (all: every scored row)."""
    trainer = _small_trainer(tmp_path, "--held", "2", "--anchor", "1.0", "--anchor-rows", "infill", "--rank", "4")
    torch.manual_seed(0)
    for p in trainer.learner.parameters():
        p.data.normal_(0, 0.05)  # B starts at zero (the base exactly): move it
    seqs = trainer.held
    with torch.no_grad():
        infill = float(trainer.anchor_loss(seqs))
        trainer.args.anchor_rows = "all"
        every = float(trainer.anchor_loss(seqs))
        bare = [suffix_lora.without_suffix(q, p, trainer.cfg) for q, p in seqs]
        with base_lora.disabled(trainer.model):
            teacher, _, which, _ = trainer._logits(bare)
        student, _, _, _ = trainer._logits(bare)
        t = torch.log_softmax(teacher, -1)
        kl = (t.exp() * (t - torch.log_softmax(student, -1))).sum(-1)
    assert abs(infill - float(kl[which != suffix_lora.PREFIX].mean())) < 1e-4
    assert abs(every - float(kl.mean())) < 1e-4
    assert infill > 0 and abs(infill - every) > 1e-4


def test_targets_adapt_only_the_named_projections_and_the_engine_runs_half_the_products(tmp_path):
    """--targets q_proj,k_proj,v_proj,o_proj: only attention carries factors (each adapted
    product costs two thin calls a pass at inference), the shipped folder says so, and the
    engine's fused model gains one adapter per fused qkv and o_proj, none on the MLP."""
    import pytest

    from dllm_engine import low_rank
    args = argparse.ArgumentParser()
    suffix_lora.add_arguments(args)
    with pytest.raises(SystemExit):  # an unknown name is refused by argparse, before any load
        args.parse_args(["--run", "r", "--targets", "q_proj,wo"])
    attention = "q_proj,k_proj,v_proj,o_proj"
    ns = args.parse_args(["--model", "small", "--run", str(tmp_path / "run"), "--corpus", str(ROOT / "engine" / "dllm_engine"),
                          "--prefix-max", "48", "--suffix-max", "32", "--middle-max", "16", "--held", "2",
                          "--rank", "4", "--targets", attention])
    trainer = suffix_lora.SuffixTrainer(ns)
    names = {n.rsplit(".", 2)[-2] for n, _ in trainer.model.named_parameters() if "lora_" in n}
    assert names == set(attention.split(","))
    for p in (p for n, p in trainer.model.named_parameters() if "lora_b" in n):
        p.data.normal_(0, 0.05)  # B starts at zero: make the adapter do something
    trainer.save()
    shipped = tmp_path / "shipped"
    suffix_lora.ship(tmp_path / "run", shipped)
    meta, tensors = low_rank.read(shipped)
    assert meta["targets"] == attention.split(",")
    loaded = load("small", dtype=torch.float32)
    loaded.model.fuse_projections()
    assert low_rank.attach_to(loaded.model, meta, tensors) == 2 * len(loaded.model.model.layers)


def test_a_full_rank_delta_starts_as_the_base_and_saves_as_its_best_low_rank_factors(tmp_path):
    """attach_full: a zero fp32 delta beside each frozen projection (step 0 is the base); saved,
    the folder holds the delta's rank-r SVD factors in the LoRA layout the engine reads (alpha =
    rank, so the factors carry the scale) and the delta itself, from which it resumes exactly."""
    from dllm_engine import low_rank

    torch.manual_seed(0)
    model = load("small", dtype=torch.float32).model
    ids = torch.randint(10, 200, (2, 24))
    before = _logits(model, ids)
    params = base_lora.attach_full(model, rank=4, targets=("q_proj", "k_proj", "v_proj", "o_proj"))
    assert len(params) == 4 * len(model.model.layers) and all(p.dtype == torch.float32 for p in params)
    assert torch.equal(_logits(model, ids), before)
    for p in params:  # a delta of rank 2 plus a little noise: rank 4 keeps nearly all of it
        out, inp = p.shape
        p.data.copy_(torch.randn(out, 2) @ torch.randn(2, inp) * 0.05 + torch.randn(out, inp) * 1e-4)
    learnt = _logits(model, ids)
    with base_lora.compressed(model):
        approx = _logits(model, ids)
    assert torch.equal(_logits(model, ids), learnt)  # the context gives the delta back
    assert (approx - learnt).abs().max() < 0.05 * (learnt - before).abs().max()  # the noise's share only
    base_lora.save(model, tmp_path / "a", {"steps": 1})
    meta, tensors = low_rank.read(tmp_path / "a")
    assert meta["rank"] == 4 and meta["alpha"] == 4.0 and meta["trained"]["compressed_kept"] > 0.99
    name = "model.layers.0.self_attn.q_proj"
    assert tensors[f"{name}.lora_a"].shape == (4, model.model.layers[0].self_attn.q_proj.base.in_features)
    engine_side = load("small", dtype=torch.float32)
    engine_side.model.fuse_projections()
    low_rank.attach_to(engine_side.model, meta, tensors)
    assert torch.allclose(_logits(engine_side.model, ids), approx, atol=1e-4)  # the engine runs what was compressed
    again = load("small", dtype=torch.float32).model
    assert base_lora.load_into(again, tmp_path / "a")  # a run resumes from the full delta, not the factors
    assert torch.equal(_logits(again, ids), learnt)
    shipped = load("small", dtype=torch.float32).model
    assert base_lora.load_into(shipped, tmp_path / "a", resume=False)  # what ships: the factors
    assert torch.allclose(_logits(shipped, ids), approx, atol=1e-4)


def test_a_full_rank_run_learns_logs_its_compressed_figure_and_ships_factors(tmp_path):
    run = tmp_path / "run"
    common = ["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"),
              "--full-rank", "--rank", "4", "--targets", "q_proj,k_proj,v_proj,o_proj", "--lr", "3e-4",
              "--warmup", "2", "--prefix-max", "64", "--suffix-max", "32", "--middle-max", "16", "--batch", "2",
              "--held", "4", "--log-every", "5", "--eval-every", "10"]
    suffix_lora.main([*common, "--max-steps", "20"])
    with (run / "loss.csv").open() as f:
        held = [r for r in csv.DictReader(f) if r["split"] == "heldout"]
    assert [r["step"] for r in held] == ["0", "10", "20"]  # the last step evaluated once, not again at the end
    assert float(held[-1]["loss"]) < float(held[0]["loss"]) - 0.02
    assert float(held[0]["middle_ce_compressed"]) == float(held[0]["middle_ce"])  # a zero delta compresses exactly
    assert held[-1]["middle_ce_compressed"] and float(held[-1]["middle_ce_compressed"]) != float(held[-1]["middle_ce"])
    assert (run / "adapter" / base_lora.DELTA_FILE).exists()
    suffix_lora.main([*common, "--max-steps", "22"])  # resumes from the delta and the optimiser's state
    shipped = tmp_path / "shipped"
    suffix_lora.main([*common, "--ship", str(shipped)])
    assert not (shipped / base_lora.DELTA_FILE).exists()  # only the compressed factors ship
    from dllm_engine import low_rank

    meta, tensors = low_rank.read(shipped)
    assert meta["trained"]["steps"] == 22 and meta["full_rank"] and meta["trained"]["compressed_kept"] <= 1.0
    # The merged export computes what ships (the factors), not the uncompressed delta
    merged = tmp_path / "merged"
    suffix_lora.main([*common, "--export", str(merged)])
    ids = torch.randint(10, 200, (1, 24), generator=torch.Generator().manual_seed(0))
    factors, delta = (load("small", dtype=torch.float32).model for _ in range(2))
    base_lora.load_into(factors, run / "adapter", resume=False)
    base_lora.load_into(delta, run / "adapter")
    exported = _logits(load(str(merged), dtype=torch.float32).model, ids)
    assert torch.allclose(exported, _logits(factors, ids), atol=1e-4)
    assert not torch.allclose(exported, _logits(delta, ids), atol=1e-4)


def test_a_run_folder_resumes_only_as_the_kind_it_was_saved(tmp_path):
    """A LoRA run's folder asked to go on with --full-rank (or another rank, other targets) stops
    with what it holds and the flags that resume it; before, it trained on as a LoRA and saved
    as full-rank."""
    run = tmp_path / "run"
    common = ["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"),
              "--warmup", "1", "--prefix-max", "48", "--suffix-max", "32", "--middle-max", "16", "--batch", "1",
              "--held", "2", "--eval-every", "2"]
    suffix_lora.main([*common, "--rank", "4", "--targets", "q_proj,v_proj", "--max-steps", "2"])
    for other in (["--rank", "4", "--targets", "q_proj,v_proj", "--full-rank"],
                  ["--rank", "8", "--targets", "q_proj,v_proj"],
                  ["--rank", "4", "--targets", "q_proj,k_proj"]):
        with pytest.raises(SystemExit, match="holds a LoRA .*resume it with --rank 4 --targets q_proj,v_proj"):
            suffix_lora.main([*common, *other, "--max-steps", "3"])
    suffix_lora.main([*common, "--rank", "4", "--targets", "v_proj,q_proj", "--max-steps", "3"])  # the same set
    with (run / "loss.csv").open() as f:
        assert [r["step"] for r in csv.DictReader(f) if r["split"] == "heldout"] == ["0", "2", "3"]
