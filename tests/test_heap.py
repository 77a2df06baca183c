"""playground/heap.py: the free pages of a fragmented heap go back to the system."""

import sys

import psutil
import pytest

from playground import heap


def resident_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux") or heap._malloc_trim() is None, reason="glibc only")
def test_release_gives_back_the_pages_a_fragmented_heap_keeps():
    blocks = [bytearray(64 * 1024) for _ in range(3200)]   # 200 MB in blocks below the mmap threshold: the heap
    kept = blocks[::16]                                      # one block in 16 stays: no free run reaches the top
    before = resident_mb()
    del blocks
    freed = resident_mb()
    heap.release()
    after = resident_mb()
    assert before - freed < 50, "free() alone gave the pages back: nothing here to test"
    assert freed - after > 120, (before, freed, after)
    assert len(kept) == 200


def test_release_is_safe_anywhere():
    heap.release()
    heap.release()
