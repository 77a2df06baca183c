"""The batched runner (analysis/batched.py) against the interventions it stands for, done one at a time.

A patching grid and a head sweep run every intervention as a row of one pass, each row joining at its layer and, in
a causal model, computing only the positions from the first patched one on. Here every cell and every head is run
again on its own, as a whole forward pass of the model with one hook (Subject.predict), and the two must agree
within 1e-5, on our GPT and on a tiny Llama (the transformers parity of the grid is tests/test_interventions.py's).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from playground.analysis import batched, patching
from playground.analysis import interventions as iv
from playground.nets import llama as llama_net
from playground.nets.gpt import GPT, GPTConfig
from playground.nets.llama import Llama, LlamaConfig

GPT_TINY = GPTConfig(vocab_size=29, n_positions=24, n_layer=3, n_head=4, n_embd=32)
LLAMA_TINY = LlamaConfig(vocab_size=53, n_positions=64, n_layer=3, n_head=6, n_kv_head=2, n_embd=48, n_inner=80,
                         rope_theta=10_000.0)
TOL = 1e-5


def trained_like(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Weights of size ~0.3, far from an initialisation, so that a row computed at the wrong place shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(noise * 0.3 if p.dim() > 1 else 1 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)
    return model.eval()


MODELS = {"gpt": lambda: trained_like(GPT(GPT_TINY), 0), "llama": lambda: trained_like(Llama(LLAMA_TINY), 1)}


NAMES = SimpleNamespace(family="bert", tokenizer=SimpleNamespace(id_to_token=str))   # labels a sweep's top-1 token


def subject(ids: list[int]) -> iv.Subject:
    return iv.Subject(NAMES, ids, [str(i) for i in ids], len(ids) - 1, False)


def pair(vocab: int, changed: tuple[int, ...], n: int = 10) -> tuple[iv.Subject, iv.Subject]:
    clean = torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(3)).tolist()
    corrupted = list(clean)
    for t in changed:
        corrupted[t] = (clean[t] + 1 + t) % vocab
    return subject(clean), subject(corrupted)


def one_at_a_time_grid(model, clean, corrupted, site, good, bad) -> torch.Tensor:
    """Each (layer, position) patched in a whole forward pass of its own (the model's forward, one hook)."""
    L, T = len(iv.blocks(model)), len(clean.ids)
    _, kept = iv.cache(model, lambda: clean.predict(model), [(layer, site) for layer in range(L)])
    base = corrupted.predict(model)[0]
    grid = torch.zeros(L, T)
    for layer in range(L):
        for t in range(T):
            edit = iv.Edit(layer, site, torch.tensor([0]), kept[(layer, site)][0, t], pos=torch.tensor([t]))
            logits = corrupted.predict(model, hooks=iv.edit_hooks([edit]))[0]
            grid[layer, t] = (logits[good] - logits[bad]) - (base[good] - base[bad])
    return grid


@pytest.mark.parametrize("family", list(MODELS))
@pytest.mark.parametrize("site", ["resid_pre", "attn_out", "mlp_out"])
@pytest.mark.parametrize("changed", [(0,), (4, 7)])
def test_the_batched_grid_equals_the_one_at_a_time_grid(family, site, changed):
    model = MODELS[family]()
    clean, corrupted = pair(GPT_TINY.vocab_size, changed)
    with torch.inference_mode():
        grid, m_clean, m_corrupted = patching.exact_grid(model, clean, corrupted, site, 5, 7)
        expected = one_at_a_time_grid(model, clean, corrupted, site, 5, 7)
    assert torch.allclose(grid, expected, atol=TOL, rtol=0), float((grid - expected).abs().max())
    assert expected.abs().max() > 1e-2                       # something to restore
    assert torch.all(grid[:, :min(changed)] == 0)            # before the first change: nothing patched, exactly 0


@pytest.mark.parametrize("family", list(MODELS))
def test_the_rows_do_not_depend_on_how_the_passes_are_cut(family, monkeypatch):
    """The same grid whether every row rides in one pass or each layer's rows in a pass of their own."""
    model = MODELS[family]()
    clean, corrupted = pair(GPT_TINY.vocab_size, (2,))
    with torch.inference_mode():
        whole, *_ = patching.exact_grid(model, clean, corrupted, "resid_pre", 5, 7)
        monkeypatch.setattr(batched, "ROW_TOKENS", 1)
        cut, *_ = patching.exact_grid(model, clean, corrupted, "resid_pre", 5, 7)
    assert torch.allclose(whole, cut, atol=TOL, rtol=0)


@pytest.mark.parametrize("family", list(MODELS))
@pytest.mark.parametrize("how", ["zero", "mean", "resample"])
def test_the_batched_sweep_equals_each_head_ablated_on_its_own(family, how):
    model = MODELS[family]()
    s, ref = pair(GPT_TINY.vocab_size, (1, 5), n=9)
    ref = ref if how != "zero" else None
    L, H = len(iv.blocks(model)), model.config.n_head
    with torch.inference_mode():
        effects = iv.head_effects(model, s, ref, how, L, H)
        before = F.log_softmax(s.predict(model)[0], -1)
        for layer in range(L):
            for head in range(H):
                value = iv.replacement(model, s, ref, layer, "z", how)
                value = value[..., head, :] if value.dim() else value
                edit = iv.Edit(layer, "z", torch.tensor([0]), value, head=head)
                after = F.log_softmax(s.predict(model, hooks=iv.edit_hooks([edit]))[0], -1)
                kl = float((before.exp() * (before - after)).sum())
                assert abs(effects["kl"][layer][head] - kl) < TOL, (layer, head)
    assert max(max(row) for row in effects["kl"]) > 1e-3


def test_a_half_stored_llama_gives_a_row_the_same_numbers_alone_or_in_a_batch():
    """SmolLM2 is kept in fp16; a batch that starts with one row must not take that row's first blocks in fp16, nor
    a short text its whole pass: every forward of the lab (Subject.logits, the batched runs) takes its products in
    fp32 (fp32_products), so a cell computed among many rows equals the same cell computed alone, and a text of two
    tokens gives the numbers of fp32 products, where the model's own forward would multiply it in fp16."""
    model = MODELS["llama"]().half_storage()
    clean, corrupted = pair(LLAMA_TINY.vocab_size, (8,), n=10)      # the last two positions: rows of 2 tokens
    short = subject(clean.ids[:2])
    with torch.inference_mode():
        grid, *_ = patching.exact_grid(model, clean, corrupted, "mlp_out", 5, 7)
        alone = one_at_a_time_grid(model, clean, corrupted, "mlp_out", 5, 7)
        with llama_net.fp32_products():
            exact = model(short.batch())[0]
        plain, lab = model(short.batch())[0], short.logits(model)
    assert torch.allclose(grid, alone, atol=TOL, rtol=0), float((grid - alone).abs().max())
    assert torch.equal(lab, exact)
    assert (plain - exact).abs().max() > TOL   # without the switch a two-position product is fp16: it would show
