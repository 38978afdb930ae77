"""Write a shipped checkpoint's MODEL_CARD.md from the run's own records.

    python -m dllm_engine.training.model_card --checkpoint engine/dllm_engine/default_model \\
        --run runs/cpu1 --data runs/data --eval runs/eval/default.json --eval-command "dllm-lsp eval ..."

Every number in the card comes from a file: training.json and config.json in
the checkpoint, loss.csv and train.log in the run, the corpus meta and manifest
in the data folder, the evaluation report. Nothing is typed in by hand except
the free-text notes passed with --note.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
from pathlib import Path

from ..evaluation.report import markdown
from .loss_curve import LossLog


def _loss_table(rows: list[dict], every: int) -> str:
    held = [r for r in rows if r["split"] == "heldout"]
    picked = held[::every] + ([held[-1]] if held and held[-1] not in held[::every] else [])
    lines = ["| step | training tokens | train seconds | held-out masked CE | held-out next-token CE |",
             "|---|---|---|---|---|"]
    for r in picked:
        lines.append(f"| {r['step']} | {int(float(r['tokens'])):,} | {float(r['seconds']):.0f} | "
                     f"{float(r['masked_ce']):.3f} | {float(r.get('next_ce') or 'nan'):.3f} |")
    return "\n".join(lines)


def _last_train(rows: list[dict], n: int = 20) -> dict:
    train = [r for r in rows if r["split"] == "train"][-n:]
    keys = ("masked_ce", "next_ce", "tokens_per_s")
    return {k: sum(float(r[k]) for r in train if r.get(k)) / max(1, len(train)) for k in keys}


def _defaults() -> dict:
    """Hyperparameters a run's training.json may predate: the trainer's defaults."""
    from .trainer import LossConfig, StreamConfig, TrainConfig

    cfg, loss, stream = TrainConfig(Path("."), Path("."), Path(".")), LossConfig(), StreamConfig()
    return {"lr": cfg.lr, "warmup_steps": cfg.warmup_steps, "min_lr_ratio": cfg.min_lr_ratio,
            "weight_decay": cfg.weight_decay, "batch_size": stream.batch_size, "aux_weight": loss.aux_weight,
            "aux_fraction": loss.aux_fraction, "bf16_autocast": False}


def _history(facts: dict) -> list[str]:
    """A run continued from an earlier checkpoint (--init): that stage, and the totals."""
    prev = facts.get("previous")
    if not prev:
        return []
    return [f"- Continued (`--init`) from an earlier checkpoint of this recipe trained {prev['step']:,} steps, "
            f"{prev['tokens']:,} tokens, {prev['seconds'] / 60:.0f} minutes; in all {facts['step'] + prev['step']:,} "
            f"steps, {facts['tokens'] + prev['tokens']:,} tokens, {(facts['seconds'] + prev['seconds']) / 60:.0f} "
            "minutes of training. The loss curve below is this stage's."]


def build(checkpoint: Path, run: Path, data: Path, eval_report: dict | None, eval_command: str,
          hardware: str, notes: list[str]) -> str:
    cfg = json.loads((checkpoint / "config.json").read_text())["dllm_lsp_config"]
    facts = json.loads((checkpoint / "training.json").read_text())
    rows = LossLog(run / "loss.csv").rows()
    train_meta = json.loads((data / "train" / "meta.json").read_text())
    held_meta = json.loads((data / "heldout" / "meta.json").read_text())
    manifest = json.loads((data / "manifest.json").read_text())
    reasons = collections.Counter(reason for _, reason in manifest["excluded"])
    n_params = (cfg["num_layers"] * (cfg["hidden_size"] * cfg["head_dim"] * (cfg["num_heads"] + 2 * cfg["num_kv_heads"])
                                     + cfg["num_heads"] * cfg["head_dim"] * cfg["hidden_size"]
                                     + 3 * cfg["hidden_size"] * cfg["intermediate_size"] + 2 * cfg["hidden_size"])
                + cfg["vocab_size"] * cfg["hidden_size"] + cfg["hidden_size"])
    size_mb = (checkpoint / "model.safetensors").stat().st_size / 2**20
    tail = _last_train(rows)
    hp = {**_defaults(), **facts}
    out = [
        "# The embedded default model",
        "",
        f"A {n_params / 1e6:.1f} M-parameter masked-diffusion infilling model for Python, trained from scratch by "
        "`dllm-lsp train` on this repository's recipe. It exists so dllm-lsp works offline on a laptop CPU out of "
        "the box; it is a **very weak** model. Quality comes from compute or from a pretrained base, not from this "
        "recipe at this size: see the evaluation below before expecting useful completions.",
        "",
        "## Corpus",
        f"- Source: the Python standard library ({', '.join(manifest['roots'])}), without its test suites "
        "(`test`, `tests`, `idle_test`), `lib2to3`, `ensurepip`, vendored `site-packages`, files over 400 kB, "
        "and **any file that mentions HumanEval** (`humaneval`, `human_eval`, `human-eval`), so the evaluation "
        "set cannot leak into training. The stdlib's generated codec tables (`gencodec.py` output) are skipped too.",
        f"- Excluded by the manifest: {sum(reasons.values())} files ("
        + ", ".join(f"{n} {r}" for r, n in reasons.most_common()) + ").",
        f"- Train split: {train_meta['num_files']} files, {train_meta['num_tokens']:,} tokens. Held-out split "
        f"(1 in 40 by path hash, never trained on): {held_meta['num_files']} files, {held_meta['num_tokens']:,} tokens.",
        "",
        "## Tokenizer",
        f"Byte-level BPE, {cfg['vocab_size']:,} tokens, trained with Hugging Face `tokenizers` on the train split "
        "(`dllm_engine/training/tokenizer_train.py`). Newline is its own pre-token, so line boundaries fall "
        "between tokens. Special tokens: `<pad>` 0 (end of fill / canvas surplus), `<mask>` 1, `<eos>` 2, "
        "`<suf>` 3, `<pre>` 4.",
        "",
        "## Architecture",
        f"- {cfg['num_layers']} layers, hidden {cfg['hidden_size']}, {cfg['num_heads']} heads ({cfg['num_kv_heads']} "
        f"key/value heads), SwiGLU {cfg['intermediate_size']}, RMSNorm, RoPE (theta {cfg['rope_theta']:g}), tied "
        f"embeddings; {n_params:,} parameters, stored in bf16 ({size_mb:.1f} MiB).",
        "- Native layout: context `<suf> suffix <pre> prefix` encoded causally (exact, reusable KV cache), canvas "
        "bidirectional over context and canvas.",
        "",
        "## Training",
        f"- Objective: holes of 1-128+ tokens (whole lines, 2-8 lines, indented blocks, rest of a line, random spans) "
        "laid out in the engine's decoder states: the first 8-slot canvas, doubled canvases (16-128) whose first "
        "half is already committed, oracle-length canvases, and oversized buckets; surplus slots are `<pad>` "
        "(the first pad ends the fill). Masked-diffusion loss with 1/t weighting on masked canvas slots, plus a "
        f"{hp['aux_weight']:g}-weighted next-token loss on {hp['aux_fraction']:.0%} of context positions.",
        f"- {facts['step']:,} steps, {facts['tokens']:,} training tokens (context + canvas), "
        f"{facts['seconds'] / 60:.0f} minutes of training on {hardware}; context window {facts['context_budget']} "
        f"tokens. Final train averages (last 20 logs): masked CE {tail['masked_ce']:.2f} nats, next-token CE "
        f"{tail['next_ce']:.2f}, {tail['tokens_per_s']:.0f} tokens/s.",
        *_history(facts),
        f"- Best held-out masked cross-entropy: {facts['best_heldout_masked_ce']:.3f} nats (the shipped checkpoint).",
        f"- AdamW (0.9, 0.95, weight decay {hp['weight_decay']:g}), peak lr {hp['lr']:g}, {hp['warmup_steps']} "
        f"warmup steps, cosine to {hp['min_lr_ratio']:.0%} over the step or wall-clock budget, gradient clip 1.0, "
        f"batch {hp['batch_size']}, {'bf16 autocast' if hp['bf16_autocast'] else 'fp32'}.",
        "",
        "## Loss curve",
        "Held-out losses over training (`loss.csv` and `loss.svg` beside this card):",
        "",
        _loss_table(rows, max(1, len([r for r in rows if r['split'] == 'heldout']) // 12)),
        "",
    ]
    if eval_report:
        out += ["## Evaluation", "", f"Command: `{eval_command}`", "",
                f"Context trimmed to {eval_report.get('context_tokens')} tokens around the hole; "
                f"{eval_report.get('seconds')} s for the whole run. pass@1: the filled program and its tests run "
                "in a subprocess; exact: fill equals the reference (whitespace-trimmed ends); syntax ok: the "
                "filled file compiles (held-out: or the original did not either).", "",
                markdown(eval_report["summary"])]
    if notes:
        out += ["## Notes", *[f"- {n}" for n in notes], ""]
    return "\n".join(out) + "\n"


def merge_reports(reports: list[dict]) -> dict:
    """Several evaluation runs (e.g. benchmarks evaluated in parallel processes) as one table."""
    merged = dict(reports[0])
    merged["summary"] = [row for r in reports for row in r["summary"]]
    merged["seconds"] = max(r.get("seconds", 0) for r in reports)
    return merged


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--eval", type=Path, action="append", default=[], help="evaluation report(s) to tabulate")
    ap.add_argument("--eval-command", default="")
    ap.add_argument("--hardware", default="2 shared x86-64 CPU cores, 1 torch thread")
    ap.add_argument("--note", action="append", default=[])
    args = ap.parse_args(argv)
    report = merge_reports([json.loads(p.read_text()) for p in args.eval]) if args.eval else None
    card = build(args.checkpoint, args.run, args.data, report, args.eval_command, args.hardware, args.note)
    (args.checkpoint / "MODEL_CARD.md").write_text(card)
    for curve in ("loss.svg", "loss.png"):
        if (args.run / curve).exists():
            shutil.copy(args.run / curve, args.checkpoint / curve)
    if (args.run / "loss.csv").exists():
        shutil.copy(args.run / "loss.csv", args.checkpoint / "loss.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
