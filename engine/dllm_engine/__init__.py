"""dllm_engine: the resident masked-diffusion infilling engine.

Importing this package is cheap: `protocol` and `clients` need no torch.
The engine itself is `dllm_engine.engine.Engine`.
"""
