"""One bounded cache for the whole app: least recently used first out, bounded in items and in bytes.

Seven caches are a `Bounded` each: the page and its scripts (ui/pagecache.py), the bytes of answers already streamed
through the page's protocol (ui/queuepath.py) and through the plain API (ui/fastpath.py; both keep their bookkeeping
in one too), the answers of the handlers (ui/cache.py), the attention of the last inputs (analysis/attention.py),
the generation engine's shared prompt prefixes (serving/engine.py) and fine-tuning's base texts
(training/finetune.py); docs/architecture.md gives each one's bound, and tests/test_docs.py checks it against the
code. A class typing its own sentences makes them grow with each new input, so each is bounded by what it holds in
bytes, not by a count: one SmolLM2 attention answer is several MB, a tokenization a few kB. `Bounded` is that one
structure: a size function gives each value's bytes, `valid` may refuse a kept value (a download file deleted
since), the newest value is always kept even when it alone is over the bound. Thread-safe.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


def nbytes(value) -> int:
    """An estimate of what `value` holds in memory: bytes and strings by their length, numpy arrays and tensors by
    their buffers, containers by their items (an answer's figures are dicts of lists of numbers)."""
    seen: set[int] = set()

    def size(v, depth: int) -> int:
        if id(v) in seen or depth > 64:
            return 0
        seen.add(id(v))
        if isinstance(v, (bytes, bytearray, memoryview)):
            return len(v) + 33
        if isinstance(v, str):
            return len(v) + 49
        if isinstance(v, (int, float, bool)) or v is None:
            return 32  # the object and the list's pointer to it
        buffer = getattr(v, "nbytes", None)
        if isinstance(buffer, int):  # numpy arrays, torch tensors (a view counts its own elements)
            return buffer + 112
        if isinstance(v, dict):
            return sys.getsizeof(v) + sum(size(k, depth + 1) + size(x, depth + 1) for k, x in v.items())
        if isinstance(v, (list, tuple, set, frozenset)):
            return sys.getsizeof(v) + sum(size(x, depth + 1) for x in v)
        inner = getattr(v, "__dict__", None)  # a plotly figure, a dataclass: what its attributes hold
        if isinstance(inner, dict):
            return sys.getsizeof(v) + size(inner, depth + 1)
        return sys.getsizeof(v)

    return size(value, 0)


class Bounded(Generic[V]):
    """A mapping of at most `max_items` values and `max_bytes` bytes (each value's `size`), least recently used
    dropped first; the newest value stays even alone over `max_bytes`. `valid(value)` is asked on each hit: a value
    it refuses is dropped and the lookup misses."""

    def __init__(self, max_bytes: int, max_items: int | None = None, size: Callable[[V], int] = nbytes,
                 valid: Callable[[V], bool] | None = None):
        self.max_bytes, self.max_items = max_bytes, max_items
        self._size, self._valid = size, valid
        self._values: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self.bytes = 0
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable | None) -> V | None:
        if key is None:
            return None
        with self._lock:
            kept = self._values.get(key)
            if kept is not None and self._valid is not None and not self._valid(kept[0]):
                self._drop(key)
                kept = None
            if kept is None:
                self.misses += 1
                return None
            self._values.move_to_end(key)
            self.hits += 1
            return kept[0]

    def put(self, key: Hashable | None, value: V) -> None:
        if key is None:
            return
        size = self._size(value)
        with self._lock:
            if key in self._values:
                self._drop(key)
            self._values[key] = value, size
            self.bytes += size
            while len(self._values) > 1 and (self.bytes > self.max_bytes or
                                             (self.max_items is not None and len(self._values) > self.max_items)):
                self._drop(next(iter(self._values)))

    def pop(self, key: Hashable) -> V | None:
        with self._lock:
            kept = self._values.get(key)
            if kept is not None:
                self._drop(key)
            return None if kept is None else kept[0]

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self.bytes = 0

    def _drop(self, key: Hashable) -> None:
        self.bytes -= self._values.pop(key)[1]

    def keys(self) -> list[Hashable]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._values)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)
