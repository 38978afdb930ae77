"""The options of the draft rows' training (draft_rows.py): argparse only, no torch, so
`dllm-lsp train --base` registers them at no cost."""

from __future__ import annotations

from .corpus import OPTIONS as CORPUS_OPTIONS
from .teacher_option import BASE_ADAPTER_OPTION


def add_arguments(p, skip: set[str] = frozenset()) -> None:
    """Add the options to parser `p`, but those in `skip` (option strings the parser already
    has with the same meaning: `dllm-lsp train` shares --lr, --warmup, --seed, ...)."""

    def add(flag, **kw):
        if flag not in skip:
            p.add_argument(flag, **kw)

    for flag, kw in CORPUS_OPTIONS:
        add(flag, **kw)
    add("--model", default="default", help="the base (a name in bases/catalog.py, or 'default')")
    add("--run", required=True, help="run folder (resumed when it holds a state)")
    add(BASE_ADAPTER_OPTION[0], **BASE_ADAPTER_OPTION[1])
    add("--minutes", type=float, default=60.0, help="wall-clock budget of this run")
    add("--max-steps", type=int, default=None, help="stop after this many steps in all (with --minutes, whichever comes first)")
    add("--decay-minutes", type=float, default=180.0, help="the learning rate's cosine length (training time)")
    add("--rows", type=int, default=4)
    add("--rank", type=int, default=64)
    add("--lr", type=float, default=1e-3)
    add("--warmup", type=int, default=50)
    add("--batch", type=int, default=2)
    add("--anchors", type=int, default=32, help="anchors per sequence")
    add("--tail", type=int, default=96, help="anchors fall in the last this many tokens")
    add("--suffix-max", type=int, default=160)
    add("--prefix-max", type=int, default=320)
    add("--middle-max", type=int, default=48)
    add("--held", type=int, default=16, help="held-out sequences (fixed)")
    add("--log-every", type=int, default=10)
    add("--eval-every", type=int, default=100)
    add("--seed", type=int, default=0)
    add("--threads", type=int, default=1)
    add("--evaluate", action="append", metavar="FOLDER", help="only evaluate these adapter folders (repeatable) "
                                                                "on the held-out sequences, side by side; nothing is trained")
    add("--workers", type=int, default=0, help="sampling processes (0: sample in the training process)")
    add("--device", default="cpu", help="cpu, cuda or auto: the same recipe on one GPU takes a larger --batch "
                                        "(benchmarks/gpu_draft_rows.sh)")
