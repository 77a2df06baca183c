"""The serving engine's C++ kernels (compiled once per machine with torch's cpp_extension, kept in its build folder),
each with the same arithmetic for a row whatever else is in the batch, and each replacing Python code that stays
as the fallback and the tests' reference:

- `attention`: each row's attention over its own cache, all rows in one call (below);
- `quantize_rows` and `combine`: the elementwise work around nets/int8.py's integer product (a row's scale and
  its two 7-bit halves; the halves' and planes' sums, times the row's scale), one pass each instead of about
  fifteen library calls a product: at one row the calls' fixed cost was a third of a decode step.

`Attention.ragged` loops over the rows in Python otherwise: per row and layer two products of a few query heads
against the row's keys and values and a softmax, each a library call whose fixed cost is most of its time (SmolLM2
at 32 rows: about 25 µs a product for 58 thousand multiply-adds). Here one call per layer writes every row's new
keys and values into its cache and computes, for each (row, position, head) on its own, in one fixed order:

    s_t = q · k_t  (16 running sums over the head's width, added up in one order),
    w_t = exp(s_t - max s) / sum_t exp(s_t - max s)  (summed t = 0, 1, ...),
    y = sum_t w_t v_t  (t = 0, 1, ...),

so a row's bits depend on its own numbers only: no batch, no thread count (each task is one row's position and
head) and no library's blocking choose an order ("Defeating Nondeterminism in LLM Inference", He et al., 2025:
batch-invariant kernels). Without a C++ compiler (or with PLAYGROUND_KERNELS=0) the Python loop serves,
the same mathematics in the library's order: one path per process, so a seeded answer is still the same alone or
beside others. `quantize_rows` and `combine` give the Python versions' very bits (the same IEEE operations in the
same order; tests/test_engine.py checks them equal).

Compiled for the vector extension torch reports for this CPU (AVX-512, AVX2 or neither), with contraction into fused
multiply-adds and fast math turned off: the compiler vectorizes the loops but cannot change a single rounding, so
every build computes the same bits as the plain one.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import torch

SOURCES = [Path(__file__).parent / "csrc" / name for name in ("attention.cpp", "int8.cpp", "top.cpp", "sample.cpp")]
FUNCTIONS = ["ragged_attention", "quantize_rows", "combine", "block_weight", "product", "product_rows", "capabilities",
             "top_order", "rms_norm", "rope_qkv", "distribution", "draw", "sample_rows"]

_lock = threading.Lock()
_kernel: dict = {}


def kernel():
    """The compiled module, or None where it cannot be built (no compiler, or turned off): decided once
    per process."""
    with _lock:
        if "op" not in _kernel:
            _kernel["op"] = _build() if os.environ.get("PLAYGROUND_KERNELS", "1") != "0" else None
        return _kernel["op"]


def loaded():
    """The compiled module if this process has it already (built, or inherited from the process that forked this
    one), else None: for code that may use it but must never wait for a build."""
    return _kernel.get("op")


def _build():
    try:
        from torch.utils.cpp_extension import load_inline

        isa = torch.backends.cpu.get_cpu_capability()                  # "AVX512", "AVX2", or neither
        flags = {"AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma"],
                 "AVX2": ["-mavx2", "-mfma"]}.get(isa, [])
        return load_inline(f"playground_kernels_{isa.lower()}", cpp_sources=[f.read_text() for f in SOURCES],
                           functions=FUNCTIONS,
                           extra_cflags=["-O3", "-fno-fast-math", "-ffp-contract=off", *flags], verbose=False)
    except Exception as err:  # noqa: BLE001 - no compiler here: the Python loop serves, said once
        logging.getLogger(__name__).warning("the engine's kernels could not be built (%s): its attention, products "
                                            "and sampling run in Python and libraries", str(err).splitlines()[0][:200])
        return None


def attention(q: torch.Tensor, kv: torch.Tensor, caches: list[torch.Tensor], starts: list[int],
              lengths: list[int]) -> torch.Tensor | None:
    """Every piece's attention (see the module's docstring), or None where the kernel is not built."""
    ops = kernel()
    if ops is None or q.device.type != "cpu" or q.dtype != torch.float32:
        return None
    return ops.ragged_attention(q.contiguous(), kv.contiguous(), caches, starts, lengths)


def cpu_float(x: torch.Tensor):
    """The compiled module if `x` is a float32 CPU tensor it can take, else None."""
    ops = kernel()
    return ops if ops is not None and x.device.type == "cpu" and x.dtype == torch.float32 else None
