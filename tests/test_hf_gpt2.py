"""Parity with `transformers.GPT2LMHeadModel`, both directions, on a tiny random GPT-2: same logits
and same attention probabilities to 1e-5; and loading a GPT-2 saved to a local directory."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

transformers = pytest.importorskip("transformers")

from playground.nets import hf  # noqa: E402
from playground.nets.gpt import GPT, GPTConfig  # noqa: E402


@pytest.fixture(scope="module")
def gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=37, n_positions=24, n_embd=32, n_layer=3, n_head=4,
                                     bos_token_id=None, eos_token_id=None, attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # random LayerNorm and biases too, so a swapped or missing tensor shows
        for name, p in model.named_parameters():
            if name.endswith("bias") or "ln_" in name:
                p.normal_(0.0 if name.endswith("bias") else 1.0, 0.1)
    return model


def idx():
    return torch.randint(0, 37, (2, 20), generator=torch.Generator().manual_seed(3))


def assert_same(ours: GPT, theirs):
    x = idx()
    with torch.no_grad():
        out = theirs(x, output_attentions=True)
        logits, _, internals = ours(x, return_internals=True)
        fast, _ = ours(x)
    torch.testing.assert_close(logits, out.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, out.logits, atol=1e-5, rtol=1e-5)
    assert len(out.attentions) == len(internals["layers"])
    for layer, theirs_att in zip(internals["layers"], out.attentions):
        torch.testing.assert_close(layer["attn"], theirs_att, atol=1e-5, rtol=1e-5)


def test_gpt2_to_ours(gpt2):
    ours = hf.gpt_from_gpt2(gpt2)
    assert ours.config.n_layer == 3 and ours.config.n_positions == 24
    assert_same(ours, gpt2)


@pytest.mark.parametrize("gelu", ["tanh", "none"])
def test_ours_to_gpt2(gelu):
    torch.manual_seed(1)
    ours = GPT(GPTConfig(vocab_size=37, n_positions=24, n_layer=2, n_head=4, n_embd=32, gelu_approximate=gelu)).eval()
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.1)
    theirs = hf.gpt_to_gpt2(ours)
    assert hf.gpt_config_from_gpt2(theirs.config) == ours.config  # and back
    theirs.config._attn_implementation = "eager"  # transformers returns attentions from the eager path
    assert_same(ours, theirs)


def test_load_gpt2_from_a_local_directory(gpt2, tmp_path):
    gpt2.save_pretrained(tmp_path)
    ours, tokenizer = hf.load_gpt2(tmp_path)
    assert tokenizer is None  # the directory has weights only
    assert_same(ours, gpt2)


def test_unsupported_gpt2_variant_is_refused():
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4, activation_function="relu")
    with pytest.raises(ValueError, match="activation_function"):
        hf.gpt_config_from_gpt2(config)
