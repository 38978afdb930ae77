"""The option naming the frozen teacher's own adapter, shared by the distillation trainers
(draft_head.py, draft_rows.py): argparse only, no torch, so `dllm-lsp train --base` can
register it at no cost."""

BASE_ADAPTER_OPTION = ("--base-adapter", dict(
    default="shipped",
    help="the frozen base's own adapter (low_rank.py) while it teaches: 'shipped' (the package's for the base, "
         "as the engine runs it), 'none' (the bare base) or a folder"))
