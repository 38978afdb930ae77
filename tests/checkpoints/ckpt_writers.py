"""Tiny checkpoints written in each family's exact on-disk format: config.json keys,
tensor names, optional 2-shard index, tokenizer.json / tokenizer_config.json /
special_tokens_map.json. Special ids deliberately differ from the real
checkpoints' ids, so code that hard-codes ids fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

VOCAB = 96
MASK, EOS, EXTRA = 90, 91, 92  # EXTRA: <|dlm_pad|>, <|expand|>, <|eot_id|> depending on family


def _w(gen, *shape, std=0.25):
    return torch.randn(*shape, generator=gen) * std


def _norm(gen, n):
    return 1.0 + 0.1 * torch.randn(n, generator=gen)


def qwen_tensors(gen, d, layers, heads, kv, hd, ff, vocab, bias, qk_norm, head: bool) -> dict:
    t = {"model.embed_tokens.weight": _w(gen, vocab, d, std=1.0), "model.norm.weight": _norm(gen, d)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = _norm(gen, d)
        t[p + "post_attention_layernorm.weight"] = _norm(gen, d)
        for name, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            t[p + f"self_attn.{name}_proj.weight"] = _w(gen, rows, d)
            if bias:
                t[p + f"self_attn.{name}_proj.bias"] = _w(gen, rows, std=0.1)
        t[p + "self_attn.o_proj.weight"] = _w(gen, d, heads * hd)
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = _norm(gen, hd)
            t[p + "self_attn.k_norm.weight"] = _norm(gen, hd)
        t[p + "mlp.gate_proj.weight"] = _w(gen, ff, d)
        t[p + "mlp.up_proj.weight"] = _w(gen, ff, d)
        t[p + "mlp.down_proj.weight"] = _w(gen, d, ff)
        t[p + "self_attn.rotary_emb.inv_freq"] = torch.ones(hd // 2)  # old checkpoints store it; must be ignored
    if head:
        t["lm_head.weight"] = _w(gen, vocab, d)
    return t


def llada_tensors(gen, d, layers, heads, ff, vocab) -> dict:
    t = {"model.transformer.wte.weight": _w(gen, vocab, d, std=1.0), "model.transformer.ln_f.weight": _norm(gen, d),
         "model.transformer.ff_out.weight": _w(gen, vocab, d)}
    for i in range(layers):
        p = f"model.transformer.blocks.{i}."
        t[p + "attn_norm.weight"] = _norm(gen, d)
        t[p + "ff_norm.weight"] = _norm(gen, d)
        for name in ("q_proj", "k_proj", "v_proj"):
            t[p + name + ".weight"] = _w(gen, d, d)
        t[p + "attn_out.weight"] = _w(gen, d, d)
        t[p + "ff_proj.weight"] = _w(gen, ff, d)
        t[p + "up_proj.weight"] = _w(gen, ff, d)
        t[p + "ff_out.weight"] = _w(gen, d, ff)
    return t


def _qwen_cfg(arch, mtype, **over) -> dict:
    cfg = {"architectures": [arch], "model_type": mtype, "hidden_size": 32, "intermediate_size": 48,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": VOCAB,
           "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 512, "hidden_act": "silu",
           "tie_word_embeddings": False, "rope_scaling": None, "use_sliding_window": False, "sliding_window": None,
           "torch_dtype": "bfloat16", "bos_token_id": EOS, "eos_token_id": EOS, "pad_token_id": EOS}
    cfg.update(over)
    return cfg


# family -> (config.json, tensor maker kwargs, tokenizer specials {text: id}, shards)
SPECS: dict[str, dict] = {
    "llada": dict(
        config={"architectures": ["LLaDAModelLM"], "model_type": "llada", "auto_map": {"AutoModel": "modeling_llada.LLaDAModelLM"},
                "d_model": 32, "n_heads": 4, "n_kv_heads": 4, "n_layers": 2, "mlp_hidden_size": 48, "mlp_ratio": 4,
                "embedding_size": VOCAB, "vocab_size": VOCAB, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
                "max_sequence_length": 512, "mask_token_id": MASK, "eos_token_id": EOS, "pad_token_id": EOS,
                "weight_tying": False, "block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu",
                "include_bias": False, "include_qkv_bias": False, "alibi": False, "rope": True,
                "attention_layer_norm": False, "scale_logits": False, "input_emb_norm": False, "flash_attention": False},
        tensors=dict(kind="llada"), specials={"<|mdm_mask|>": MASK, "<|endoftext|>": EOS, "<|eot_id|>": EXTRA}, shards=2),
    "dream": dict(config=_qwen_cfg("DreamModel", "Dream", mask_token_id=MASK),
                  tensors=dict(kind="qwen", bias=True, qk_norm=False, head=True),
                  specials={"<|mask|>": MASK, "<|endoftext|>": EOS}, shards=1),
    "diffucoder": dict(config=_qwen_cfg("DreamModel", "Dream", mask_token_id=MASK),
                       tensors=dict(kind="qwen", bias=True, qk_norm=False, head=True),
                       specials={"<|mask|>": MASK, "<|endoftext|>": EOS, "<|dlm_pad|>": EXTRA}, shards=2),
    "dreamon": dict(config=_qwen_cfg("DreamModel", "Dream", mask_token_id=MASK),
                    tensors=dict(kind="qwen", bias=True, qk_norm=False, head=True),
                    specials={"<|mask|>": MASK, "<|endoftext|>": EOS, "<|expand|>": EXTRA}, shards=1),
    "open_dcoder": dict(config=_qwen_cfg("Qwen2ForCausalLM", "qwen2", mask_token_id=MASK, tie_word_embeddings=True),
                        tensors=dict(kind="qwen", bias=True, qk_norm=False, head=False),
                        specials={"<|mask|>": MASK, "<|endoftext|>": EOS}, shards=1),
    # CoDA's config says tie_word_embeddings (Qwen3-1.7B's default) but the checkpoint carries its own head.
    # CoDA's config.json names no EOS (it comes from the tokenizer) and carries training-only keys.
    "coda": dict(config={k: v for k, v in _qwen_cfg("CoDALanguageModel", "CoDA", mask_token_id=MASK, head_dim=16,
                                                    tie_word_embeddings=True, attention_bias=False,
                                                    attention_kernel="flash_attention", mask_block_sizes=[4, 8]).items()
                         if k not in ("eos_token_id", "bos_token_id")},
                 tensors=dict(kind="qwen", bias=False, qk_norm=True, head=True),
                 specials={"<|mask|>": MASK, "<|endoftext|>": EOS}, shards=1),
    "sdar": dict(config=_qwen_cfg("SDARForCausalLM", "sdar", mask_token_id=MASK, head_dim=8, block_size=4, attention_bias=False),
                 tensors=dict(kind="qwen", bias=False, qk_norm=True, head=True),
                 specials={"<|MASK|>": MASK, "<|endoftext|>": EOS}, shards=1),
    # Fast-dLLM v2 names no mask id in config.json: it comes from the tokenizer.
    "fast_dllm_v2": dict(config=_qwen_cfg("Fast_dLLM_QwenForCausalLM", "Fast_dLLM_Qwen", bd_size=4),
                         tensors=dict(kind="qwen", bias=True, qk_norm=False, head=True),
                         specials={"|<MASK>|": MASK, "<|endoftext|>": EOS}, shards=1),
}
FAMILY_NAMES = tuple(SPECS)


def make_tensors(family: str, seed: int = 0) -> dict:
    spec, gen = SPECS[family], torch.Generator().manual_seed(seed)
    c = spec["config"]
    if spec["tensors"]["kind"] == "llada":
        return llada_tensors(gen, c["d_model"], c["n_layers"], c["n_heads"], c["mlp_hidden_size"], c["embedding_size"])
    hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    k = spec["tensors"]
    return qwen_tensors(gen, c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
                        hd, c["intermediate_size"], c["vocab_size"], k["bias"], k["qk_norm"], k["head"])


def write_tokenizer(folder: Path, specials: dict[str, int], vocab: int = VOCAB) -> None:
    ids = set(specials.values())
    words = {f"w{i}": i for i in range(vocab) if i not in ids}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
             for t, i in specials.items()]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": {**words, **specials}, "unk_token": "w0"}}
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    eos = next(t for t, i in specials.items() if i == EOS)
    mask = next(t for t, i in specials.items() if i == MASK)
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "added_tokens_decoder": {str(i): {"content": t, "special": True} for t, i in specials.items()},
        "eos_token": eos, "pad_token": eos, "mask_token": mask, "model_max_length": 512}))
    (folder / "special_tokens_map.json").write_text(json.dumps({"eos_token": {"content": eos}, "mask_token": mask}))


def write_checkpoint(folder: Path, family: str, seed: int = 0, shards: int | None = None, tokenizer: bool = True,
                     dtype: torch.dtype = torch.float32) -> dict:
    """Write the checkpoint; returns the tensors (float32) as written, under the family's own names."""
    spec = SPECS[family]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(spec["config"], indent=2))
    tensors = make_tensors(family, seed)
    stored = {k: v.to(dtype).contiguous() for k, v in tensors.items()}
    shards = spec["shards"] if shards is None else shards
    if shards == 1:
        save_file(stored, str(folder / "model.safetensors"), metadata={"format": "pt"})
    else:
        names = sorted(stored)
        weight_map = {}
        for s in range(shards):
            part = names[s::shards]
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            save_file({n: stored[n] for n in part}, str(folder / fname), metadata={"format": "pt"})
            weight_map.update({n: fname for n in part})
        total = sum(v.numel() * v.element_size() for v in stored.values())
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    if tokenizer:
        write_tokenizer(folder, spec["specials"])
    return {k: v.to(dtype).float() for k, v in tensors.items()}


# ---- DiffusionGemma: written by transformers' own class (`save_pretrained`), so config.json keys,
# tensor names (decoder copies only: the encoder is tied to them) and the shard index are exactly
# what transformers saves. Tiny: 3 text layers (2 sliding with a 6-token window, 1 global with its
# own head_dim and kv heads), 4 experts top-2, a 1-layer vision tower, canvas_length 8.
GEMMA_PAD, GEMMA_BOS = 93, 94
GEMMA_SPECIALS = {"<mask>": MASK, "<eos>": EOS, "<end_of_turn>": EXTRA, "<pad>": GEMMA_PAD, "<bos>": GEMMA_BOS, "<unk>": 95}
GEMMA_CANVAS = 8


def gemma_config(canvas_length: int = GEMMA_CANVAS, sliding_window: int = 6):
    from transformers.models.diffusion_gemma import DiffusionGemmaConfig

    text = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=8, global_head_dim=16, num_global_key_value_heads=1,
                sliding_window=sliding_window, max_position_embeddings=512, num_experts=4, top_k_experts=2,
                moe_intermediate_size=16, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                pad_token_id=GEMMA_PAD, eos_token_id=EOS, bos_token_id=GEMMA_BOS)
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=2, num_key_value_heads=2, head_dim=8)
    return DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=canvas_length,
                                boi_token_id=80, eoi_token_id=81, image_token_id=82)


def gemma_model(seed: int = 0, **config_kw):
    """The tiny model in float32, weights spread wide enough that its logits are not flat."""
    from transformers.models.diffusion_gemma import DiffusionGemmaForBlockDiffusion

    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(gemma_config(**config_kw)).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():  # tied tensors are one Parameter: written once
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
            else:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))
    return model


def write_diffusion_gemma(folder: Path, seed: int = 0, shards: int = 1, tokenizer: bool = True,
                          dtype: torch.dtype = torch.float32, **config_kw):
    """Write the checkpoint with `save_pretrained`; returns the model (in `dtype`) as written."""
    model = gemma_model(seed, **config_kw).to(dtype)
    folder.mkdir(parents=True, exist_ok=True)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    model.save_pretrained(str(folder), safe_serialization=True,
                          max_shard_size=size // shards + 1 if shards > 1 else "50GB")
    if tokenizer:
        write_tokenizer(folder, GEMMA_SPECIALS)
    return model
