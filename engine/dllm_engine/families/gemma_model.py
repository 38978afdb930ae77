"""DiffusionGemma through transformers' own `DiffusionGemmaForBlockDiffusion`.

The model is an encoder-decoder that shares its weights: a causal (Gemma 4, MoE,
sliding/global attention) encoder writes the prompt's K/V into a cache, and a
bidirectional canvas decoder reads that cache read-only, with self-conditioning
from the previous pass's logits. It does not map onto `DiffusionTransformer`
through options, so it runs through the native class (imported here, never
`trust_remote_code`); this module loads it and gives it the two calls the
runner needs: `encode` (prompt -> cache) and `decode` (canvas over a cache ->
logits, softcapped float32 exactly as the class's forward returns them).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import nn

from ..model_config import CheckpointError, ModelConfig

log = logging.getLogger("dllm_engine")


def load_diffusion_gemma(path: Path, cfg: ModelConfig, device: torch.device, dtype: torch.dtype) -> "GemmaModel":
    """Safetensors only (single file or sharded with an index), local files only; a missing,
    unexpected or mis-shaped tensor is a CheckpointError naming the file and the tensor."""
    from transformers.utils import logging as hf_logging

    from ..checkpoint import INDEX_FILE, SINGLE_FILE, weight_files
    from ..room import check_memory
    from ..shards import check_float, read_header

    # The project's own checks, before transformers reads anything: index readable, every
    # shard present and complete, float dtypes only, room for the weights at `dtype`.
    where = path / INDEX_FILE if (path / INDEX_FILE).exists() else path / SINGLE_FILE
    refs = [ref for file in dict.fromkeys(weight_files(path).values()) for ref in read_header(file).values()]
    for ref in refs:
        check_float(ref)
    check_memory(sum(ref.numel for ref in refs) * dtype.itemsize, device, dtype, where)
    try:
        from transformers.models.diffusion_gemma import DiffusionGemmaForBlockDiffusion
    except ImportError:
        import transformers

        raise CheckpointError(f"{path / 'config.json'}: DiffusionGemma needs a transformers release with "
                              f"models/diffusion_gemma (tested with 5.24; installed {transformers.__version__}); "
                              "pip install -U transformers") from None

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # its load report goes to stderr; we raise our own error instead
    hf_logging.disable_progress_bar()
    try:
        hf, info = DiffusionGemmaForBlockDiffusion.from_pretrained(
            str(path), local_files_only=True, use_safetensors=True, dtype=dtype,
            output_loading_info=True, attn_implementation="sdpa", **_placement(device))
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{where}: cannot load DiffusionGemma weights: {exc}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    # The encoder's weights are tied to the decoder's, so a tensor missing from the file shows
    # up under both names: report the decoder's (the one the checkpoint stores).
    missing = sorted(info["missing_keys"], key=lambda n: (".encoder." in n, n))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(f"{where}: missing tensor {missing[0]!r}{more}")
    if info["mismatched_keys"]:
        raise CheckpointError(f"{where}: tensor with the wrong shape: {sorted(info['mismatched_keys'])[0]}")
    if info["unexpected_keys"]:
        raise CheckpointError(f"{where}: unexpected tensor {sorted(info['unexpected_keys'])[0]!r}")
    hf = hf.to(device).eval()  # a no-op when device_map already put every tensor there
    cfg.extra["num_params"] = sum(p.numel() for p in hf.parameters())
    return GemmaModel(hf, cfg)


def _placement(device: torch.device) -> dict:
    """transformers >= 5 builds the model on the meta device and fills it from the memory-mapped
    shards by itself; with `device_map` (which needs `accelerate`) it puts each tensor on the
    device as it is read, instead of loading everything on the CPU and moving it afterwards.
    Not for `meta` (a test's stand-in for a GPU): transformers 5.25 refuses it in a device_map,
    and a meta model holds no data to move anyway."""
    if device.type == "meta":
        return {}
    try:
        import accelerate  # noqa: F401
    except ImportError:
        if device.type != "cpu":
            log.warning("accelerate is not installed: DiffusionGemma loads on the CPU, then moves to %s", device)
        return {}
    return {"device_map": {"": str(device)}}


class GemmaModel(nn.Module):
    """The native class behind the engine's model interface (`config`, `use_kernels`, `forward_logits`)."""

    def __init__(self, hf: nn.Module, config: ModelConfig) -> None:
        super().__init__()
        self.hf = hf
        self.config = config
        self.text_config = hf.config.get_text_config(decoder=True)

    def use_kernels(self, mode: str | None) -> None:
        # transformers' attention (sdpa) and MoE code run this model; our Triton kernels do not apply.
        if mode == "triton":
            raise ValueError("kernels='triton' is not available for DiffusionGemma (it runs through transformers' class)")

    # ---- the two halves
    @torch.inference_mode()
    def encode(self, ids: list[int], cache=None, start: int = 0):
        """Run the causal encoder over `ids` (positions start..), appending to `cache` (a new
        DynamicCache with the model's sliding/full layer layout if None). Returns the cache."""
        from transformers.cache_utils import DynamicCache

        if cache is None:
            cache = DynamicCache(config=self.text_config)
        dev = self.device
        x = torch.tensor([ids], dtype=torch.long, device=dev)
        pos = torch.arange(start, start + len(ids), device=dev)[None]
        self.hf.model.encoder(input_ids=x, cache=cache, position_ids=pos)
        return cache

    @torch.inference_mode()
    def decode(self, canvas: torch.Tensor, cache, positions: torch.Tensor, kv_mask: dict | None = None,
               sc_logits: torch.Tensor | None = None, sc_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Canvas [B, W] over the encoder `cache` -> float32 logits [B, W, V] (softcapped, as the
        class's forward returns them). `kv_mask`: {layer type: bool [B, 1, W, K + W]} or None
        (everything visible); `sc_logits` [B, W, V]: the previous pass's (temperature-scaled)
        logits for self-conditioning, `sc_mask` [B] which rows have them."""
        out = self.hf(decoder_input_ids=canvas, cache=cache, decoder_position_ids=positions,
                      decoder_attention_mask=kv_mask, self_conditioning_logits=sc_logits,
                      self_conditioning_mask=sc_mask)
        return out.logits

    @property
    def device(self) -> torch.device:
        return next(self.hf.parameters()).device

    @property
    def embed_dtype(self) -> torch.dtype:
        return self.hf.model.decoder.embed_tokens.weight.dtype

    # ---- `dllm-lsp model logits`
    @torch.inference_mode()
    def forward_logits(self, ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Raw logits [N, S, V] for `model logits`: each row is a prompt followed by a canvas, the
        canvas being the last min(canvas_length, S - 1) columns (this family only predicts canvas
        slots; the prompt's rows stay 0). Padding (left) may only sit in the prompt; a padded row
        gives the logits of the same tokens unpadded (positions count real tokens from 0)."""
        n, s = ids.shape
        if s < 2:
            raise ValueError("DiffusionGemma rows need at least 2 tokens: a prompt and a canvas")
        c = min(self.config.block_size, s - 1)
        if not bool(valid[:, s - c:].all()):
            raise ValueError(f"padding in the canvas part (last {c} columns); only the prompt may be padded")
        out = torch.zeros(n, s, self.config.vocab_size, dtype=torch.float32, device=ids.device)
        for row in range(n):  # a debug command: one unpadded sequence at a time, as the class runs it
            prompt = ids[row, : s - c][valid[row, : s - c]].tolist()
            if not prompt:
                raise ValueError(f"row {row}: the prompt part (first {s - c} columns) is all padding")
            cache = self.encode(prompt)
            pos = torch.arange(len(prompt), len(prompt) + c, device=ids.device)[None]
            out[row, s - c:] = self.decode(ids[row:row + 1, s - c:], cache, pos)[0]
        return out
