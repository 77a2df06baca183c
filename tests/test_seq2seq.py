"""Encoder-decoders with and without attention (playground/nets/seq2seq.py), the number-words task, the trainer,
the shipped cards, and the Seq2seq tab through its handlers and gradio_client."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gradio_client.exceptions import AppError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground import checkpoints
from playground.nets import seq2seq as s2s
from playground.nets import seq2seq_decoding as decoding
from playground.training import seq2seq as task

TINY = dict(src_vocab_size=len(task.SRC_VOCAB), tgt_vocab_size=len(task.TGT_VOCAB), n_embd=8, hidden_size=8,
            attn_size=8, d_model=16, n_layer=2, n_head=4, d_ff=16)


def tiny(variant: str, seed: int = 0):
    torch.manual_seed(seed)
    return s2s.build_model(s2s.Seq2SeqConfig(variant=variant, **TINY)).eval()


def examples(length: int, n: int, seed: int = 0):
    rng = random.Random(seed)
    return [task.sample(length, rng, test=False) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# The task


def test_number_words_and_the_reference_translation_agree():
    assert task.number_words(342) == ["three", "hundred", "forty", "two"]
    assert task.number_words(0) == ["zero"] and task.number_words(900) == ["nine", "hundred"]
    assert task.number_words(307) == ["three", "hundred", "seven"] and task.number_words(15) == ["fifteen"]
    assert sum(len(v) for v in task.BY_WORDS.values()) == 1000 and sorted(task.BY_WORDS) == [1, 2, 3, 4]
    for n in (0, 7, 19, 20, 99, 100, 101, 999):
        words, target = task.translate([n, 5])
        assert task.reference(words) == target == f"{n},5"
    assert task.reference(["forty", "forty"]) is None


@pytest.mark.parametrize("length", [1, 2, 7, 32, 44])
def test_samples_have_the_length_asked_and_the_right_split(length):
    rng = random.Random(length)
    for test in (False, True):
        for _ in range(20):
            words, target = task.sample(length, rng, test)
            assert len(words) == length and task.is_test(words) == test
            assert task.reference(words) == target


def test_batches_pad_targets_with_minus_100_after_the_end_token():
    src, tgt_in, tgt_out = task.batch(examples(9, 6))
    assert src.shape == (6, 9)
    for b in range(6):
        n = int((tgt_out[b] != -100).sum())
        assert tgt_out[b, n - 1] == task.EOS and tgt_in[b, 0] == task.BOS
        assert torch.equal(tgt_in[b, 1:n], tgt_out[b, :n - 1])   # teacher forcing: the input is the output shifted


def test_reading_a_source_reports_what_is_outside_the_vocabulary():
    s = task.read_source("Forty-two, SEVEN")
    assert s.words == ["forty", "two", ",", "seven"] and not s.bad_chars and not s.unknown
    s = task.read_source("fourty 7 & seven")
    assert s.bad_chars == ["&", "7"]
    assert s.unknown == ["fourty"] and s.suggestions == {"fourty": "forty"}


# ---------------------------------------------------------------------------------------------
# The models


@pytest.mark.parametrize("variant", s2s.VARIANTS)
def test_internals_follow_the_one_contract_and_change_no_output(variant):
    model = tiny(variant)
    src, tgt_in, tgt_out = task.batch(examples(11, 3))
    B, T, S = 3, tgt_in.size(1), 11
    with torch.no_grad():
        plain, plain_loss = model(src, tgt_in, tgt_out)
        logits, loss, internals = model(src, tgt_in, tgt_out, return_internals=True)
    assert torch.equal(plain, logits) and torch.equal(plain_loss, loss)
    assert set(internals) == {"encoder", "decoder", "cross"}
    if variant == "transformer":
        for part, (T_q, T_k) in (("encoder", (S, S)), ("decoder", (T, T)), ("cross", (T, S))):
            assert len(internals[part]["layers"]) == 2
            for block in internals[part]["layers"]:
                assert set(block) == {"q", "k", "v", "scores", "attn"} and block["attn"].shape == (B, 4, T_q, T_k)
        return
    for part, n, steps in (("encoder", 2, S), ("decoder", 1, T)):
        assert len(internals[part]["layers"]) == n
        for layer in internals[part]["layers"]:                   # a GRU: no cell state, gates r, z, n
            assert set(layer) == {"h", "c", "gates"} and layer["c"] is None and len(layer["h"]) == steps
            assert set(layer["gates"]) == {"r", "z", "n"} and layer["gates"]["z"].shape[:2] == (B, steps)
    cross = internals["cross"]["layers"]
    assert len(cross) == (0 if variant == "none" else 1)         # no attention, no block
    for block in cross:                                           # one head
        assert block["attn"].shape == block["scores"].shape == (B, 1, T, S) and block["v"].shape == (B, 1, S, 16)
        torch.testing.assert_close(block["attn"], F.softmax(block["scores"], dim=-1))


def test_the_encoder_internals_are_those_of_the_cell_by_cell_encoder():
    """The annotations come from torch's fused kernel (faster, and the outputs do not depend on who looks);
    the states and gates reported agree with RecurrentEncoder's own cell-by-cell internals."""
    model = tiny("bahdanau")
    src = task.batch(examples(9, 2))[0]
    with torch.no_grad():
        reported = model(src, torch.full((2, 1), task.BOS), return_internals=True)[2]["encoder"]["layers"]
        _, _, reference = model.encoder(model.src_emb(src), return_internals=True)
    for ours, theirs in zip(reported, reference["layers"], strict=True):
        torch.testing.assert_close(torch.stack(ours["h"], 1), torch.stack(theirs["h"], 1))
        for gate in ("r", "z", "n"):
            torch.testing.assert_close(ours["gates"][gate], theirs["gates"][gate])


@pytest.mark.parametrize("variant", ["bahdanau", "dot", "general", "transformer"])
def test_attention_weights_sum_to_one_over_the_source(variant):
    model = tiny(variant)
    src, tgt_in, tgt_out = task.batch(examples(11, 3))
    with torch.no_grad():
        _, _, internals = model(src, tgt_in, tgt_out, return_internals=True)
    for block in internals["cross"]["layers"]:                    # (B, nh, T, S)
        attn = block["attn"]
        assert attn.shape[-2:] == (tgt_in.size(1), 11) and bool((attn >= 0).all())
        torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]))


def test_without_attention_the_decoder_sees_the_source_only_through_the_fixed_context():
    """Change every annotation h_j but not c: the fixed-context decoder's step is unchanged, Bahdanau's is not."""
    src, tgt_in, _ = task.batch(examples(13, 2))
    with torch.no_grad():
        for variant, unchanged in (("none", True), ("bahdanau", False)):
            model = tiny(variant)
            memory = model.encode(src)
            other = dict(memory, h=memory["h"].flip(1))
            if memory["keys"] is not None:
                other["keys"] = model.attention.keys(other["h"])
            y = tgt_in[:, 0]
            a = model.step(y, model.start(memory), memory)[0]
            b = model.step(y, model.start(other), other)[0]
            assert torch.equal(a, b) == unchanged, variant


def test_bahdanau_scores_follow_the_equation():
    """e_ij = v_a^T tanh(W_a s + U_a h_j), recomputed by hand for one query."""
    att = s2s.AdditiveAttention(6, 4, 5)
    s, h = torch.randn(2, 6), torch.randn(2, 7, 4)
    scores, alpha = att(s, h, att.keys(h))
    e = torch.stack([torch.stack([att.v_a.weight[0] @ torch.tanh(att.W_a.weight @ s[b] + att.U_a.weight @ h[b, j])
                                  for j in range(7)]) for b in range(2)])
    torch.testing.assert_close(scores, e)
    torch.testing.assert_close(alpha, F.softmax(e, dim=-1))
    general = s2s.MultiplicativeAttention(4, 4, general=True)
    s4 = torch.randn(2, 4)
    e = torch.einsum("bn,nk,btk->bt", s4, general.W_a.weight, h)   # s^T W_a h_j
    torch.testing.assert_close(general(s4, h, general.keys(h))[1], F.softmax(e, dim=-1))


@pytest.mark.parametrize("variant", s2s.VARIANTS)
def test_teacher_forced_loss_is_the_mean_of_the_per_step_cross_entropies(variant):
    model = tiny(variant)
    src, tgt_in, tgt_out = task.batch(examples(6, 4, seed=1) + examples(6, 1, seed=9))
    with torch.no_grad():
        _, loss = model(src, tgt_in, tgt_out)
        memory = model.encode(src)
        state = model.start(memory)
        total, count = 0.0, 0
        for i in range(tgt_in.size(1)):                            # the decoder stepped by hand
            logits, state, _ = model.step(tgt_in[:, i], state, memory)
            for b in range(src.size(0)):
                if tgt_out[b, i] != -100:
                    total += F.cross_entropy(logits[b:b + 1], tgt_out[b, i:i + 1]).item()
                    count += 1
    assert count < tgt_out.numel()                                 # some positions really were padding
    assert loss.item() == pytest.approx(total / count, rel=1e-5)


def test_the_transformer_decoder_is_causal():
    model = tiny("transformer")
    src, tgt_in, _ = task.batch(examples(8, 2))
    with torch.no_grad():
        logits, _, internals = model(src, tgt_in, return_internals=True)
        changed = tgt_in.clone()
        changed[:, 4:] = (changed[:, 4:] + 3) % len(task.TGT_VOCAB)   # change every input token from position 4 on
        logits2, _ = model(src, changed)
    torch.testing.assert_close(logits[:, :4], logits2[:, :4])
    assert (logits[:, 4:] - logits2[:, 4:]).abs().max() > 1e-4
    T = tgt_in.size(1)
    for block in internals["decoder"]["layers"]:                  # (B, nh, T, T): masked entries exactly 0
        assert bool((block["attn"][..., torch.ones(T, T, dtype=torch.bool).triu(1)] == 0).all())


@pytest.mark.parametrize("variant", ["none", "general", "transformer"])
def test_greedy_decoding_matches_the_teacher_forced_argmax(variant):
    model = tiny(variant, seed=3)
    src = task.batch(examples(5, 1))[0]
    ids, alphas = decoding.greedy(model, src, max_len=12)
    out = ids[0].tolist()
    logits, _ = model(src, torch.tensor([[task.BOS] + out[:-1]]))
    assert logits[0].argmax(-1).tolist()[:len(out)] == out
    assert len(alphas) == len(out) and (alphas[0] is None) == (variant == "none")


class Toy:
    """A fixed distribution where greedy is wrong: after <s>, token 3 has p = 0.6 but then </s> 0.2, tokens 0 and
    5 0.4 each (and </s> after them); token 4 has p = 0.4 and then </s> with certainty. Greedy: 3 5 </s> or
    3 0 </s>, p = 0.24; the best sequence is 4 </s>, p = 0.4."""

    def step(self, y, state):
        logp = torch.full((y.size(0), 6), -1e9)
        for k, (token, depth) in enumerate(zip(y.tolist(), state.tolist())):
            if depth == 0:
                logp[k, 3], logp[k, 4] = np.log(0.6), np.log(0.4)
            elif token == 3:
                logp[k, 2], logp[k, 0], logp[k, 5] = np.log(0.2), np.log(0.4), np.log(0.4)
            else:
                logp[k, 2] = 0.0
        return logp, state + 1


def test_beam_search_beats_greedy_on_a_toy_and_is_exact_when_wide():
    toy = Toy()
    (best, score), *_ = decoding.beam_search(toy.step, torch.zeros(1, dtype=torch.long), bos=1, eos=2, beam_size=2,
                                        max_len=5)
    assert best == [4, 2] and score == pytest.approx(np.log(0.4))
    greedy = decoding.beam_search(toy.step, torch.zeros(1, dtype=torch.long), bos=1, eos=2, beam_size=1, max_len=5)[0]
    assert greedy[1] == pytest.approx(np.log(0.24)) and greedy[1] < score


def test_beam_search_finds_at_least_the_greedy_probability_and_brute_force_agrees():
    model = tiny("bahdanau", seed=5)
    src = torch.tensor([[task.SRC_ID[w] for w in ["seven", ",", "two"]]])
    ids = decoding.greedy(model, src, max_len=3)[0][0].tolist()
    greedy_ids = ids[:ids.index(task.EOS) + 1] if task.EOS in ids else ids
    greedy_lp = decoding.sequence_logprob(model, src, greedy_ids)
    beams = decoding.beam_decode(model, src, beam_size=4, max_len=3)
    best, best_lp = beams[0]
    assert best_lp >= greedy_lp - 1e-5
    assert best_lp == pytest.approx(decoding.sequence_logprob(model, src, best), abs=1e-4)
    # every sequence of up to 3 tokens that ends in </s>: the wide beam's best is the true best
    V, eos = len(task.TGT_VOCAB), task.EOS
    candidates = [list(p) + [eos] for n in range(3) for p in itertools.product(
        [t for t in range(V) if t != eos], repeat=n)]
    exact = max(decoding.sequence_logprob(model, src, c) for c in candidates)
    wide = decoding.beam_decode(model, src, beam_size=V * V, max_len=3)[0][1]
    assert wide == pytest.approx(exact, abs=1e-4)


def test_a_tiny_training_run_lowers_the_loss_and_writes_a_checkpoint_with_accuracy(tmp_path):
    from playground import train

    result = train.main(["seq2seq", "--variant=dot", "--out", str(tmp_path), "--max_iters=40", "--eval_interval=20",
                         "--batch_size=16", "--max_train_len=6", "--per_bucket=4", "--eval_batches=2",
                         "--hidden_size=16", "--n_embd=8", "--learning_rate=1e-2", "--warmup_iters=5"])
    card = json.loads((tmp_path / "seq2seq-dot" / "card.json").read_text())
    history = card["history"]
    assert history[-1]["val"] < history[0]["val"] - 0.3
    assert card["command"].startswith("python -m playground.train seq2seq --variant=dot")
    acc = card["accuracy_by_length"]
    assert len(acc["accuracy"]) == len(task.BUCKETS) == len(acc["buckets"]) and result["name"] == "seq2seq-dot"
    loaded = checkpoints.load(tmp_path / "seq2seq-dot")
    assert loaded.config.variant == "dot" and loaded.config.src_vocab_size == len(task.SRC_VOCAB)
    src = task.batch(examples(3, 4))[0]
    assert loaded.model(src, torch.full((4, 1), task.BOS))[0].shape == (4, 1, len(task.TGT_VOCAB))


def test_training_refuses_a_corpus_and_an_unknown_variant(tmp_path, capsys):
    from playground import train

    with pytest.raises(SystemExit):
        train.main(["seq2seq", "--variant=maxout", "--out", str(tmp_path)])
    assert "variant" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.main(["gpt", "--out", str(tmp_path)])               # a language model still needs --corpus
    assert "--corpus" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The shipped checkpoints


SHIPPED = checkpoints.available("seq2seq")


@pytest.mark.skipif(not SHIPPED, reason="no seq2seq checkpoint shipped yet")
def test_shipped_cards_record_accuracy_by_length_and_attention_beats_the_bottleneck():
    cards = {name: checkpoints.load(name).card for name in SHIPPED}
    assert {f"seq2seq-{v}" for v in s2s.VARIANTS} <= set(cards)
    for name, card in cards.items():
        task.check_vocab(card)
        acc = card["accuracy_by_length"]
        assert acc["buckets"] == [list(b) for b in task.BUCKETS] and len(acc["accuracy"]) == len(task.BUCKETS)
        assert all(0 <= a <= 1 for a in acc["accuracy"]) and card["command"].startswith("python -m playground.train")
        assert (checkpoints.MODELS_DIR / name / "model.safetensors").stat().st_size < 10 * 2**20
    acc = {name: card["accuracy_by_length"]["accuracy"] for name, card in cards.items()}
    trained = [i for i, (lo, hi) in enumerate(task.BUCKETS) if hi <= task.MAX_TRAIN_LEN]
    assert acc["seq2seq-none"][trained[0]] - acc["seq2seq-none"][trained[-1]] > 0.5   # the bottleneck
    longer = [i for i in trained if task.BUCKETS[i][0] > 8]         # 9 to 32 words
    mean = lambda name: np.mean([acc[name][i] for i in longer])    # noqa: E731
    for attention in ("seq2seq-bahdanau", "seq2seq-dot", "seq2seq-general"):
        assert mean(attention) > mean("seq2seq-none") + 0.2, attention


# ---------------------------------------------------------------------------------------------
# The tab: handlers and the app


needs_models = pytest.mark.skipif(not {"seq2seq-bahdanau", "seq2seq-none", "seq2seq-transformer"} <= set(SHIPPED),
                                  reason="the seq2seq checkpoints are not shipped")


@needs_models
def test_bad_input_messages_name_the_problem():
    import gradio as gr

    from playground.ui import seq2seq_tab as tab

    with pytest.raises(gr.Error, match="Characters outside the task's vocabulary: '3', '4'"):
        tab.translate("34 and seven")
    with pytest.raises(gr.Error, match="'fourty' \\(did you mean 'forty'\\?\\)"):
        tab.translate("fourty two")
    with pytest.raises(gr.Error, match="Type numbers in words"):
        tab.translate("   ")
    with pytest.raises(gr.Error, match="Unknown model"):
        tab.translate("seven", "maxout")


@needs_models
def test_longer_than_trained_is_translated_with_a_warning():
    from playground.ui import seq2seq_tab as tab

    long = " , ".join(["seven"] * 20)                              # 39 words
    data = tab.translate(long, "bahdanau")[-1]
    assert any("longer than any training source" in n for n in data["notices"])
    assert np.array(data["alignment"]).shape == (len(data["output_tokens"]), 39)


@needs_models
def test_the_step_handler_and_the_comparison():
    from playground.ui import seq2seq_tab as tab

    out = tab.translate("three hundred seven , twelve", "dot")
    state, data = out[4], out[-1]
    heat, step_fig, step_data = tab.decoder_step(state, 2)
    assert step_data["token"] == data["output_tokens"][2] and sum(step_data["weights"]) == pytest.approx(1, abs=1e-4)
    fig, cmp = tab.compare("three hundred seven , twelve", "bahdanau", 1)
    cross = np.array(cmp["transformer"]["cross_attention"])
    assert cross.shape[0] == cmp["transformer"]["heads"] and cross.shape[2] == 5
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-3)
    assert len(fig.data) == 1 + cross.shape[0]


@needs_models
def test_the_first_step_says_it_follows_the_start_token_not_empty_quotes():
    """Issue #32: step 0's title read 'emits “3” after “”'."""
    from playground.ui import seq2seq_tab as tab

    state = tab.translate("three hundred seven , twelve", "bahdanau")[4]
    titles = [tab.decoder_step(state, i)[1].layout.title.text for i in range(len(state["tokens"]))]
    assert "after the start token ‹s›" in titles[0] and all("“”" not in t for t in titles)
    assert "after “307”" in titles[3]


@needs_models
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.none(), st.text(max_size=60), st.lists(st.sampled_from(task.SRC_VOCAB[1:] + ["fourty", ""]),
                                                                max_size=80).map(" ".join)),
       model=st.sampled_from(["none", "bahdanau", "dot", "general", "transformer", "bogus"]),
       beam=st.one_of(st.integers(-2, 12), st.floats(allow_nan=True), st.text(max_size=3)))
def test_any_input_gives_a_translation_or_a_clear_error(text, model, beam):
    import gradio as gr

    from playground.ui import seq2seq_tab as tab

    try:
        data = tab.translate(text, model, beam)[-1]
    except gr.Error as err:
        assert str(err.message).strip()
        return
    assert data["output_tokens"] and len(data["source_tokens"]) <= task.MAX_SOURCE_LEN
    if data["alignment"] is not None:
        np.testing.assert_allclose(np.array(data["alignment"]).sum(1), 1.0, atol=1e-4)


@needs_models
def test_seq2seq_endpoint_returns_output_and_alignment(client):
    api = client.view_api(return_format="dict", print_info=False)
    assert {"/seq2seq", "/seq2seq_step", "/seq2seq_compare", "/seq2seq_bottleneck",
            "/seq2seq_evaluate"} <= set(api["named_endpoints"])
    *_, data = client.predict("three hundred forty two , seven", "bahdanau", api_name="/seq2seq")
    assert data["source_tokens"] == ["three", "hundred", "forty", "two", ",", "seven"]
    A = np.array(data["alignment"])
    assert A.shape == (len(data["output_tokens"]), 6) and data["output"] == "".join(data["output_tokens"][:-1])
    np.testing.assert_allclose(A.sum(1), 1.0, atol=1e-4)
    none = client.predict("three hundred forty two , seven", "none", api_name="/seq2seq")[-1]
    assert none["alignment"] is None and none["output"]
    with pytest.raises(AppError, match="Characters outside the task's vocabulary"):
        client.predict("342, 7", "bahdanau", api_name="/seq2seq")


@needs_models
def test_bottleneck_and_quick_evaluation_endpoints(client):
    plot, data = client.predict(api_name="/seq2seq_bottleneck")
    assert set(data["models"]) >= {"none", "bahdanau", "transformer"}
    plot, fresh = client.predict(5, 0, api_name="/seq2seq_evaluate")
    from playground.analysis.seq2seq import EVAL_LENGTHS

    for series in fresh["models"].values():
        assert series["length"] == EVAL_LENGTHS and all(0 <= a <= 1 for a in series["accuracy"])


# ---------------------------------------------------------------------------------------------
# The tab's analysis (playground/analysis/seq2seq.py), on tiny models


@pytest.mark.parametrize("variant", s2s.VARIANTS)
def test_the_translation_data_holds_one_alignment_row_per_output_token(variant):
    from playground.analysis import seq2seq as an

    words = ["three", "hundred", "seven", ",", "twelve"]
    ids = [task.SRC_ID[w] for w in words]
    data, arrays = an.translate(tiny(variant), variant, words, ids, beam=2, notices=[])
    assert json.loads(json.dumps(data)) == data and data["reference"] == "307,12" and data["decoding"] == "beam 2"
    assert data["output_tokens"] == arrays["tokens"] and data["output"] == task.decode_target(
        [task.TGT_ID[t] for t in arrays["tokens"]])
    if variant == "none":
        assert data["alignment"] is None and arrays["alpha"] is None
    else:
        A = np.array(data["alignment"])
        assert A.shape == (len(data["output_tokens"]), len(words))
        np.testing.assert_allclose(A.sum(1), 1.0, atol=1e-4)
        step = an.decoder_step(words, arrays["tokens"], data["alignment"], 0)
        assert step["weights"] == data["alignment"][0] and step["token"] == data["output_tokens"][0]
