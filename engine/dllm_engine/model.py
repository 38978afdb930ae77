"""One compact transformer for every diffusion checkpoint the engine runs.

RMSNorm, RoPE (theta from the config), SwiGLU, grouped-query attention,
optional q/k/v bias, optional per-head q/k RMSNorm, tied or untied head.
Module names follow the Qwen2 layout (`model.layers.{i}.self_attn.q_proj`, ...)
so Qwen2/Qwen3-based checkpoints load by name; other families are renamed by
their loader.

The forward is layout-agnostic: callers pass positions, an attention mask and
optionally past keys/values; `dllm_engine.layout` builds those for the native,
bidirectional and block layouts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import ops, row_buckets
from .model_config import ModelConfig

# Past keys/values: one (k, v) per layer, each [B, Hkv, T, D].
KV = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class SlotWrite:
    """Past for a pass that recomputes only some canvas slots (the delayed canvas cache):
    the new rows' K/V go to columns `offset + slot[b, i]` of preallocated buffers that
    already hold the context and the kept canvas K/V; attention reads columns [0, end)."""

    k_buf: torch.Tensor  # [B, Hkv, T+room, D]
    v_buf: torch.Tensor
    offset: int
    slot: torch.Tensor  # [B, S] long: the canvas slot each new row belongs to
    end: int


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.kernels: ops.Force = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.rms_norm(x, self.weight, self.eps, self.kernels)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.h, self.kv, self.d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.h * self.d, bias=cfg.qkv_bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv * self.d, bias=cfg.qkv_bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv * self.d, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(self.h * self.d, cfg.hidden_size, bias=False)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(self.d, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.d, cfg.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None
        self.kernels: ops.Force = None
        self.qkv: tuple[torch.Tensor, torch.Tensor | None] | None = None  # fuse(): one GEMM for q, k, v

    def fuse(self) -> None:
        """Inference only: q, k and v from one matrix multiply instead of three (a
        denoising pass at batch 1 on a GPU is bound by launches, not FLOPs). The three
        weights become frozen views into the fused one: no memory is added and
        state_dict is unchanged, but the model can no longer be trained."""
        self.qkv = _fuse_linears(self.q_proj, self.k_proj, self.v_proj)

    def forward(self, x, cos, sin, mask, past, canvas=None, kv_only=False):
        """`kv_only`: return (None, new K/V) without attending (the last layer of a context encode)."""
        b, s, _ = x.shape
        if self.qkv is not None and self.q_norm is None and not ops.use_triton(x, self.kernels):
            # q and k side by side in the fused output: rotated in one go (ops.rope_fused_qk).
            qkv = _fused_linear(x, self.qkv)
            qk, v = qkv.split(((self.h + self.kv) * self.d, self.kv * self.d), dim=-1)
            q, k = ops.rope_fused_qk(qk.view(b, s, self.h + self.kv, self.d), self.h, cos, sin)
            v = v.view(b, s, self.kv, self.d).transpose(1, 2)
        else:
            if self.qkv is not None:
                qkv = _fused_linear(x, self.qkv)
                q, k, v = qkv.split((self.h * self.d, self.kv * self.d, self.kv * self.d), dim=-1)
                q, k, v = q.reshape(b, s, self.h, self.d), k.reshape(b, s, self.kv, self.d), v.reshape(b, s, self.kv, self.d)
            else:
                q = self.q_proj(x).view(b, s, self.h, self.d)
                k = self.k_proj(x).view(b, s, self.kv, self.d)
                v = self.v_proj(x).view(b, s, self.kv, self.d)
            if self.q_norm is not None:
                q, k = self.q_norm(q), self.k_norm(k)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, D]
            q, k = ops.rope_qk(q, k, cos, sin, self.kernels)
        new_kv = (k, v)
        if kv_only:
            return None, new_kv
        if isinstance(past, SlotWrite):
            cols = (past.offset + past.slot)[:, None, :, None].expand(b, self.kv, s, self.d)
            past.k_buf.scatter_(2, cols, k)
            past.v_buf.scatter_(2, cols, v)
            out = ops.attention(q, past.k_buf[:, :, :past.end], past.v_buf[:, :, :past.end], mask)
            return self.o_proj(out.transpose(1, 2).reshape(b, s, self.h * self.d)), new_kv
        if canvas is not None and past is not None and len(past) == 3 and ops.use_fused_canvas(q, self.kernels):
            # Fused canvas attention over the cached context (CUDA): no buffer write, no mask.
            k_buf, v_buf, offset = past
            out = ops.canvas_attention(q, k_buf[:, :, :offset], v_buf[:, :, :offset], k, v, canvas, self.kernels)
            return self.o_proj(out.transpose(1, 2).reshape(b, s, self.h * self.d)), new_kv
        if past is not None and len(past) == 3:
            # A preallocated [B, Hkv, T+room, D] buffer with the context in front:
            # write the new rows in place instead of concatenating the whole context.
            k_buf, v_buf, offset = past
            k_buf[:, :, offset:offset + s] = k
            v_buf[:, :, offset:offset + s] = v
            out = ops.attention(q, k_buf, v_buf, mask, keys=offset + s)  # [B, H, S, D]
            return self.o_proj(out.transpose(1, 2).reshape(b, s, self.h * self.d)), new_kv
        if past is not None:
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        out = ops.attention(q, k, v, mask)  # [B, H, S, D]
        return self.o_proj(out.transpose(1, 2).reshape(b, s, self.h * self.d)), new_kv


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.kernels: ops.Force = None
        self.gate_up: tuple[torch.Tensor, None] | None = None  # fuse(): one GEMM for gate and up
        self.gelu = cfg.hidden_act == "gelu_tanh"

    def fuse(self) -> None:
        self.gate_up = _fuse_linears(self.gate_proj, self.up_proj)

    def forward(self, x):
        if self.gelu:  # GeGLU (Gemma): torch on every device (the Triton kernel is SwiGLU's)
            if self.gate_up is not None:
                gate, up = _fused_linear(x, self.gate_up).chunk(2, dim=-1)
            else:
                gate, up = self.gate_proj(x), self.up_proj(x)
            return self.down_proj(F.gelu(gate, approximate="tanh") * up)
        if self.gate_up is not None:
            return self.down_proj(ops.swiglu(_fused_linear(x, self.gate_up), None, self.kernels))
        return self.down_proj(ops.swiglu(self.gate_proj(x), self.up_proj(x), self.kernels))


def _fused_linear(x: torch.Tensor, fused) -> torch.Tensor:
    """A fused projection: (weight, bias), or the int8 module that replaced them (quantize.py)."""
    return fused(x) if callable(fused) else row_buckets.linear(x, *fused)


def _fuse_linears(*linears: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight, bias) of the linears stacked by output row; each linear's parameters
    become views into them (same storage, so later loads or edits stay in sync)."""
    weight = _stacked([lin.weight.detach() for lin in linears])
    bias = None
    if linears[0].bias is not None:
        bias = _stacked([lin.bias.detach() for lin in linears])
    row = 0
    for lin in linears:
        n = lin.weight.shape[0]
        lin.weight = nn.Parameter(weight[row:row + n], requires_grad=False)
        if bias is not None:
            lin.bias = nn.Parameter(bias[row:row + n], requires_grad=False)
        row += n
    return weight, bias


def _stacked(parts: list[torch.Tensor]) -> torch.Tensor:
    """torch.cat(parts), without the copy when the parts already sit back to back in one buffer
    (checkpoint loading lays q/k/v and gate/up out that way: a cat would double them in memory)."""
    first, offset = parts[0], parts[0].storage_offset()
    for t in parts:
        if (not t.is_contiguous() or t.dtype != first.dtype or t.storage_offset() != offset
                or t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()):
            return torch.cat(parts)
        offset += t.numel()
    size = (sum(t.shape[0] for t in parts), *first.shape[1:])
    return first.new_empty(0).set_(first.untyped_storage(), first.storage_offset(), size)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)  # before the MLP
        self.mlp = MLP(cfg)
        if cfg.sandwich_norm:  # Gemma: the attention's and the MLP's outputs are normed too
            self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            self.post_mlp_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        else:
            self.post_attn_norm = self.post_mlp_norm = None

    def forward(self, x, cos, sin, mask, past, canvas=None, kv_only=False, adapter=None, rows=None):
        """`adapter` (draft_adapter.LayerAdapter) acts on `rows` alone: the draft rows."""
        h = self.input_layernorm(x)
        if adapter is not None:
            h = adapter.attention_input(h, rows)
        attn, new_kv = self.self_attn(h, cos, sin, mask, past, canvas, kv_only)
        if kv_only:
            return x, new_kv
        if self.post_attn_norm is not None:
            attn = self.post_attn_norm(attn)
        x = x + attn
        h = self.post_attention_layernorm(x)
        out = self.mlp(h)
        if adapter is not None:
            out = adapter.mlp_output(out, h, rows)
        if self.post_mlp_norm is not None:
            out = self.post_mlp_norm(out)
        return x + out, new_kv


class Backbone(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


def rope_inv_freq(cfg: ModelConfig, theta: float | None = None) -> torch.Tensor:
    """RoPE's inverse frequencies (base `theta`, default the config's), computed in float64 on
    the CPU (never on meta: a meta arange runs through torch._refs, whose first call imports
    torch._dynamo, ~1.3 s)."""
    steps = torch.arange(0, cfg.head_dim, 2, dtype=torch.float64, device="cpu")
    return (1.0 / ((theta or cfg.rope_theta) ** (steps / cfg.head_dim))).float()


def local_layers(cfg: ModelConfig) -> list[bool]:
    """Per layer: whether it uses the local RoPE base (all but every `global_every`-th)."""
    if not cfg.rope_local_theta:
        return [False] * cfg.num_layers
    every = cfg.global_every or cfg.num_layers + 1
    return [(i + 1) % every != 0 for i in range(cfg.num_layers)]


class DiffusionTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.kernels: ops.Force = None
        self.draft_adapter = None  # draft_adapter.DraftAdapter: the draft rows' adapter, when attached
        # A draft head (draft_head.py) reads the final normed hidden state of the rows whose
        # logits a compact pass returns: with `keep_hidden`, the forward leaves them in
        # `last_hidden` ([M, D], the logits' rows), instead of every caller asking for them.
        self.keep_hidden = False
        self.last_hidden: torch.Tensor | None = None
        self.context_hidden: torch.Tensor | None = None  # forward(hidden_at=...)
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)
        self.local = local_layers(cfg)
        if any(self.local):
            self.register_buffer("inv_freq_local", rope_inv_freq(cfg, cfg.rope_local_theta), persistent=False)

    def fuse_projections(self) -> None:
        """For inference only: q/k/v and gate/up each as one matrix multiply per layer."""
        for layer in self.model.layers:
            layer.self_attn.fuse()
            layer.mlp.fuse()

    def use_kernels(self, force: ops.Force) -> None:
        """None: Triton on CUDA, torch elsewhere; "triton" / "torch": forced (tests, benchmarks)."""
        for module in self.modules():
            if hasattr(module, "kernels"):
                module.kernels = force

    def rope(self, positions: torch.Tensor, inv_freq: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin [B, 1, S, D] for integer positions [B, S] (computed in float32)."""
        freqs = positions.float()[..., None] * (self.inv_freq if inv_freq is None else inv_freq)  # [B, S, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        return emb.cos(), emb.sin()

    def forward(
        self,
        ids: torch.Tensor,  # [B, S]
        positions: torch.Tensor,  # [B, S]
        mask: torch.Tensor | str | None = None,  # bool [B|1, 1, S, P+S], True = may attend; or ops.CAUSAL
        past: KV | None = None,
        return_kv: bool = False,
        logits_slice: slice | None = None,
        logits_rows: torch.Tensor | None = None,
        canvas: ops.CanvasSpec | None = None,
        compact: bool = False,
        kv_only: bool = False,
        draft_rows: torch.Tensor | None = None,
        hidden_at: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor | None, KV | None]:
        """Logits [B, S', V] for the rows in `logits_slice` (all by default), plus the new tokens' K/V.

        `past` is a list of (k, v) per layer, of (k_buf, v_buf, offset) for a
        preallocated buffer the new rows are written into, or of SlotWrite. `logits_rows`
        (bool [B, S]) computes the LM head only where needed; other rows are zero, or,
        with `compact`, only those rows come back, [M, V] in row-major order.

        `kv_only` (encoding a context): no logits (None), only the new K/V; the last layer
        stops once it has its K/V, since nothing reads its attention output or MLP
        (a sixth of the encode's FLOPs for a six-layer model, exactly the same K/V).

        `draft_rows` (bool [B, S]): rows the attached draft adapter acts on
        (draft_adapter.py); every other row is computed exactly as without it.

        `hidden_at` (long [B], with `kv_only`): the last layer runs whole after all, and the
        final normed hidden state of row hidden_at[b] of each sequence is left in
        `context_hidden` ([B, D]; a draft head's start for the canvas's first pass).
        """
        x = self.model.embed_tokens(ids)
        if self.config.embed_scale != 1.0:  # in the embeddings' dtype, as Gemma does
            x = x * torch.tensor(self.config.embed_scale, dtype=x.dtype)
        adapter = rows = None
        if draft_rows is not None and self.draft_adapter is not None and bool(draft_rows.any()):
            adapter, rows = self.draft_adapter, draft_rows.nonzero(as_tuple=True)
            x = adapter.embed(x, rows)
        # cos/sin rounded to the model's dtype (as the bases compute them), held as float32:
        # every layer multiplies them in float32, so each would otherwise convert them again.
        cos, sin = self.rope(positions)
        cos, sin = cos.to(x.dtype).float(), sin.to(x.dtype).float()
        rope_local = None
        if any(self.local):
            cl, sl = self.rope(positions, self.inv_freq_local)
            rope_local = (cl.to(x.dtype).float(), sl.to(x.dtype).float())
        if isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and not ops.use_triton(x, self.kernels):
            mask = ops.additive_mask(mask, x.dtype)
        new_kv: KV = []
        last = len(self.model.layers) - 1
        with ops.masks_shared_by_layers():  # every layer attends under the same mask
            for i, layer in enumerate(self.model.layers):
                c, s_ = rope_local if self.local[i] else (cos, sin)
                x, kv = layer(x, c, s_, mask, past[i] if past is not None else None, canvas,
                              kv_only and i == last and hidden_at is None,
                              adapter.layers[i] if adapter is not None else None, rows)
                if return_kv or kv_only:
                    new_kv.append(kv)
        if kv_only:
            if hidden_at is not None:
                self.context_hidden = self.model.norm(x[torch.arange(x.shape[0], device=x.device), hidden_at])
            return None, new_kv
        if logits_slice is not None:
            x = x[:, logits_slice]
        if logits_rows is not None and compact:
            h = self.model.norm(x[logits_rows])
            self.last_hidden = h if self.keep_hidden else None
            return self.lm_head(h), (new_kv if return_kv else None)
        if logits_rows is not None:
            out = x.new_zeros(*x.shape[:2], self.config.vocab_size)
            out[logits_rows] = self.lm_head(self.model.norm(x[logits_rows]))
            return out, (new_kv if return_kv else None)
        logits = self.lm_head(self.model.norm(x)) if x.shape[1] else x.new_zeros(x.shape[0], 0, self.config.vocab_size)
        return logits, (new_kv if return_kv else None)
