"""Freed memory, given back to the system.

glibc's malloc keeps the pages of freed blocks for the next allocation instead of returning them, so a process's
resident memory stays near its peak. In a server that peak is set by its rare heavy moments: a live fine-tuning
run on SmolLM2 frees about 400 MB of activations, gradients and optimizer moments when it ends, reading the GGUF
file about 90 MB of small arrays. `release()` after such a moment collects Python's reference cycles, then asks
glibc to return every whole free page of every arena (`malloc_trim(0)`, glibc ≥ 2.8); it takes a few
milliseconds. Elsewhere (macOS, Windows, musl) the allocators differ and this only collects.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def release() -> None:
    """Collect, then give the allocator's free pages back to the system (glibc only)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
