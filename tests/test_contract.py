"""The family contract over every checkpoint kind (docs/architecture.md, "The introspection contract"): the keys and
shapes of `forward(..., return_internals=True)` per family, and, for every causal language model, that `step` on
several rows at once (one per beam), with `reorder_cache` between steps, gives each row the logits `forward` gives
that row's sequence. Tiny models built here, no shipped file."""

import inspect
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from playground import checkpoints
from playground.analysis import sampling
from playground.nets import adapters, bert, elmo, fasttext, glove, gpt, llama, ngram, recurrent, seq2seq, word2vec

B, T, V = 3, 6, 11
ATTENTION_KEYS = {"q", "k", "v", "scores", "attn"}
RECURRENT_KEYS = {"h", "c", "gates"}
GATES = {"rnn": {"a"}, "lstm": {"i", "f", "g", "o"}, "gru": {"r", "z", "n"}}


def _ids(seed: int, shape=(B, T), vocab: int = V) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def tiny_gpt() -> gpt.GPT:
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=V, n_positions=16, n_layer=2, n_head=2, n_embd=16)).eval()


def tiny_llama() -> llama.Llama:
    torch.manual_seed(0)
    return llama.Llama(llama.LlamaConfig(vocab_size=V, n_positions=16, n_layer=2, n_head=4, n_kv_head=2, n_embd=16,
                                         n_inner=24)).eval()


def tiny_recurrent(cell: str) -> recurrent.RecurrentLM:
    torch.manual_seed(0)
    return recurrent.RecurrentLM(recurrent.RecurrentConfig(cell=cell, vocab_size=V, n_embd=8, hidden_size=12,
                                                           num_layers=2)).eval()


def tiny_lora_gpt() -> torch.nn.Module:
    """A LoRA-adapted GPT, as kind lora-adapter loads one, with B drawn (B = 0 would compute the base exactly)."""
    model = adapters.adapt(tiny_gpt(), adapters.AdapterConfig(base=adapters.GPT, targets="c_attn"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".B"):
                p.normal_(0, 0.1, generator=torch.Generator().manual_seed(1))
    return model


def tiny_ngram(smoothing: str = "kneser-ney") -> ngram.NGramLM:
    text = _ids(7, (400,), vocab=5).numpy()
    return ngram.NGramLM(ngram.NGramConfig(vocab_size=5, n=3, smoothing=smoothing, k=0.1), ngram.count(text, 3, 5))


def tiny_bert(nsp: bool = True) -> bert.BertForPreTraining:
    torch.manual_seed(0)
    config = bert.BertConfig(vocab_size=V, n_positions=16, n_layer=2, n_head=2, n_embd=16, n_inner=32, dropout=0.0)
    return bert.BertForPreTraining(config, nsp=nsp).eval()


# ---------------------------------------------------------------------------------------------
# return_internals, per family


def check_attention_layer(layer: dict, nh: int, T_q: int, T_k: int, d: int, allowed: torch.Tensor | None):
    """One attention block: q (B, nh, T_q, d), k, v (B, nh, T_k, d); scores = q k^T / sqrt(d) before the mask
    (finite everywhere, also where the mask will act); attn = softmax of the masked scores, exactly 0 where
    `allowed` (broadcastable to (B, nh, T_q, T_k)) is False, rows summing to 1."""
    assert set(layer) == ATTENTION_KEYS
    Bq = layer["q"].size(0)
    assert layer["q"].shape == (Bq, nh, T_q, d)
    assert layer["k"].shape == layer["v"].shape == (Bq, nh, T_k, d)
    assert layer["scores"].shape == layer["attn"].shape == (Bq, nh, T_q, T_k)
    scores = layer["q"] @ layer["k"].transpose(-2, -1) / math.sqrt(d)
    torch.testing.assert_close(layer["scores"], scores, rtol=1e-5, atol=1e-5)   # before the mask, unmasked
    assert torch.isfinite(layer["scores"]).all()
    masked = layer["scores"] if allowed is None else layer["scores"].masked_fill(~allowed, float("-inf"))
    torch.testing.assert_close(layer["attn"], F.softmax(masked, dim=-1))
    if allowed is not None:
        assert (layer["attn"].masked_select(~allowed.expand_as(layer["attn"])) == 0).all()
    torch.testing.assert_close(layer["attn"].sum(-1), torch.ones(layer["attn"].shape[:-1]))


def check_recurrent_layer(layer: dict, cell: str, T_: int, H: int, Bq: int = B):
    """One (layer, direction): "h" the T tensors h_t (B, H), "c" the LSTM's T cell states (None otherwise),
    "gates" by name, each (B, T, H)."""
    assert set(layer) == RECURRENT_KEYS
    assert len(layer["h"]) == T_ and all(h.shape == (Bq, H) for h in layer["h"])
    if cell == "lstm":
        assert len(layer["c"]) == T_ and all(c.shape == (Bq, H) for c in layer["c"])
    else:
        assert layer["c"] is None
    assert set(layer["gates"]) == GATES[cell]
    assert all(g.shape == (Bq, T_, H) for g in layer["gates"].values())


def check_hidden(internals: dict, n_layer: int, C: int) -> list[torch.Tensor]:
    """The stream after each layer, one name on every family that has one: "hidden", n_layer + 1 tensors (B, T, C),
    after the embedding and after each layer."""
    hidden = internals["hidden"]
    assert len(hidden) == n_layer + 1
    assert all(h.shape == (B, T, C) for h in hidden), [tuple(h.shape) for h in hidden]
    return hidden


def causal(T_: int) -> torch.Tensor:
    return torch.ones(T_, T_, dtype=torch.bool).tril()


def internals_gpt(model=None):
    model = model or tiny_gpt()
    c = model.config
    idx = _ids(1)
    logits, loss, internals = model(idx, idx, return_internals=True)
    assert set(internals) == {"layers", "hidden"}
    assert len(internals["layers"]) == c.n_layer
    for layer in internals["layers"]:
        check_attention_layer(layer, c.n_head, T, T, c.n_embd // c.n_head, causal(T))
    hidden = check_hidden(internals, c.n_layer, c.n_embd)
    torch.testing.assert_close(model.unembed(hidden[-1]), logits)   # the last entry is what the head reads
    torch.testing.assert_close(model(idx)[0], logits, rtol=1e-4, atol=1e-5)   # the fast path: the same numbers


def internals_llama():
    model = tiny_llama()
    c = model.config
    idx = _ids(2)
    logits, loss, internals = model(idx, return_internals=True)
    assert set(internals) == {"layers", "hidden", "kv_groups"}
    assert internals["kv_groups"] == [h // (c.n_head // c.n_kv_head) for h in range(c.n_head)]
    assert len(internals["layers"]) == c.n_layer
    for layer in internals["layers"]:
        check_attention_layer(layer, c.n_head, T, T, c.head_dim, causal(T))   # k, v repeated per query head
        for h, g in enumerate(internals["kv_groups"]):   # the query heads of one group read the same keys
            torch.testing.assert_close(layer["k"][:, h], layer["k"][:, internals["kv_groups"].index(g)])
    hidden = check_hidden(internals, c.n_layer, c.n_embd)
    torch.testing.assert_close(model.unembed(hidden[-1]), logits)
    torch.testing.assert_close(model(idx)[0], logits, rtol=1e-4, atol=1e-5)


def internals_bert(nsp: bool = True):
    model = tiny_bert(nsp)
    c = model.config
    idx = _ids(3)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 4:] = 0                                     # padding in row 1: its keys get weight 0, scores kept
    logits, loss, internals = model(idx, attention_mask=mask, return_internals=True)
    assert set(internals) == {"layers", "hidden", "nsp_logits"}
    assert (internals["nsp_logits"] is None) == (not nsp)
    if nsp:
        assert internals["nsp_logits"].shape == (B, 2)
    assert len(internals["layers"]) == c.n_layer
    for layer in internals["layers"]:
        check_attention_layer(layer, c.n_head, T, T, c.n_embd // c.n_head, mask.bool()[:, None, None, :])
    hidden = check_hidden(internals, c.n_layer, c.n_embd)
    torch.testing.assert_close(model.mlm(hidden[-1], model.bert.embeddings.tok.weight), logits)


def internals_classifier():
    """A MiniLM classifier's internals are its encoder's (the BERT contract), and its logits the head on the pooled
    last hidden state. (The recurrent classifiers read word by word through `return_steps`: tests/test_classify.py.)"""
    from playground.nets.classifier import ClassifierConfig, TransferClassifier

    encoder = tiny_bert(nsp=False).bert
    c = encoder.config
    for pooling in ("cls", "mean"):
        model = TransferClassifier(encoder, ClassifierConfig(method=f"probe-{pooling}", pooling=pooling)).eval()
        mask = torch.ones(B, T, dtype=torch.long)
        mask[1, 4:] = 0
        logits, internals = model(_ids(3), attention_mask=mask, return_internals=True)
        assert logits.shape == (B, 5) and len(internals["layers"]) == c.n_layer
        for layer in internals["layers"]:
            check_attention_layer(layer, c.n_head, T, T, c.n_embd // c.n_head, mask.bool()[:, None, None, :])
        hidden = check_hidden(internals, c.n_layer, c.n_embd)
        torch.testing.assert_close(model.head(model.pool(hidden[-1], mask)), logits)


def internals_recurrent(cell: str):
    model = tiny_recurrent(cell)
    c = model.config
    idx = _ids(4)
    logits, loss, internals = model(idx, idx, return_internals=True)
    assert set(internals) == {"layers"}
    assert len(internals["layers"]) == c.num_layers   # one per (layer, direction): index l*D + d, D = 1 here
    for layer in internals["layers"]:
        check_recurrent_layer(layer, cell, T, c.hidden_size)
    top = torch.stack(internals["layers"][-1]["h"], dim=1)              # (B, T, H): the states the head reads
    torch.testing.assert_close(model.lm_head(top), logits)
    torch.testing.assert_close(model(idx)[0], logits, rtol=1e-4, atol=1e-5)   # the fused kernel: the same numbers


def internals_elmo():
    torch.manual_seed(0)
    model = elmo.ELMo(elmo.ELMoConfig(vocab_size=V, n_embd=8, n_layer=2)).eval()
    C, L = 8, 2
    idx = _ids(5)
    (logits_f, logits_b), loss, internals = model(idx, return_internals=True)
    assert set(internals) == {"layers", "hidden"}
    assert len(internals["layers"]) == 2 * L                           # index 2(j - 1) + d, d = 1 backward
    for layer in internals["layers"]:
        check_recurrent_layer(layer, "lstm", T, C)
    hidden = check_hidden(internals, L, 2 * C)                         # the stream's width: [→h; ←h], 2C
    x = model.wte(idx)
    torch.testing.assert_close(hidden[0], torch.cat([x, x], -1))        # layer 0: [x_k; x_k]
    # layer 1's forward states are the forward half of hidden[1]; the backward ones in the tokens' order
    torch.testing.assert_close(torch.stack(internals["layers"][0]["h"], 1), hidden[1][..., :C])
    torch.testing.assert_close(torch.stack(internals["layers"][1]["h"], 1), hidden[1][..., C:])
    torch.testing.assert_close(model._softmax_logits(hidden[-1][..., :C]), logits_f)   # the top layer: what the
    torch.testing.assert_close(model._softmax_logits(hidden[-1][..., C:]), logits_b)   # shared softmax reads
    _, _, with_targets = model(idx[:, :-1], idx[:, 1:], return_internals=True)
    assert set(with_targets) == {"layers", "hidden", "loss_fwd", "loss_bwd"}
    assert len(with_targets["hidden"]) == L + 1 and all(h.shape == (B, T - 1, 2 * C) for h in with_targets["hidden"])


@pytest.mark.parametrize("variant", seq2seq.VARIANTS)
def test_seq2seq_internals(variant):
    torch.manual_seed(0)
    c = seq2seq.Seq2SeqConfig(variant=variant, src_vocab_size=9, tgt_vocab_size=10, n_embd=8, hidden_size=6,
                              attn_size=5, d_model=16, n_layer=2, n_head=2, d_ff=32, max_len=16)
    model = seq2seq.build_model(c).eval()
    S, T_out = 5, 4
    src, tgt = _ids(6, (B, S), 9), _ids(7, (B, T_out), 10)
    logits, loss, internals = model(src, tgt, return_internals=True)
    assert set(internals) == {"encoder", "decoder", "cross"}
    assert all(set(part) == {"layers"} for part in internals.values())
    if variant == "transformer":
        d = c.d_model // c.n_head
        for part, (T_q, T_k, allowed) in {"encoder": (S, S, None), "decoder": (T_out, T_out, causal(T_out)),
                                          "cross": (T_out, S, None)}.items():
            assert len(internals[part]["layers"]) == c.n_layer
            for layer in internals[part]["layers"]:
                check_attention_layer(layer, c.n_head, T_q, T_k, d, allowed)
        return
    H = c.hidden_size
    assert len(internals["encoder"]["layers"]) == 2                     # the bidirectional GRU: forward, backward
    for layer in internals["encoder"]["layers"]:
        check_recurrent_layer(layer, "gru", S, H)
    (decoder,) = internals["decoder"]["layers"]
    check_recurrent_layer(decoder, "gru", T_out, 2 * H)
    cross = internals["cross"]["layers"]
    assert len(cross) == (0 if variant == "none" else 1)
    for layer in cross:                                                 # one head: the score function
        assert set(layer) == ATTENTION_KEYS
        assert layer["scores"].shape == layer["attn"].shape == (B, 1, T_out, S)
        assert layer["v"].shape == (B, 1, S, 2 * H)
        torch.testing.assert_close(layer["attn"], F.softmax(layer["scores"], -1))


NO_INTERNALS = {"tokenizer": None, "vocabulary": None, "word2vec": word2vec.Word2Vec, "glove": glove.GloVeVectors,
                "fasttext": fasttext.FastText, "ngram": ngram.NGramLM}
INTERNALS = {
    "gpt": internals_gpt, "lora-adapter": lambda: internals_gpt(tiny_lora_gpt()),
    "rnn": lambda: internals_recurrent("rnn"), "lstm": lambda: internals_recurrent("lstm"),
    "gru": lambda: internals_recurrent("gru"),
    "bert": internals_bert, "minilm-mlm": lambda: internals_bert(nsp=False),   # minilm-mlm: a BERT without NSP
    "elmo": internals_elmo, "seq2seq": lambda: None,                     # seq2seq: test_seq2seq_internals
    "classifier": internals_classifier,
}


def test_every_kind_is_in_the_contract():
    assert set(INTERNALS) | set(NO_INTERNALS) == set(checkpoints.KINDS)
    assert not set(INTERNALS) & set(NO_INTERNALS)


@pytest.mark.parametrize("kind", sorted(INTERNALS))
def test_return_internals_keys_and_shapes(kind):
    with torch.no_grad():
        INTERNALS[kind]()


def test_llama_internals():   # not a checkpoint kind of its own (SmolLM2 loads it), the same contract
    with torch.no_grad():
        internals_llama()


class Letters:  # a tokenizer as the logit lens reads one
    pre_tokenizer = None

    def id_to_token(self, i):
        return chr(65 + i)


def test_the_logit_lens_reads_every_net_with_hidden_and_an_output_layer():
    """The lens reads internals["hidden"] through `unembed`: every causal Transformer LM, whatever its family."""
    from playground.analysis import generation

    for model in (tiny_gpt(), tiny_lora_gpt(), tiny_llama()):
        assert generation.has_logit_lens(model)
        data = generation.logit_lens(model, Letters(), _ids(8)[0].tolist(), [])
        assert len(data["layers"]) == len(data["top_token"]) == model.config.n_layer + 1
        assert data["top_token"][-1] == data["final_token"]              # the last layer is the model's own choice
    for model in (tiny_recurrent("lstm"), tiny_ngram(), tiny_bert()):     # no stream, or no causal output layer
        assert not generation.has_logit_lens(model)


@pytest.mark.parametrize("kind", sorted(k for k, cls in NO_INTERNALS.items() if cls is not None))
def test_kinds_without_internals_do_not_take_the_flag(kind):
    assert "return_internals" not in inspect.signature(NO_INTERNALS[kind].forward).parameters


# ---------------------------------------------------------------------------------------------
# step on B > 1 rows, with reorder_cache, equals forward row by row

CAUSAL = {"gpt": tiny_gpt, "llama": tiny_llama, "lora-adapter": tiny_lora_gpt,
          "rnn": lambda: tiny_recurrent("rnn"), "lstm": lambda: tiny_recurrent("lstm"),
          "gru": lambda: tiny_recurrent("gru"), "ngram": tiny_ngram, "ngram-add-k": lambda: tiny_ngram("add-k")}


@pytest.mark.parametrize("kind", sorted(CAUSAL))
@torch.no_grad()
def test_step_on_a_batch_with_reorder_equals_forward_row_by_row(kind):
    """Beam search's use of `step`: a prompt of B different rows, then one token per row at a time, the rows
    reordered (some duplicated, some dropped) between steps; each row's logits must be forward's for the
    sequence that row now holds. The n-gram once read row 0 only."""
    model = CAUSAL[kind]()
    vocab = 5 if kind.startswith("ngram") else V
    seen = _ids(8, (B, 4), vocab)
    logits, cache = model.step(seen)
    assert logits.shape == (B, 4, vocab), f"{kind}: step must answer every row of the batch, not {logits.shape}"
    pieces = [logits]
    orders = [torch.tensor([2, 0, 0]), torch.tensor([1, 1, 2]), torch.tensor([0, 1, 2]), torch.tensor([2, 2, 1])]
    for i, index in enumerate(orders):
        seen, pieces = seen[index], [p[index] for p in pieces]
        reorder = getattr(model, "reorder_cache", None)
        assert reorder is not None, f"{kind} has no reorder_cache: beam search would re-read every prefix"
        cache = reorder(cache, index)
        new = _ids(20 + i, (B, 1), vocab)
        logits, cache = model.step(new, cache)
        seen = torch.cat([seen, new], dim=1)
        pieces.append(logits)
    stepped = torch.cat(pieces, dim=1)                                  # (B, T_seen, V)
    full = model(seen)[0]
    assert stepped.shape == full.shape
    for b in range(B):
        torch.testing.assert_close(stepped[b], full[b], rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"{kind}, row {b}: step differs from forward\n{m}")


@pytest.mark.parametrize("kind", sorted(CAUSAL))
@torch.no_grad()
def test_beam_search_reports_forwards_log_p_for_every_beam(kind):
    model = CAUSAL[kind]()
    vocab = 5 if kind.startswith("ngram") else V
    prompt = _ids(9, (1, 3), vocab)
    _, best, beams = sampling.beam_search(model, prompt, 5, beam_width=3)
    assert len(beams) == 3 and best == beams[0][1]
    for ids, reported in beams:
        logp = F.log_softmax(model(ids[None])[0][0, :-1].double(), -1).gather(-1, ids[1:, None])[:, 0]
        assert reported == pytest.approx(float(logp[prompt.size(1) - 1:].sum()), abs=1e-4), kind
    assert np.all(np.diff([s for _, s in beams]) <= 0)                 # best first
