"""Weight-only int4 / int8 projections (weight_only.py): on Q4_1's grid, int4 is the same weights."""

import pytest
import torch
import torch.nn.functional as F

from dllm_engine.weight_only import GROUP, Int4Linear, Int8RowLinear, int4_available, kernel_dtype, q4_blocks

pytestmark = pytest.mark.skipif(not int4_available(), reason="this torch has no CPU weight-only kernels")


def q4_1_weights(n: int, k: int, seed: int = 0) -> torch.Tensor:
    """Weights as a Q4_1 GGUF holds them: per block of 32 inputs, d * q + m, q in 0..15,
    with the block's minimum at q = 0 and its maximum at q = 15 (ggml's quantizer)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 16, (n, k // GROUP, GROUP), generator=g)
    q[..., 0], q[..., 1] = 0, 15
    d = torch.rand(n, k // GROUP, 1, generator=g) * 0.02 + 1e-3
    m = -torch.rand(n, k // GROUP, 1, generator=g) * 0.2
    return (d * q + m).reshape(n, k)


def kernel_rounding(x: torch.Tensor, w: torch.Tensor, bias=None) -> torch.Tensor:
    """x W^T (+ b) as the bf16 kernels compute it for an fp32 model: the activations, each
    group's scale and its value at q = 8 rounded to bf16, the product summed in fp32 and
    returned in bf16 (compare with BF16_OUT). On Q4_1 weights this is exact up to summation
    order and the output's rounding; a q one step off is not."""
    q, step, low = q4_blocks(w)
    n, k = q.shape
    scale = step.bfloat16().float()[..., None]
    zero = (low + 8 * step).bfloat16().float()[..., None]
    deq = ((q.float().reshape(n, k // GROUP, GROUP) - 8) * scale + zero).reshape(n, k)
    y = F.linear(x.bfloat16().float(), deq)
    return (y.bfloat16().float() + bias) if bias is not None else y.bfloat16().float()


BF16_OUT = dict(rtol=2 ** -8, atol=1e-3)  # one bf16 rounding of the output, either way


def test_int4_on_q4_1_weights_is_the_same_linear_in_an_fp32_model():
    w, b = q4_1_weights(96, 128), torch.randn(96)
    x = torch.randn(5, 128)
    lin = Int4Linear(w, b)
    got = lin(x)
    assert got.dtype == x.dtype and got.shape == (5, 96)
    # fp32 models multiply through the bf16 kernel (torch's fp32 one is 15-60x slower)
    assert lin.scales_zeros.dtype == torch.bfloat16 == kernel_dtype(torch.float32)
    torch.testing.assert_close(got, kernel_rounding(x, w, b), **BF16_OUT)
    # and the rounding costs no more than running the whole product in bf16 would
    want, bf16 = F.linear(x, w, b), F.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()).float()
    assert (got - want).abs().max() <= 2 * (bf16 - want).abs().max() + 1e-3


def test_the_int8_head_of_an_fp32_model_multiplies_in_bf16():
    w = torch.randn(200, 64)
    head = Int8RowLinear(w)
    assert head.scale.dtype == torch.bfloat16 and kernel_dtype(torch.float16) == torch.float16
    x = torch.randn(3, 64)
    got = head(x)
    assert got.dtype == torch.float32
    want = F.linear(x, w)
    assert (got - want).abs().max() <= 0.03 * want.abs().max()


def test_int4_in_bf16_is_as_close_as_bf16_weights():
    w = q4_1_weights(64, 256, seed=1)
    x = torch.randn(3, 256)
    want = F.linear(x, w)
    bf16 = F.linear(x.bfloat16(), w.bfloat16()).float()
    got = Int4Linear(w.bfloat16())(x.bfloat16()).float()
    assert (got - want).abs().max() <= 4 * (bf16 - want).abs().max() + 1e-2


def test_leading_dims_and_a_constant_block():
    w = q4_1_weights(32, 64)
    w[0, :GROUP] = 0.25  # a block with one value: step 0
    x = torch.randn(2, 3, 64)
    torch.testing.assert_close(Int4Linear(w)(x), kernel_rounding(x, w), **BF16_OUT)


def test_inputs_not_in_groups_of_32_are_refused():
    with pytest.raises(ValueError, match="groups of 32"):
        Int4Linear(torch.randn(8, 48))


def test_int8_rows_for_the_head():
    w = torch.randn(200, 64)
    x = torch.randn(4, 64)
    want = F.linear(x, w)
    got = Int8RowLinear(w)(x)
    assert (got - want).abs().max() <= 0.02 * want.abs().max()


def test_kept_blocks_round_trip_through_nibbles_and_fuse_by_rows(tmp_path):
    from safetensors.torch import save_file

    from dllm_engine.weight_only import open_kept_blocks, kept_blocks, pack_nibbles, q4_blocks, unpack_nibbles

    q_w, k_w = q4_1_weights(64, 128, seed=2), q4_1_weights(32, 128, seed=3)
    q, step, low = q4_blocks(q_w)
    assert torch.equal(unpack_nibbles(pack_nibbles(q)), q)
    rebuilt = (low[..., None] + step[..., None] * q.float().reshape(64, 4, GROUP)).reshape(64, 128)
    torch.testing.assert_close(rebuilt, q_w, rtol=0, atol=1e-6)  # Q4_1's own q, d and m
    blocks = {}
    for name, w in (("self_attn.q_proj", q_w), ("self_attn.k_proj", k_w), ("self_attn.v_proj", k_w)):
        bq, bs, bl = q4_blocks(w)
        blocks.update({f"model.layers.0.{name}.q": pack_nibbles(bq), f"model.layers.0.{name}.step": bs,
                       f"model.layers.0.{name}.low": bl})
    save_file(blocks, str(tmp_path / "int4.safetensors"))
    fused = torch.cat((q_w, k_w, k_w))
    x = torch.randn(2, 128)
    with open_kept_blocks(tmp_path) as handle:
        kept = kept_blocks(handle, 0, ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"))
        assert kept_blocks(handle, 1, ("self_attn.q_proj",)) is None  # not kept: re-derived instead
    # the fused layer from kept blocks, its weight argument rounded to bf16: the kept blocks win
    lin = Int4Linear(fused.bfloat16().float(), blocks=kept)
    torch.testing.assert_close(lin(x), kernel_rounding(x, fused), **BF16_OUT)
    rederived = Int4Linear(fused.bfloat16().float())(x)  # what the kept blocks are there to avoid
    assert not torch.allclose(rederived, kernel_rounding(x, fused), **BF16_OUT)
    with open_kept_blocks(tmp_path / "nowhere") as handle:
        assert handle is None


def test_many_rows_multiply_with_the_dense_weights_they_were_built_from():
    from dllm_engine import weight_only

    w = q4_1_weights(32, 64).bfloat16()
    lin = Int4Linear(w)
    many = torch.randn(weight_only.DENSE_ROWS, 64, dtype=torch.bfloat16)
    assert torch.equal(lin(many), F.linear(many, w))  # a context's prefill: oneDNN's GEMM, not the int4 kernel
    few = many[: weight_only.DENSE_ROWS - 1]
    torch.testing.assert_close(lin(few).float(), F.linear(few.float(), w.float()), rtol=2e-2, atol=2e-2)


def test_the_head_multiplies_many_rows_with_its_dense_weights():
    """A scoring pass asks for a hundred rows of logits: oneDNN's GEMM on the head's own (tied)
    weights, not the int8 kernel, which is a GEMV at heart (127 ms vs ~25 ms for 128 rows of
    SmolLM2's head)."""
    from dllm_engine import weight_only

    w = torch.randn(200, 64).bfloat16()
    head = Int8RowLinear(w)
    assert head.dense is not None and head.dense.data_ptr() == w.data_ptr()  # no copy of the weights
    many = torch.randn(3, weight_only.DENSE_ROWS, 64, dtype=torch.bfloat16)
    assert torch.equal(head(many), F.linear(many, w))
    few = many[0, : weight_only.DENSE_ROWS - 1]
    want = F.linear(few.float(), w.float())
    assert (head(few).float() - want).abs().max() <= 0.03 * want.abs().max()  # the int8 kernel's rounding
