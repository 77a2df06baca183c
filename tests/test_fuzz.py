"""Any input to a handler gives a result or a clear gr.Error, never another exception."""

from __future__ import annotations

import gradio as gr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.ui import tokenization_tab as tab

texts = st.one_of(st.none(), st.text(max_size=300), st.text(alphabet=st.characters(codec="utf-8"), max_size=50))
numbers = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                    st.none())
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def accepts(fn, *args):
    try:
        return fn(*args)
    except gr.Error as err:
        assert str(err.message).strip(), "an error must say what is wrong"
        return None


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


@SETTINGS
@given(text=texts)
def test_explain_and_normalize_any_text(text):
    accepts(tab.explain_split, text, "wordpiece")
    accepts(tab.normalize_text, text, ["lowercase", "punctuation", "stopwords", "stem"])
