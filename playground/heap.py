"""Freed memory, given back to the system.

glibc's malloc keeps the pages of freed blocks for the next allocation instead of returning them, so a process's
resident memory stays near its peak. In a server that peak is set by its rare heavy moments: a live fine-tuning
run on SmolLM2 frees about 400 MB of activations, gradients and optimizer moments when it ends, reading the GGUF
file about 90 MB of small arrays, SmolLM2's attention for 256 tokens 230 MB of weights and scores. `trim()` asks
glibc to return every whole free page of every arena (`malloc_trim(0)`, glibc ≥ 2.8): the app's workers call it after
every computation. `release()` first collects Python's reference cycles, for the end of a training run. Elsewhere
(macOS, Windows, musl) the allocators differ: `trim()` does nothing there.
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


def trim() -> None:
    """Give the allocator's free pages back to the system (glibc only): 0.1 ms when there is nothing to give,
    about 20 ms after SmolLM2's attention for 256 tokens freed 230 MB."""
    malloc_trim = _malloc_trim()
    if malloc_trim is not None:
        malloc_trim(0)


def release() -> None:
    """Collect Python's reference cycles (a quarter of a second in the app's process: for the rare heavy moments),
    then trim."""
    gc.collect()
    trim()
