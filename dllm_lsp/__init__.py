"""dllm-lsp: a language server that completes and edits code with a diffusion language model.

This package never imports torch or triton (see tests/test_import_walls.py):
the engine lives in `dllm_engine` and is reached through `dllm_engine.clients`.
"""

__version__ = "0.1.0"
