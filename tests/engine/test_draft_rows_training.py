"""Training the draft rows' adapter (training/draft_rows.py) on the small model: the draft
rows see what the engine's pass shows them, the held-out KL to the frozen base falls, and a
run resumes where it stopped (through `dllm-lsp train --base` too)."""

import csv
from pathlib import Path

import torch

from dllm_engine.training import draft_rows

ROOT = Path(__file__).resolve().parents[2]


def test_a_draft_row_sees_the_real_tokens_up_to_its_anchor_and_its_groups_earlier_rows():
    seqs = [list(range(20)), list(range(16))]
    ids, pos, mask, used, teacher = draft_rows.draft_batch(seqs, [[5, 9], [7]], rows=3, mask_id=99)
    s = 20
    assert ids.shape == (2, 6) and bool((ids == 99).all())
    assert pos[0].tolist() == [6, 7, 8, 10, 11, 12] and teacher[0].tolist() == [6, 7, 8, 10, 11, 12]
    m = mask[0, 0]
    assert m[0, :6].all() and not m[0, 6:s].any()  # row 0 of anchor 5: real tokens 0..5
    assert m[2, s:s + 3].all() and not m[2, s + 3:].any()  # its group's rows 0..2, not the next group's
    assert m[3, :10].all() and not m[3, 10:s].any() and not m[3, s:s + 3].any() and m[3, s + 3]
    assert used[1].tolist() == [True] * 3 + [False] * 3  # the shorter group is padding after its rows
    pad = mask[1, 0, 3:]  # a padding row sees itself alone (never nothing: NaN in some attention kernels)
    assert pad.sum(-1).tolist() == [1, 1, 1] and pad[:, s + 3:].diagonal().all()


def held_kl(run: Path) -> list[float]:
    with (run / "loss.csv").open() as f:
        return [float(r["loss"]) for r in csv.DictReader(f) if r["split"] == "heldout"]


def test_training_lowers_the_held_out_kl_and_resumes(tmp_path):
    torch.manual_seed(0)
    run = tmp_path / "run"
    common = ["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"),
              "--rows", "2", "--rank", "8", "--lr", "3e-3", "--warmup", "2", "--anchors", "8", "--tail", "32",
              "--prefix-max", "96", "--suffix-max", "32", "--held", "4", "--log-every", "5", "--eval-every", "1000"]
    draft_rows.main([*common, "--max-steps", "20", "--minutes", "5"])
    first = held_kl(run)
    saved = draft_rows.draft_adapter.DraftAdapterConfig.load(run / "adapter" / "draft_adapter.json")
    assert saved.rows == 2
    assert first[-1] < 0.9 * first[0]  # distilling the base's next-token distribution into the draft rows
    # Resumed through `dllm-lsp train --base` (its --out is the run, its --time-budget the minutes)
    from dllm_lsp.cli import main as cli

    shared = [a for a in common if a not in ("--model", "small", "--run", str(run))]
    assert cli(["train", "--base", "small", "--out", str(run), "--time-budget", "5m", "--max-steps", "22", *shared]) == 0
    resumed = draft_rows.draft_adapter.DraftAdapterConfig.load(run / "adapter" / "draft_adapter.json")
    assert saved.trained["steps"] == 20 and resumed.trained["steps"] == 22
    assert len(held_kl(run)) == len(first) + 1  # no second step-0 evaluation: the run went on


def test_sampling_processes_feed_the_same_training(tmp_path):
    """--workers: batches are cut in spawned processes (a GPU step is as quick as sampling its
    batch in the trainer's own process); the run trains and saves as without them."""
    run = tmp_path / "run"
    draft_rows.main(["--model", "small", "--run", str(run), "--corpus", str(ROOT / "engine" / "dllm_engine"),
                     "--rows", "2", "--rank", "4", "--anchors", "4", "--tail", "16", "--prefix-max", "64",
                     "--suffix-max", "16", "--held", "2", "--log-every", "1", "--eval-every", "1000",
                     "--max-steps", "3", "--workers", "1", "--batch", "3"])
    with (run / "loss.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["step"] for r in rows if r["split"] == "train"] == ["1", "2", "3"]
    assert float(rows[1]["rows_per_s"]) > 0
    saved = draft_rows.draft_adapter.DraftAdapterConfig.load(run / "adapter" / "draft_adapter.json")
    assert saved.trained["steps"] == 3


def test_evaluate_measures_adapters_on_the_run_s_own_held_out_sequences(tmp_path, capsys):
    """--evaluate: adapters trained elsewhere (the GPU run's) side by side on this machine's
    held-out sequences, the very ones a run here evaluates on (so the figures are paired);
    nothing is trained, nothing written into the folders."""
    common = ["--model", "small", "--corpus", str(ROOT / "engine" / "dllm_engine"), "--rows", "2", "--rank", "4",
              "--anchors", "4", "--tail", "16", "--prefix-max", "64", "--suffix-max", "16", "--held", "3",
              "--eval-every", "1000", "--lr", "3e-3", "--warmup", "1"]
    draft_rows.main([*common, "--run", str(tmp_path / "a"), "--max-steps", "6"])
    folder = tmp_path / "a" / "adapter"
    trained = draft_rows.draft_adapter.DraftAdapterConfig.load(folder / "draft_adapter.json").trained
    before = (folder / "draft_adapter.safetensors").read_bytes()
    capsys.readouterr()
    draft_rows.main([*common, "--run", str(tmp_path / "scratch"), "--evaluate", str(folder), "--evaluate", str(folder)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {folder}")]
    assert len(table) == 2 and table[0] == table[1]  # the same sequences for every folder
    kl = float(table[0].split("|")[4])
    # What the run measured on them at its last save (the adapter was stored in bf16 since)
    assert abs(kl - trained["held_out_kl"]) < 0.03 * trained["held_out_kl"]
    assert (folder / "draft_adapter.safetensors").read_bytes() == before
