"""playground/heap.py: the free pages of a fragmented heap go back to the system."""

import sys

import psutil
import pytest

from playground import heap


def resident_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


@pytest.mark.slow  # 200 MB of blocks made, freed and trimmed
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


def test_release_collects_reference_cycles_then_trims(monkeypatch):
    """release() frees what only the cycle collector can (a finished training run's graph holds cycles), then
    gives the pages back; with the collector off, as it may be between its own runs, the cycle is still freed."""
    import gc
    import weakref

    class Node:
        pass

    trimmed = []
    monkeypatch.setattr(heap, "trim", lambda: trimmed.append(bool(gone)))   # whether the cycle was freed by then
    a, b = Node(), Node()
    a.other, b.other = b, a                                   # a cycle: reference counting alone never frees it
    gone = []
    watch = weakref.ref(a, lambda _: gone.append(True))
    del a, b
    gc.disable()
    try:
        assert watch() is not None, "freed without the collector: nothing here to test"
        heap.release()
    finally:
        gc.enable()
    assert watch() is None and trimmed == [True], trimmed   # collected first, then trimmed once


def test_trim_does_nothing_without_glibcs_malloc_trim(monkeypatch):
    """Elsewhere (macOS, Windows, musl) trim() and release() are no-ops that return, not errors."""
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.trim() is None and heap.release() is None
    calls = []
    monkeypatch.setattr(heap, "_malloc_trim", lambda: lambda pad: calls.append(pad))
    heap.trim()
    assert calls == [0]  # malloc_trim(0): every whole free page of every arena
