"""Shared test settings for a 2-core CPU machine.

- torch to one thread, so parallel test processes and helpers don't oversubscribe;
- Triton's CPU interpreter when there is no GPU: Triton picks interpreter or
  compiler when it is first imported, so this must happen before any import.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# LiteLLM fetches a model cost map from the internet when imported unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Tests that need a real model but not a good one run on the small from-scratch model
# (fast to load and to run). The new default (a pretrained base) runs in tests/bases/ and in
# tests/editors/test_vscode_e2e.py::test_vscode_with_real_server (the extension starts the
# server with its own environment, so a real editor meets the default model).
os.environ.setdefault("DLLM_LSP_MODEL", "small")

import torch  # noqa: E402  (after the thread settings)

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
