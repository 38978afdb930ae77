"""Safetensors shards: every header parsed and checked before any tensor is read, then each
tensor either memory-mapped (file-backed: same dtype on the CPU) or read once into its final
buffer (a fused q/k/v slice, another dtype, another device).

Why not only `safe_open(...).get_tensor`: its tensors are views of one private mapping of the
whole file, and a page touched through it stays in the process's RSS as long as any tensor
of that file lives. Copying q/k/v out of it (to fuse them) or converting bf16 -> fp32 from
it left both the copy and the touched file pages resident (1.38x the weights at the 1.5B
shape). `read_into` goes through `readinto` instead: the page cache, never the mapping.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from .model_config import CheckpointError

# The dtypes a weight may be stored in; anything else (ints, bools, fp8 without its scales)
# is a quantized or broken checkpoint, refused before any reading.
FLOAT_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
MAX_HEADER = 100 << 20  # the safetensors format's own limit on the JSON header
CHUNK_BYTES = 64 << 20  # host staging per copy for a dtype change or another device


@dataclass(frozen=True)
class TensorRef:
    """Where one tensor's bytes are: enough to check it and read it without opening the file."""

    file: Path
    name: str
    tag: str  # the header's dtype string ("BF16", ...)
    shape: tuple[int, ...]
    start: int  # absolute byte offset in `file`
    nbytes: int

    @property
    def dtype(self) -> torch.dtype | None:
        return FLOAT_DTYPES.get(self.tag)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def is_floating_point(self) -> bool:
        return self.dtype is not None


def read_header(file: Path) -> dict[str, TensorRef]:
    """Name -> TensorRef for one shard; a CheckpointError naming the file for a truncated or
    malformed one (a download cut short: the header promises more bytes than the file has)."""
    try:
        size = file.stat().st_size
        with open(file, "rb") as fh:
            head = fh.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
            if not 0 < n <= min(MAX_HEADER, size - 8):
                raise CheckpointError(f"{file}: not a readable safetensors file ({size} bytes, no valid header)")
            header = json.loads(fh.read(n))
    except OSError as exc:
        raise CheckpointError(f"{file}: cannot read: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{file}: not a readable safetensors file (bad header: {exc})") from None
    refs, end = {}, 0
    for name, h in header.items():
        if name == "__metadata__":
            continue
        try:
            tag, shape, (b, e) = str(h["dtype"]), tuple(int(d) for d in h["shape"]), h["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{file}: not a readable safetensors file (bad header entry {name!r})") from None
        ref = TensorRef(file, name, tag, shape, 8 + n + int(b), int(e) - int(b))
        if ref.dtype is not None and ref.nbytes != ref.numel * ref.dtype.itemsize:
            raise CheckpointError(f"{file}: tensor {name!r}: header gives {ref.nbytes} bytes for {tag} {list(shape)}")
        refs[name], end = ref, max(end, int(e))
    if 8 + n + end > size:
        raise CheckpointError(f"{file}: truncated: its header describes {8 + n + end} bytes but the file has {size} "
                              "(an interrupted download or copy? fetch the shard again)")
    return refs


def check_float(ref: TensorRef, shown_name: str | None = None) -> None:
    if ref.dtype is None:
        raise CheckpointError(f"{ref.file}: tensor {shown_name or ref.name!r} is stored as {ref.tag}; the engine loads "
                              f"{'/'.join(FLOAT_DTYPES)} weights (quantized checkpoints are not supported)")


class ShardReader:
    """Reads tensors for one load: memory maps per file, one staging buffer per source dtype."""

    def __init__(self) -> None:
        self._maps: dict[Path, object] = {}
        self._staging: dict[tuple[torch.dtype, bool], torch.Tensor] = {}
        self.staged_bytes = 0  # the largest host staging buffer used (tests check it stays small)

    def mmap(self, ref: TensorRef) -> torch.Tensor:
        """The tensor as a view of the file's private mapping: no copy, pages read on first touch."""
        from safetensors import SafetensorError, safe_open

        try:
            if ref.file not in self._maps:
                self._maps[ref.file] = safe_open(str(ref.file), framework="pt")
            return self._maps[ref.file].get_tensor(ref.name)
        except (SafetensorError, OSError) as exc:
            raise CheckpointError(f"{ref.file}: cannot read tensor {ref.name!r}: {exc}") from None

    def read_into(self, ref: TensorRef, dst: torch.Tensor) -> None:
        """Copy the tensor into `dst` (contiguous, ref's shape, any dtype and device).

        Same dtype on the CPU: from the file straight into dst's memory. Otherwise through a
        host buffer of at most CHUNK_BYTES: on CUDA each tensor goes to the GPU piece by piece
        as it is read, never as a full host copy first."""
        if not dst.is_contiguous() or tuple(dst.shape) != ref.shape:
            raise ValueError(f"read_into: {ref.name}: dst must be contiguous with shape {ref.shape}")
        with open(ref.file, "rb", buffering=0) as fh:
            fh.seek(ref.start)
            if dst.device.type == "cpu" and dst.dtype == ref.dtype:
                _read_exact(fh, memoryview(dst.view(-1).view(torch.uint8).numpy()), ref)
                return
            step = max(1, CHUNK_BYTES // ref.dtype.itemsize)
            buf, flat = self._buffer(ref.dtype, min(step, ref.numel), dst.device.type == "cuda"), dst.view(-1)
            for lo in range(0, ref.numel, step):
                part = buf[: min(step, ref.numel - lo)]
                _read_exact(fh, memoryview(part.view(torch.uint8).numpy()), ref)
                # Converts the dtype and/or moves to the device; a blocking copy, so the
                # staging buffer is free to be refilled on the next round.
                flat[lo:lo + part.numel()].copy_(part)

    def _buffer(self, dtype: torch.dtype, numel: int, pinned: bool) -> torch.Tensor:
        key = (dtype, pinned)
        buf = self._staging.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, pin_memory=pinned)
            self._staging[key] = buf
            self.staged_bytes = max(self.staged_bytes, buf.numel() * buf.element_size())
        return buf


def _read_exact(fh, view: memoryview, ref: TensorRef) -> None:
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:got + (256 << 20)])  # one read() returns at most ~2 GiB on Linux
        if not n:
            raise CheckpointError(f"{ref.file}: truncated while reading tensor {ref.name!r}")
        got += n
