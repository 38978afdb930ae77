"""The GGUF loader against transformers' own Llama and Gemma 3 on tiny checkpoints in llama.cpp's layout."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from dllm_engine.bases.gguf_weights import gguf_dims, open_gguf, read_state, unpermute_rope_rows
from dllm_engine.checkpoint import build_model
from dllm_engine.layout import causal_mask
from dllm_engine.model_config import CheckpointError, ModelConfig

from .gguf_writer import llama_cpp_permute, write_gemma3_gguf, write_llama_gguf


def tiny_llama(tied: bool) -> LlamaForCausalLM:
    cfg = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, rms_norm_eps=1e-5, tie_word_embeddings=tied)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # non-trivial norms, so a swapped norm would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def our_model(path):
    reader = open_gguf(path)
    dims = gguf_dims(reader, path)
    cfg = ModelConfig(**dims, mask_token_id=1)
    state = read_state(path, reader, torch.float32)
    return build_model(cfg, state, {k: path for k in state}, torch.device("cpu"), torch.float32, path), cfg


@pytest.mark.parametrize("tied", [True, False])
def test_gguf_llama_matches_transformers(tmp_path, tied):
    ref = tiny_llama(tied)
    path = tmp_path / "tiny.gguf"
    write_llama_gguf(path, ref.config, ref.state_dict())
    ours, cfg = our_model(path)
    assert cfg.tie_word_embeddings == tied and cfg.num_kv_heads == 2 and cfg.rope_theta == 100000.0
    ids = torch.randint(0, 97, (1, 23), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = ref(ids).logits
        got, _ = ours(ids, torch.arange(23)[None], mask=causal_mask(0, 23, ids.device))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_quantized_tensors_dequantize_close(tmp_path):
    ref = tiny_llama(True)
    path = tmp_path / "q8.gguf"
    write_llama_gguf(path, ref.config, ref.state_dict(), quantize_ffn=True)
    ours, _ = our_model(path)
    want = ref.model.layers[1].mlp.down_proj.weight
    got = ours.model.layers[1].mlp.down_proj.weight
    assert not torch.equal(got, want)  # really went through Q8_0
    torch.testing.assert_close(got, want, atol=float(want.detach().abs().max()) / 100, rtol=0)


def test_unpermute_inverts_llama_cpp_permute():
    w = np.arange(8 * 16 * 3, dtype=np.float32).reshape(8 * 16, 3)
    np.testing.assert_array_equal(unpermute_rope_rows(llama_cpp_permute(w, 8), 8), w)


def test_not_a_gguf_names_the_file(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 10)
    with pytest.raises(CheckpointError, match="broken.gguf"):
        open_gguf(bad)


def test_gguf_gemma3_matches_transformers(tmp_path):
    """GeGLU, sandwich norms, q/k norms, the embedding scale and two RoPE bases (five local
    layers, then a global one), against Gemma3ForCausalLM."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
                           num_attention_heads=4, num_key_value_heads=1, head_dim=32, query_pre_attn_scalar=32,
                           max_position_embeddings=128, sliding_window=512)
    torch.manual_seed(0)
    ref = Gemma3ForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "norm" in name:
                p.uniform_(-0.5, 0.5)  # Gemma's norms multiply by 1 + w
    path = tmp_path / "gemma.gguf"
    write_gemma3_gguf(path, cfg, ref.state_dict())
    ours, ocfg = our_model(path)
    assert ocfg.sandwich_norm and ocfg.hidden_act == "gelu_tanh" and ocfg.global_every == 6
    ids = torch.randint(0, 97, (1, 19), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = ref(ids).logits
        got, _ = ours(ids, torch.arange(19)[None], mask=causal_mask(0, 19, ids.device))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
