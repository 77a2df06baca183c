"""Masked-LM fill-in: parity with transformers' FillMaskPipeline on a tiny random BERT, the rules for
odd input (several masks, glued punctuation, no mask, long text, top_k), click-to-mask, the "How BERT
was trained" panel, the tab's handlers on a tiny model, and the endpoints of the launched app."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import random

import numpy as np
import pytest
import torch

from playground.analysis import fill_mask as core
from playground.training import tokenizers
from playground.nets.bert import BertConfig, BertForPreTraining
from playground.checkpoints import Checkpoint

WORDS = "the cat sat on a mat dog ran to house and big small red tree under over quickly unbelievable".split()


@pytest.fixture(scope="module")
def tok():
    rng = random.Random(0)
    texts = [" ".join(rng.choice(WORDS) for _ in range(8)) + rng.choice(".,!") for _ in range(300)]
    return tokenizers.train("wordpiece", texts, 120)


def tiny_model(vocab_size: int, nsp: bool = True, n_positions: int = 32) -> BertForPreTraining:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab_size, n_positions=n_positions, n_layer=2, n_head=2, n_embd=32, n_inner=64,
                        dropout=0.0)
    model = BertForPreTraining(config, nsp=nsp).eval()
    with torch.no_grad():  # larger random weights: peaked distributions, so a wrong position would show
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok.get_vocab_size())


def hf_pipeline(model, tok):
    """transformers' own FillMaskPipeline on our weights (converted with playground.nets.hf) and our vocabulary."""
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import FillMaskPipeline, PreTrainedTokenizerFast

    from playground.nets import hf

    t = Tokenizer.from_str(tok.to_str())
    t.post_processor = TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                          special_tokens=[(s, tok.token_to_id(s)) for s in ("[CLS]", "[SEP]")])
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=t, mask_token="[MASK]", cls_token="[CLS]", sep_token="[SEP]",
                                     pad_token="[PAD]", unk_token="[UNK]")
    return FillMaskPipeline(model=hf.bert_to_hf(model), tokenizer=hf_tok)


# ---------------------------------------------------------------------------------------------
# The core


@pytest.mark.parametrize("text", ["the cat sat on the [MASK].", "[MASK] dog ran, to the [MASK] house!",
                                  "a big[MASK] tree under the [MASK], [MASK] and small"])
def test_same_answer_as_the_transformers_pipeline(model, tok, text):
    pipe = hf_pipeline(model, tok)
    theirs, ours = pipe(text, top_k=6), core.fill_mask(model, tok, text, 6)
    n_masks = text.count("[MASK]")
    if n_masks == 1:
        theirs, ours = [theirs], [ours]
    assert len(ours) == len(theirs) == n_masks
    for a, b in zip(ours, theirs):
        assert [r["token"] for r in a] == [r["token"] for r in b]
        assert [r["token_str"] for r in a] == [r["token_str"] for r in b]
        assert [r["sequence"] for r in a] == [r["sequence"] for r in b]
        np.testing.assert_allclose([r["score"] for r in a], [r["score"] for r in b], atol=1e-5)
        assert set(a[0]) == {"score", "token", "token_str", "sequence"}


def test_several_masks_are_each_predicted_from_the_same_input(model, tok):
    text = "the [MASK] sat on the [MASK]."
    both = core.fill_mask(model, tok, text, 3)
    assert len(both) == 2 and all(len(row) == 3 for row in both)
    # the sequence of mask 1 keeps mask 2 hidden, and the other way round (the pipeline's format)
    assert all("[MASK]" in r["sequence"] and "[CLS]" in r["sequence"] for row in both for r in row)
    # the first mask's scores are those of one forward pass on the text with both masks
    ids = core.encode(tok, text, 32)[0].ids
    with torch.inference_mode():
        p = model(torch.tensor([ids]))[0][0, ids.index(tok.token_to_id("[MASK]"))].softmax(-1)
    assert both[0][0]["score"] == pytest.approx(float(p.max()), abs=1e-6)
    ten = core.fill_mask(model, tok, " ".join(["[MASK]"] * 10), 2)
    assert len(ten) == 10
    assert core.predict(model, tok, "[MASK] " * 10, 2, max_masks=4).scores.shape == (4, 2)


def test_glued_punctuation_and_other_spellings_of_the_mask(model, tok):
    for text in ("the [MASK].", "[MASK], the cat", "the[MASK]cat", "the [mask].", "the <mask>.", "the [ Mask ]."):
        _, masks, _ = core.encode(tok, text, 32)
        assert len(masks) == 1, text
    assert core.encode(tok, "the [MASK].", 32)[0].ids == core.encode(tok, "the [mask].", 32)[0].ids
    assert core.normalise_masks("a [mask] b <MASK> c [MASK]") == ("a [MASK] b [MASK] c [MASK]", 2)
    seq = core.fill_mask(model, tok, "the [MASK].", 1)[0]["sequence"]
    assert seq.endswith(".") and not seq.endswith(" .")  # the decoder glues punctuation back


def test_no_mask_is_a_clear_message_that_offers_to_mask_a_word(model, tok):
    with pytest.raises(core.FillMaskError, match="click a word to mask it"):
        core.fill_mask(model, tok, "the cat sat on the mat.", 5)
    with pytest.raises(core.FillMaskError, match="no \\[MASK\\]"):
        core.fill_mask(model, tok, "", 5)


def test_long_text_is_cut_around_the_masks_with_a_notice(model, tok):
    long = "the cat sat on the mat " * 20 + "the [MASK] ran " + "to the house " * 20   # ~150 tokens, 32 positions
    notices: list[str] = []
    out = core.fill_mask(model, tok, long, 3, notices=notices)
    assert len(out) == 3 and any("reads at most 30" in n for n in notices)
    enc, masks, _ = core.encode(tok, long, 32)
    assert len(enc.ids) == 32 and len(masks) == 1 and 8 <= masks[0] <= 24  # centred, not at an edge
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]" and enc.n_cut == len(tok.encode(long, add_special_tokens=False).ids) - 30
    far = "[MASK] " + "the cat sat " * 30 + "[MASK]"
    notices = []
    assert len(core.fill_mask(model, tok, far, 2, notices=notices)) == 2  # the first mask; one list
    assert any("1 of the 2 masks lie beyond that window" in n for n in notices)


def test_top_k_above_the_vocabulary_is_clamped(model, tok):
    notices: list[str] = []
    out = core.fill_mask(model, tok, "the [MASK].", 10_000, notices=notices)
    V = model.config.vocab_size
    assert len(out) == V and any("larger than the vocabulary" in n for n in notices)
    assert sum(r["score"] for r in out) == pytest.approx(1.0, abs=1e-4)


def test_click_to_mask():
    text = "The cat sat on the mat, quickly."
    units = core.words(text)
    assert [u[2] for u in units] == ["The", "cat", "sat", "on", "the", "mat", ",", "quickly", "."]
    assert core.mask_word(text, 1) == "The [MASK] sat on the mat, quickly."
    assert core.mask_word(text, 6) == "The cat sat on the mat[MASK] quickly."
    masked = core.mask_word(text, 5)
    assert masked == "The cat sat on the [MASK], quickly."
    assert core.words(masked)[5][2] == "[MASK]" and core.mask_word(masked, 5) == masked  # a mask stays a mask
    assert core.mask_word(text, 99) == text and core.mask_word(text, -1) == text


# ---------------------------------------------------------------------------------------------
# How BERT was trained


def test_masking_demo_follows_bert_and_the_rates_come_close(tok):
    text = "the cat sat on the unbelievable mat and the dog ran to the big red house quickly"
    demo = core.masking_demo(tok, text, seed=3)
    T = len(demo["tokens"])
    assert demo["tokens"][0] == "[CLS]" and demo["tokens"][-1] == "[SEP]" and len(demo["action"]) == T
    assert demo["action"][0] == demo["action"][-1] == 0  # specials never selected
    for orig, seen, a, label in zip(demo["ids"], demo["input_ids"], demo["action"], demo["labels"]):
        assert (label == orig) if a else (label == -100 and seen == orig)
        if a == 1:
            assert seen == tok.token_to_id("[MASK]")
        if a == 3:
            assert seen == orig
    d = demo["draws"]
    assert abs(d["selected"] - 0.15) < 0.02 and abs(d["mask"] - 0.8) < 0.04
    assert abs(d["random"] - 0.1) < 0.03 and abs(d["kept"] - 0.1) < 0.03
    assert core.masking_demo(tok, text, seed=3)["action"] == demo["action"]  # the seed reproduces
    assert any(core.masking_demo(tok, text, seed=s)["action"] != demo["action"] for s in range(4, 8))
    whole = core.masking_demo(tok, text, seed=1, whole_word=True)
    for w in set(whole["word_ids"]) - {-1}:  # every piece of a word alike: selected or not
        assert len({whole["action"][i] > 0 for i, x in enumerate(whole["word_ids"]) if x == w}) == 1


def test_input_representation_of_a_pair_and_nsp(model, tok):
    rep = core.input_representation(model, tok, "the cat sat", "a dog ran to the house")
    n_a = len(tok.encode("the cat sat", add_special_tokens=False).ids)
    assert rep["tokens"][0] == "[CLS]" and rep["tokens"][n_a + 1] == "[SEP]" and rep["tokens"][-1] == "[SEP]"
    assert rep["segments"] == [0] * (n_a + 2) + [1] * (len(rep["ids"]) - n_a - 2)
    emb = model.bert.embeddings
    T = len(rep["ids"])
    torch.testing.assert_close(torch.from_numpy(rep["token_embedding"]), emb.tok.weight[rep["ids"]].detach())
    torch.testing.assert_close(torch.from_numpy(rep["segment_embedding"][-1]), emb.seg.weight[1].detach())
    np.testing.assert_allclose(rep["sum"], rep["token_embedding"] + rep["segment_embedding"] + rep["position_embedding"],
                               atol=1e-6)
    with torch.inference_mode():  # h_0 is what the encoder's first block receives
        h0 = emb(torch.tensor([rep["ids"]]), torch.tensor([rep["segments"]]))[0]
    np.testing.assert_allclose(rep["layer_norm"], h0.numpy(), atol=1e-5)
    assert rep["nsp"]["IsNext"] + rep["nsp"]["NotNext"] == pytest.approx(1.0) and rep["position_embedding"].shape[0] == T
    no_head = core.input_representation(tiny_model(tok.get_vocab_size(), nsp=False), tok, "the cat", "the dog")
    assert no_head["nsp"] is None


# ---------------------------------------------------------------------------------------------
# The tab's handlers, on tiny models put in the registry


def _record(name: str, kind: str, net, tok, card: dict):
    from playground.analysis import models

    return models.Model(name, name, kind, kind, net, tok, net.config, card, None, models.Shape(1, 1))


def _only(mp, records: dict) -> None:
    """The registry holding `records` and none of the shipped checkpoints (which stay out of these tests)."""
    from playground import checkpoints
    from playground.analysis import models

    mp.setattr(models, "_loaded", dict(records))
    mp.setattr(checkpoints, "available", lambda kind=None: [])


@pytest.fixture()
def tab(model, tok, monkeypatch):
    from playground.ui import fill_mask_tab

    _only(monkeypatch, {
        "tiny": _record("tiny", "bert", model, tok, {"held_out": {"top1": 0.1, "top5": 0.3, "nsp_accuracy": 0.6},
                                                     "n_params": 1000}),
        "tiny-lora": _record("tiny-lora", "minilm-mlm", tiny_model(tok.get_vocab_size(), nsp=False), tok,
                             {"held_out": {"top1": 0.2, "top5": 0.5}, "trainable_params": 10, "n_params": 1000})})
    monkeypatch.setattr(fill_mask_tab, "FAST", {})
    return fill_mask_tab


def test_fill_mask_handler_returns_the_pipeline_list_and_fills_the_text(tab, model, tok):
    html, fig, path, data = tab.fill_mask("The CAT sat on the [mask].", "tiny", 4)
    assert data == core.fill_mask(model, tok, "The CAT sat on the [MASK].", 4)
    assert f'>{data[0]["token_str"].removeprefix("##")}</span>' in html and "The CAT sat on the" in html
    assert len(fig.data) == 1 and list(fig.data[0].x) == [r["score"] for r in data]
    with open(path, encoding="utf-8") as f:
        assert '"sequence"' in f.read()
    *_, two = tab.fill_mask("[MASK] cat [MASK].", "tiny", 2)
    assert len(two) == 2 and all(len(row) == 2 for row in two)


def test_handlers_refuse_bad_input_clearly(tab):
    import gradio as gr

    with pytest.raises(gr.Error, match="no \\[MASK\\]"):
        tab.fill_mask("the cat sat on the mat.", "tiny", 5)
    with pytest.raises(gr.Error, match="Unknown model"):
        tab.fill_mask("the [MASK].", "gpt", 5)
    *_, data = tab.fill_mask("the [MASK].", "tiny", 10**6)  # clamped to the slider's 50
    assert len(data) == 50
    with pytest.raises(gr.Error, match="number"):
        tab.fill_mask("the [MASK].", "tiny", "many")


def test_clicking_a_word_masks_it(tab):
    import gradio as gr

    class Event:
        index = 2

    assert tab.click_word("The cat sat.", Event()) == "The cat [MASK]."
    assert 'data-i="1"' in tab.show_words("The cat [mask].") and "fm-is-mask" in tab.show_words("The cat [mask].")
    assert isinstance(gr.SelectData, type)


def test_panel_handlers(tab):
    view, data = tab.masking("the cat sat on the mat and the dog ran", "tiny", 5, True)
    assert "fm-cell" in view and data["whole_word"] and data["seed"] == 5
    table, fig, label, summary, path, rep = tab.input_representation("the cat sat", "the dog ran", "tiny")
    assert label.keys() == {"IsNext", "NotNext"} and "NSP" in summary and len(fig.data) == 4
    assert rep["segments"][-1] == 1 and len(rep["embeddings"]["sum"]) == len(rep["tokens"])
    *_, summary, _, rep = tab.input_representation("the cat sat", "the dog ran", "tiny-lora")
    assert rep["nsp"] is None and "no next-sentence-prediction head" in summary
    fig, table, cards = tab.model_cards()
    assert "| tiny-lora | 20.0% | 50.0% |" in table and "1.0%" in table and len(cards["models"]) == 2


def test_the_head_at_the_masks_only_gives_the_full_forward_s_numbers(model, tok):
    idx = torch.tensor([core.encode(tok, "the [MASK] sat on the [MASK] mat", 32)[0].ids])
    masks = [i for i, t in enumerate(idx[0].tolist()) if t == tok.token_to_id("[MASK]")]
    with torch.inference_mode():
        torch.testing.assert_close(core.mask_logits(model, idx, masks, fast=True),
                                   core.mask_logits(model, idx, masks, fast=False))
    assert core.fast_path_agrees(model, tok)

    class Shifted(BertForPreTraining):  # a forward that is not encoder + head: the shortcut must not be vouched for
        def forward(self, idx, *args, **kwargs):
            logits, loss = super().forward(idx, *args, **kwargs)
            return logits + 1.0, loss

    other = Shifted(model.config).eval()
    assert not core.fast_path_agrees(other, tok)


# ---------------------------------------------------------------------------------------------
# Any input to the handlers gives a result or a clear gr.Error, never another exception

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.fuzzing import accepts, numbers  # noqa: E402

masked_texts = st.one_of(
    st.none(), st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(["[MASK]", "[mask]", "<mask>", "[MASK].", ",[MASK]", "the", "cat", "é", "👩‍💻",
                                        "\x00", "\n", "[", "]", "MASK"]), st.text(max_size=5)), max_size=60).map(" ".join))
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def registry(model, tok):
    from playground.ui import fill_mask_tab

    short = tiny_model(tok.get_vocab_size(), nsp=False, n_positions=16)  # long inputs get cut here
    mp = pytest.MonkeyPatch()
    _only(mp, {"tiny": _record("tiny", "bert", model, tok, {}), "short": _record("short", "bert", short, tok, {})})
    mp.setattr(fill_mask_tab, "FAST", {})
    yield fill_mask_tab
    mp.undo()


@FEW
@given(text=masked_texts, name=st.sampled_from(["tiny", "short", "bogus", None]), top_k=numbers)
def test_fill_mask_any_input(registry, text, name, top_k):
    out = accepts(registry.fill_mask, text, name, top_k)
    if out is not None:
        data = out[-1]
        rows = data if data and isinstance(data[0], list) else [data]
        for row in rows:
            assert 1 <= len(row) <= registry.TOP_K_MAX
            assert all(0 <= r["score"] <= 1 for r in row) and [r["score"] for r in row] == sorted(
                (r["score"] for r in row), reverse=True)


@pytest.mark.slow  # hypothesis
@FEW
@given(text=masked_texts, text_b=masked_texts, seed=numbers, whole=st.booleans(),
       name=st.sampled_from(["tiny", "short", "bogus"]))
def test_panel_any_input(registry, text, text_b, seed, whole, name):
    out = accepts(registry.masking, text, name, seed, whole)
    if out is not None:
        assert len(out[-1]["action"]) == len(out[-1]["tokens"]) <= registry.MASKING_MAX
    out = accepts(registry.input_representation, text, text_b, name)
    if out is not None:
        data = out[-1]
        assert len(data["segments"]) == len(data["tokens"]) <= registry.PAIR_MAX and data["tokens"][0] == "[CLS]"


def test_a_listed_model_loads_on_first_use_once_and_a_broken_one_says_so(tab, model, tok, monkeypatch):
    import gradio as gr

    calls = []

    def shared(name):
        calls.append(name)
        if name == "gone":
            raise FileNotFoundError("no checkpoint 'gone'")
        if name == "broken":
            raise tab.checkpoints.CheckpointError("models/broken/model.safetensors is damaged")
        return Checkpoint(name, None, "bert", model.config, {}, tok, model)

    monkeypatch.setattr(tab.checkpoints, "shared", shared)
    monkeypatch.setattr(tab.checkpoints, "available", lambda kind=None: ["fresh", "broken", "gone"]
                        if kind in (None, "bert") else [])
    *_, data = tab.fill_mask("the [MASK].", "fresh", 3)
    tab.fill_mask("the [MASK] sat.", "fresh", 3)
    assert len(data) == 3 and calls == ["fresh"] and tab.FAST["fresh"] is True
    with pytest.raises(gr.Error, match="broken cannot be used: models/broken/model.safetensors is damaged"):
        tab.fill_mask("the [MASK].", "broken", 3)
    with pytest.raises(gr.Error, match="gone cannot be used"):
        tab.fill_mask("the [MASK].", "gone", 3)


def test_a_model_without_the_masked_lm_contract_is_refused_with_a_reason():
    from tokenizers import Tokenizer, models

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2}, unk_token="[UNK]"))  # no [MASK]
    with pytest.raises(core.FillMaskError, match=r"no \[CLS\], \[MASK\] or \[SEP\]"):
        core.check_model(None, tok)
