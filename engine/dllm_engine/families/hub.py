"""Resolve a Hugging Face repo id through huggingface_hub's local cache (never downloads)."""

from __future__ import annotations

from pathlib import Path

from ..model_config import CheckpointError


def resolve_hub_id(repo_id: str) -> Path:
    if "/" not in repo_id:
        raise CheckpointError(f"{repo_id!r} is neither a folder nor a Hugging Face repo id (owner/name)")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise CheckpointError(f"{repo_id!r}: not a local folder, and huggingface_hub is not installed") from None
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:
        raise CheckpointError(
            f"{repo_id!r} is not in the local Hugging Face cache and dllm-lsp never downloads at run time. "
            f"Download it first: `huggingface-cli download {repo_id}` (or `hf download {repo_id}`), "
            f"or pass --model /path/to/folder"
        ) from None
