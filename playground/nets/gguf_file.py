"""A GGUF file (llama.cpp's format, version 2 or 3) as nets/smollm2.py reads it: its header's key/value metadata and
its tensors, each a view of the memory-mapped file.

The `gguf` package's own reader makes a numpy view for every item of every array of the header: 2.3 s of CPU for
SmolLM2's 49,152 tokens and 48,900 merges, paid by every process that reads the model or its tokenizer (a served
app and each test that loads it). This reads the header with `struct` over a memory map, an array of numbers in one
`numpy.frombuffer`: 0.07 s. Its tensors' data are what that reader gives (the F32 and F16 values, or the quantised
blocks' bytes, row by row), for `gguf.quants.dequantize`; tests/test_llama.py checks both readers agree on the file.

The layout: "GGUF", the version (u32), the number of tensors and of key/value pairs (u64 each); each pair a key (a
string: its length as u64, then UTF-8) and a typed value; each tensor's name, number of dimensions (u32), the
dimensions (u64 each, the row's length first), type (u32) and offset (u64) from the start of the data, which is
the header's end rounded up to `general.alignment` (32 unless it says otherwise). Little-endian throughout.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# the value types: the struct format of each fixed-size one; 8 is a string, 9 an array (item type, count, items)
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
F32, F16 = 0, 1  # the tensor types stored as plain values; every other is a quantised one


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]   # GGUF's order: the row's length first
    tensor_type: int         # gguf.GGMLQuantizationType's value
    data: np.ndarray         # a view of the file, in numpy's order (rows last); a quantised type's rows as bytes


@dataclass
class GGUF:
    path: Path
    fields: dict[str, object]   # key -> int, float, bool, str, or a list of them (an array)
    tensors: list[Tensor]

    def field(self, key: str):
        return self.fields.get(key)


class _Header:
    """A cursor over the header's bytes."""

    def __init__(self, buffer):
        self.buffer, self.at = buffer, 0

    def take(self, kind: str):
        (value,) = struct.unpack_from("<" + kind, self.buffer, self.at)
        self.at += struct.calcsize("<" + kind)
        return value

    def text(self) -> str:
        n = self.take("Q")
        self.at += n
        return self.buffer[self.at - n:self.at].decode("utf-8")

    def value(self, kind: int):
        if kind in SCALARS:
            return self.take(SCALARS[kind])
        if kind == STRING:
            return self.text()
        if kind != ARRAY:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.at}")
        item, count = self.take("I"), self.take("Q")
        if item in SCALARS:  # numbers: one read of the whole array
            dtype = np.dtype("<" + SCALARS[item])
            values = np.frombuffer(self.buffer, dtype, count, self.at).tolist()
            self.at += count * dtype.itemsize
            return values
        return [self.value(item) for _ in range(count)]


def read(path: str | Path, keys: set[str] | None = None) -> GGUF:
    """The file's metadata and tensors; with `keys`, only the metadata up to the last of those keys (no tensors). A
    file that is not GGUF, or whose header or data end early, is a ValueError that names it."""
    path = Path(path)
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path.name} is not a GGUF file")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
            try:
                return _read(path, _Header(buffer), keys)
            except (struct.error, UnicodeDecodeError, ValueError) as err:
                raise ValueError(f"{path.name} is damaged (its header or data end early, or fail to parse): "
                                 f"{err}") from err


def _read(path: Path, header: _Header, keys: set[str] | None) -> GGUF:
    header.at = 4
    version, n_tensors, n_fields = header.take("I"), header.take("Q"), header.take("Q")
    if version < 2:
        raise ValueError(f"GGUF version {version}; versions 2 and 3 are read")
    fields = {}
    for _ in range(n_fields):
        key = header.text()
        fields[key] = header.value(header.take("I"))
        if keys is not None and keys <= fields.keys():
            return GGUF(path, fields, [])
    infos = []
    for _ in range(n_tensors):
        name, dims = header.text(), header.take("I")
        infos.append((name, tuple(header.take("Q") for _ in range(dims)), header.take("I"), header.take("Q")))
    alignment = int(fields.get("general.alignment", 32))
    start = -(-header.at // alignment) * alignment
    whole = np.memmap(path, mode="r")
    return GGUF(path, fields, [Tensor(name, shape, kind, _data(whole, start + offset, shape, kind))
                               for name, shape, kind, offset in infos])


def _data(whole: np.memmap, start: int, shape: tuple[int, ...], kind: int) -> np.ndarray:
    dims = tuple(reversed(shape))
    if kind in (F32, F16):
        dtype = np.dtype("<f4" if kind == F32 else "<f2")
        return whole[start:start + math.prod(shape) * dtype.itemsize].view(dtype).reshape(dims)
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    row = dims[-1] // block * size
    return whole[start:start + math.prod(dims[:-1]) * row].reshape(*dims[:-1], row)  # short data: a ValueError
