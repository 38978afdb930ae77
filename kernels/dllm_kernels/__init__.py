"""dllm_kernels: Triton kernels for the denoising hot path, each beside its torch reference.

Imports only torch and triton (triton is optional: without it every op runs its reference).
The engine calls `dllm_kernels.dispatch`, which picks the Triton kernel for CUDA tensors
and the torch reference elsewhere. One op per module:

    rmsnorm            RMSNorm fused with the residual add
    rope               rotate-half RoPE on q and k, in place
    swiglu             silu(gate) * up
    canvas_attention   canvas queries over [cached context ++ canvas], non-causal, GQA
    context_attention  causal prefill into the same cache layout
    kv_append          new K/V rows into a preallocated cache at per-request offsets
    confidence         argmax, probability, top-2 margin, entropy of logits in one pass
    commit             the per-pass commit rule (threshold, at least one per request)

Cache layout: per layer K and V [B, H_kv, T, D]; canvas q [B, H, L, D], k/v [B, H_kv, L, D].
"""
