"""Out of device memory: what torch's caching allocator says when an allocation fails.

torch raises `torch.OutOfMemoryError` (a RuntimeError before torch 2.5) with one message
(c10/cuda/CUDACachingAllocator.cpp; the XPU allocator says it the same way):

    CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 GiB
    of which 2.50 GiB is free. [Process 123 has 10.00 GiB memory in use. ]Including
    non-PyTorch memory, this process has 76.67 GiB memory in use. Of the allocated memory
    75.92 GiB is allocated by PyTorch, and 97.81 MiB is reserved by PyTorch but unallocated.
    If reserved but unallocated memory is large try setting
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ...

`oom_of` reads those numbers; every field it cannot find is None (older releases word parts
differently). Triton's "OutOfMemoryError: out of resource: ... Hardware limit" is shared
memory per block, a kernel's configuration, not device memory: not matched here.
"""

from __future__ import annotations

import re
from typing import Any

_SIZE = r"(\d+(?:\.\d+)?) ?([KMGTP]?i?B|bytes)"
_HEAD = re.compile(rf"\b(CUDA|XPU|HIP|MTIA|\w+) out of memory\. Tried to allocate {_SIZE}")
_CAPACITY = re.compile(rf"(GPU|Device|XPU) (\d+) has a total capacity of {_SIZE} of which {_SIZE} is free")
_THIS = re.compile(rf"this process has {_SIZE} memory in use")
_OTHER = re.compile(rf"Process (\d+) has {_SIZE} memory in use")
_ALLOCATED = re.compile(rf"Of the allocated memory {_SIZE} is allocated by PyTorch, and {_SIZE} is reserved by PyTorch but unallocated")
_UNITS = {"B": 1, "bytes": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4, "PiB": 1024**5,
          "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4, "PB": 1000**5}


def _size(value: str, unit: str) -> dict[str, Any]:
    """A size as torch wrote it and in bytes (as exact as its two decimals)."""
    return {"text": f"{value} {unit}", "bytes": int(float(value) * _UNITS.get(unit, 1))}


def is_oom_message(message: str) -> bool:
    """True when `message` is the allocator's out-of-memory message (not Triton's shared
    memory 'out of resource')."""
    return bool(_HEAD.search(message or ""))


def oom_of(message: str) -> dict[str, Any] | None:
    """The numbers of an out-of-memory message (see the module doc): backend ("CUDA"),
    device ("GPU 0"), asked, capacity, free, this_process (in use, PyTorch's and not),
    allocated (by PyTorch's tensors), reserved_unallocated (cached by the allocator, free
    for it to reuse), other_processes ([{pid, in_use}]); each size {text, bytes}. None when
    the message is not one."""
    head = _HEAD.search(message or "")
    if head is None:
        return None
    out: dict[str, Any] = {
        "backend": head.group(1), "device": None, "asked": _size(head.group(2), head.group(3)),
        "capacity": None, "free": None, "this_process": None, "allocated": None,
        "reserved_unallocated": None, "other_processes": [],
    }
    if m := _CAPACITY.search(message):
        out["device"] = f"{m.group(1)} {m.group(2)}"
        out["capacity"] = _size(m.group(3), m.group(4))
        out["free"] = _size(m.group(5), m.group(6))
    if m := _THIS.search(message):
        out["this_process"] = _size(m.group(1), m.group(2))
    if m := _ALLOCATED.search(message):
        out["allocated"] = _size(m.group(1), m.group(2))
        out["reserved_unallocated"] = _size(m.group(3), m.group(4))
    out["other_processes"] = [{"pid": int(m.group(1)), "in_use": _size(m.group(2), m.group(3))} for m in _OTHER.finditer(message)]
    return out
