"""dllm_kernels: Triton kernels for the denoising hot path, each beside its torch reference.

Imports only torch and triton.
"""
