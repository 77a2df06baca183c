"""Any input to a handler gives a result or a clear gr.Error, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.ui import tokenization_tab as tab
from tests.fuzzing import accepts, numbers, texts

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(text=texts, names=st.lists(st.sampled_from(list(tab.TOKENIZERS) + ["bogus"]), max_size=3))
def test_tokenize_any_text(text, names):
    out = accepts(lambda *a: list(tab.tokenize(*a))[-1], text, names, False, 2000)
    if out is not None:
        data = out[-1]
        for r in data["tokenizers"].values():
            assert all(0 <= s <= e <= data["n_chars"] for s, e in r["offsets"])


@SETTINGS
@given(table=texts, merges=numbers)
def test_bpe_trace_any_table(table, merges):
    accepts(tab.bpe_trace, table, merges)


@pytest.mark.slow
@SETTINGS
@given(text=texts)
def test_explain_and_normalize_any_text(text):
    accepts(tab.explain_split, text, "wordpiece")
    accepts(tab.normalize_text, text, ["lowercase", "punctuation", "stopwords", "stem"])


# The recurrent and generation tabs: numbers from anywhere (the API passes what it gets)

from playground.ui import generation_tab, gradient_tab  # noqa: E402

FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FEW
@given(text=texts, length=numbers, sigma=numbers, clip=numbers,
       activation=st.sampled_from(["tanh", "relu", "sigmoid", "softmax"]), rescale=st.booleans(),
       cells=st.lists(st.sampled_from(["rnn", "lstm", "gru", "transformer"]), max_size=3))
def test_gradient_flow_any_input(text, length, sigma, clip, activation, rescale, cells):
    out = accepts(gradient_tab.gradient_flow, text, length, cells, "trained", rescale, sigma, activation, clip)
    if out is not None:
        for cell in out[-1]["cells"].values():
            assert cell["status"] in ("stable", "vanishing", "exploding", "overflow")


def _last(gen):
    *_, last = gen if not isinstance(gen, tuple) else [gen]
    return last


@pytest.mark.slow
@FEW
@given(prompt=texts, max_new=numbers, temperature=numbers, top_k=numbers, top_p=numbers,
       seed=st.one_of(st.none(), st.integers(-10**6, 10**6)),
       strategy=st.sampled_from(["greedy", "temperature", "top-k", "top-p", "beam", "nucleus"]))
def test_generate_any_input(prompt, max_new, temperature, top_k, top_p, seed, strategy):
    model = generation_tab.LISTED[0]
    accepts(lambda *a: _last(generation_tab.generate(*a)), prompt, model, max_new, strategy, temperature, top_k,
            top_p, seed, 2)


# The Embeddings tab: any words, sentences, names and numbers

from playground.ui import embeddings_context, embeddings_sentences, embeddings_words  # noqa: E402


@FEW
@given(words=texts, source=st.sampled_from(["word2vec", "minilm", "gpt", "bogus"]),
       method=st.sampled_from(["pca", "tsne", "bogus"]), dims=numbers)
def test_embed_words_any_input(words, source, method, dims):
    out = accepts(lambda *a: embeddings_words.embed_words(*a, progress=lambda *_, **__: None), words, source, method,
                  dims)
    if out is not None:
        points = out[-1]["points"]
        assert len(points) >= 3 and len({p["word"] for p in points}) == len(points)


@FEW
@given(sentences=texts, query=texts, pooling=st.sampled_from(["mean", "max", "cls", "median"]), word=texts,
       layer=numbers)
def test_sentence_handlers_any_input(sentences, query, pooling, word, layer):
    accepts(embeddings_sentences.embed_sentences, sentences, "minilm", pooling)
    accepts(embeddings_sentences.semantic_search, query, sentences, "minilm", pooling)
    accepts(embeddings_sentences.classic, sentences)
    accepts(embeddings_context.contextual, word, sentences, layer)
    accepts(embeddings_words.analogy, word, query, sentences, "word2vec")
