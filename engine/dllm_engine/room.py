"""Is there room for the weights? Checked before any tensor is read, so a checkpoint too big
for this machine fails in a second with a clear message instead of swapping or being killed."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from .model_config import CheckpointError

GiB = 2**30


def mem_available() -> int | None:
    """Bytes of RAM the kernel could hand out now (MemAvailable: free plus reclaimable cache)."""
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None  # not Linux: no check


def device_free(device: torch.device) -> int | None:
    if device.type == "cpu":
        return mem_available()
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return None  # meta (tests) and others: nothing to check


def check_memory(need: int, device: torch.device, dtype: torch.dtype, where: Path) -> None:
    free = device_free(device)
    if free is None or need <= free:
        return
    what = "RAM (MemAvailable in /proc/meminfo)" if device.type == "cpu" else f"memory on {device}"
    hint = " or load in bfloat16 (--dtype bfloat16)" if dtype == torch.float32 else ""
    raise CheckpointError(f"{where}: the weights need {need / GiB:.2f} GiB as {str(dtype).removeprefix('torch.')} "
                          f"but only {free / GiB:.2f} GiB of {what} is available; free some{hint}")


def check_disk(need: int, out: Path) -> None:
    """Before writing `need` bytes under `out` (a native cache, a saved model)."""
    free = shutil.disk_usage(out).free
    if need > free:
        raise CheckpointError(f"{out}: writing the weights needs {need / GiB:.2f} GiB of disk, "
                              f"only {free / GiB:.2f} GiB is free there")
