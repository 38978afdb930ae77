"""Resolve a Hugging Face repo id through huggingface_hub's local cache (never downloads).

The lookup runs with HF_HUB_OFFLINE=1 and `local_files_only=True`, so an
offline machine (or one with a dead proxy) gets an immediate, clear error
instead of a hang on a network timeout.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from ..model_config import CheckpointError


@contextmanager
def _offline():
    saved = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import huggingface_hub.constants as hf_constants  # read at import; set it for this call too
    except ImportError:
        hf_constants = None
    saved_const = getattr(hf_constants, "HF_HUB_OFFLINE", None)
    if hf_constants is not None:
        hf_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        if hf_constants is not None:
            hf_constants.HF_HUB_OFFLINE = saved_const
        if saved is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved


def download_hint(repo_id: str) -> str:
    return (f"Download it first: `hf download {repo_id}` (or `huggingface-cli download {repo_id}`), "
            f"or pass --model /path/to/folder")


def resolve_hub_id(repo_id: str) -> Path:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(parts):
        raise CheckpointError(f"{repo_id!r} is neither a folder nor a Hugging Face repo id (owner/name)")
    with _offline():
        try:
            from huggingface_hub import snapshot_download
        except ImportError:
            raise CheckpointError(f"{repo_id!r}: not a local folder, and huggingface_hub is not installed") from None
        try:
            path = Path(snapshot_download(repo_id, local_files_only=True))
        except Exception:
            raise CheckpointError(
                f"{repo_id!r} is not in the local Hugging Face cache and dllm-lsp never downloads at run time. "
                + download_hint(repo_id)
            ) from None
    if not (path / "config.json").exists():
        raise CheckpointError(f"{repo_id!r}: the cached snapshot {path} has no config.json (partial download?). " + download_hint(repo_id))
    return path
