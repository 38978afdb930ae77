"""Shared test settings: keep torch to one thread so the suite behaves on a 2-core machine."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
