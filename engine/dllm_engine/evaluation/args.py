"""`dllm-lsp eval` options (argparse only, so registering the command imports nothing heavy)."""

from __future__ import annotations

from .tasks import DEFAULT_DATA_DIR

ARM_KEYS = {"empty": 0, "var-thr": 1, "var-1": 2, "ora-thr": 3, "ora-1": 4, "line-thr": 5, "line-1": 6,
            "line-prefix": 7}


def add_arguments(p) -> None:
    p.add_argument("--model", default=None, help="checkpoint folder or hub id (default: the embedded model)")
    p.add_argument("--endpoint", help="evaluate a running engine instead: daemon URL, unix:/path/to/engine.sock, "
                        "or an OpenAI-compatible base URL with --kind openai")
    p.add_argument("--kind", choices=("daemon", "openai"), default="daemon")
    p.add_argument("--openai-model", help="model name for an OpenAI-compatible endpoint")
    p.add_argument("--token", help="daemon auth token")
    p.add_argument("--benchmarks", default="single-line,heldout",
                   help="comma list: single-line, multi-line, random-span, random-span-light, heldout "
                        "(or one of its kinds alone: heldout-line, heldout-lines, heldout-span)")
    p.add_argument("--limit", type=int, default=None, help="at most this many tasks per HumanEval benchmark")
    p.add_argument("--stride", type=int, default=None, help="take every Nth task (spreads a sample over the set)")
    p.add_argument("--heldout-count", type=int, default=60)
    p.add_argument("--manifest", help="corpus manifest whose held-out files to use (default: rebuilt from the stdlib)")
    p.add_argument("--heldout-dir", help="cut the held-out holes from the Python files under this folder instead "
                        "(e.g. dllm_lsp/: code written after a pretrained base was trained)")
    p.add_argument("--heldout-data", help="held-out token-file folder (e.g. runs/data/heldout) instead of the manifest's files")
    p.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    p.add_argument("--arms", default="all", help=f"'all' or a comma list of {sorted(ARM_KEYS)}")
    p.add_argument("--threshold", type=float, default=0.9, help="confidence threshold of the threshold arms")
    p.add_argument("--candidates", default="1",
                   help="best of N for every decoding arm, comma-separated to run each arm at several N side "
                        "by side (e.g. 1,4; DiffusionParams.candidates)")
    p.add_argument("--canvas-cache", choices=("exact", "delayed"), default="exact",
                   help="the engine's canvas cache for every decoding arm (DiffusionParams.canvas_cache)")
    p.add_argument("--context-tokens", type=int, default=None, help="trim prefix+suffix to this many tokens")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per test program")
    p.add_argument("--workers", type=int, default=0, help="parallel test programs (default: cores)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for the in-process engine")
    p.add_argument("--weights", choices=("auto", "native", "int8", "int4"), default="auto",
                   help="the in-process engine's weights: the model's own CPU choice (auto), as loaded, int8 projections (dynamic), or "
                        "weight-only int4 projections with an int8 head, on the CPU")
    p.add_argument("--draft-tokens", type=int, default=None,
                   help="the in-process engine's draft length (drafting.py; 0 turns drafting off; default: the engine's)")
    p.add_argument("--draft-rows", type=int, default=None,
                   help="the in-process engine's draft rows per pass (draft_adapter.py; 0: off; default: the engine's)")
    p.add_argument("--draft-adapter", default=None,
                   help="the in-process engine's draft adapter: shipped, none, or a folder (default: shipped)")
    p.add_argument("--draft-head", default=None,
                   help="the in-process engine's draft head (draft_head.py): shipped, none, or a folder (default: shipped)")
    p.add_argument("--base-adapter", default=None,
                   help="the in-process engine's base adapter (low_rank.py): shipped, none, or a folder (default: shipped)")
    p.add_argument("--draft-tree-tokens", type=int, default=None,
                   help="the in-process engine's draft tree (draft_tree.py): the most draft tokens a pass checks "
                        "per canvas; 0: one chain (default: the engine's, by device)")
    p.add_argument("--draft-branches", type=int, default=None,
                   help="the draft head's chains in a draft tree (default: the engine's)")
    p.add_argument("--head-end-prob", type=float, default=None,
                   help="the in-process engine's EngineConfig.head_end_prob (head_end.py): a single line ends "
                        "on the draft head's word at this probability; 0: off (default: the engine's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-json")
    p.add_argument("--out-md")
