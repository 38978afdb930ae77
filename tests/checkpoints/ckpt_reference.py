"""Independent float64 forwards of each family, written from the families' published
definitions and reading the checkpoint's own tensor names: no code from
dllm_engine. Used to check that the engine's one model + renames + options
reproduce every family.

Same conventions as the engine's (documented in families/attention.py): padding
is never a key, positions count real tokens from 0, block families attend
block-causally with block = position // block_size.
"""

from __future__ import annotations

import math

import torch


def positions_and_allowed(valid: list[list[int]], block_size: int = 0):
    """Python loops on purpose: an independent restatement of the masking rule."""
    b, s = len(valid), len(valid[0])
    pos = torch.zeros(b, s, dtype=torch.long)
    allowed = torch.zeros(b, s, s, dtype=torch.bool)
    for r in range(b):
        n = 0
        for i in range(s):
            pos[r, i] = max(n, 0) if valid[r][i] else max(n - 1, 0)
            n += valid[r][i]
        for i in range(s):
            for j in range(s):
                ok = bool(valid[r][j]) and (not block_size or pos[r, j] // block_size <= pos[r, i] // block_size)
                allowed[r, i, j] = ok or i == j
    return pos, allowed


def rms(x, w, eps):
    return w.double() * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x, pos, theta):
    """Rotate-half RoPE (Llama/Qwen/OLMo): pairs (i, i + d/2)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos[:, None, :, None].double() * inv
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def attend(q, k, v, allowed):
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    return scores.softmax(-1) @ v


def _lin(x, w, b=None):
    y = x @ w.double().T
    return y + b.double() if b is not None else y


def qwen_forward(t: dict, cfg: dict, ids, valid, qk_norm: bool, block_size: int = 0, tie: bool = False):
    d, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // nh
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    pos, allowed = positions_and_allowed(valid, block_size)
    ids = torch.tensor(ids)
    x = t["model.embed_tokens.weight"].double()[ids]
    b, s = ids.shape
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, t[p + "input_layernorm.weight"], eps)
        q = _lin(h, t[p + "self_attn.q_proj.weight"], t.get(p + "self_attn.q_proj.bias")).view(b, s, nh, hd)
        k = _lin(h, t[p + "self_attn.k_proj.weight"], t.get(p + "self_attn.k_proj.bias")).view(b, s, nkv, hd)
        v = _lin(h, t[p + "self_attn.v_proj.weight"], t.get(p + "self_attn.v_proj.bias")).view(b, s, nkv, hd)
        if qk_norm:
            q, k = rms(q, t[p + "self_attn.q_norm.weight"], eps), rms(k, t[p + "self_attn.k_norm.weight"], eps)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        q, k = rope(q, pos, theta), rope(k, pos, theta)
        o = attend(q, k, v, allowed).transpose(1, 2).reshape(b, s, nh * hd)
        x = x + _lin(o, t[p + "self_attn.o_proj.weight"])
        h = rms(x, t[p + "post_attention_layernorm.weight"], eps)
        g = _lin(h, t[p + "mlp.gate_proj.weight"])
        x = x + _lin(torch.nn.functional.silu(g) * _lin(h, t[p + "mlp.up_proj.weight"]), t[p + "mlp.down_proj.weight"])
    x = rms(x, t["model.norm.weight"], eps)
    head = t["model.embed_tokens.weight"] if tie else t["lm_head.weight"]
    return _lin(x, head)


def llada_forward(t: dict, cfg: dict, ids, valid):
    """OLMo 'llama' block as in LLaDA's modeling: att_proj split into q/k/v, ff_proj is the activated branch."""
    d, nh = cfg["d_model"], cfg["n_heads"]
    nkv, hd, eps = cfg["n_kv_heads"], d // nh, cfg["rms_norm_eps"]
    pos, allowed = positions_and_allowed(valid)
    ids = torch.tensor(ids)
    x = t["model.transformer.wte.weight"].double()[ids]
    b, s = ids.shape
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        h = rms(x, t[p + "attn_norm.weight"], eps)
        q = _lin(h, t[p + "q_proj.weight"]).view(b, s, nh, hd).transpose(1, 2)
        k = _lin(h, t[p + "k_proj.weight"]).view(b, s, nkv, hd).transpose(1, 2)
        v = _lin(h, t[p + "v_proj.weight"]).view(b, s, nkv, hd).transpose(1, 2)
        q, k = rope(q, pos, cfg["rope_theta"]), rope(k, pos, cfg["rope_theta"])
        x = x + _lin(attend(q, k, v, allowed).transpose(1, 2).reshape(b, s, d), t[p + "attn_out.weight"])
        h = rms(x, t[p + "ff_norm.weight"], eps)
        act = torch.nn.functional.silu(_lin(h, t[p + "ff_proj.weight"])) * _lin(h, t[p + "up_proj.weight"])
        x = x + _lin(act, t[p + "ff_out.weight"])
    return _lin(rms(x, t["model.transformer.ln_f.weight"], eps), t["model.transformer.ff_out.weight"])


def reference_logits(family: str, tensors: dict, cfg: dict, ids, valid):
    if family == "llada":
        return llada_forward(tensors, cfg, ids, valid)
    qk_norm = family in ("coda", "sdar")
    block = cfg.get("block_size") if family == "sdar" else cfg.get("bd_size", 0)
    return qwen_forward(tensors, cfg, ids, valid, qk_norm, block or 0, tie=family == "open_dcoder")
