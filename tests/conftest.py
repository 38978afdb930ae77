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
# (fast to load and to run). The new default (a pretrained base) runs in tests/bases/ (editors'
# e2e servers inherit this variable, so they run the small model too).
os.environ.setdefault("DLLM_LSP_MODEL", "small")

import torch  # noqa: E402  (after the thread settings)

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
