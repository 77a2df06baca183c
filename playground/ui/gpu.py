"""`@gpu`: a GPU for the duration of one call on a Hugging Face ZeroGPU Space, nothing anywhere else.

On a ZeroGPU Space the `spaces` package is installed and `spaces.GPU` attaches a GPU to the process while
the decorated function runs (CUDA is visible only inside it). Everywhere else (a CPU Space, a laptop, the
tests) the package is absent and the decorator returns the function unchanged. Only work that pays for
the GPU's attach time carries it: the live training of the memory experiment. The small shipped models
answer every other event within the budgets on a CPU.
"""

from __future__ import annotations

from typing import Callable


def gpu(duration: int = 60) -> Callable[[Callable], Callable]:
    """`spaces.GPU(duration=...)` when the `spaces` package is importable, else the identity."""
    try:
        import spaces
    except ImportError:
        return lambda fn: fn
    return spaces.GPU(duration=duration)
