"""The Bias in embeddings view: WEAT's statistic, effect size and permutation p-value against hand computations
on tiny vectors, the gender direction and its projections, the figure builders' traces and text alternative, and
the `embedding_bias` endpoint on the shipped word models."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from playground.analysis.embeddings import bias
from playground.analysis.embeddings import words as ws
from playground.figures import bias as fb

SQRT3_2 = math.sqrt(3) / 2


def tiny_space() -> ws.WordSpace:
    """Unit vectors in the plane: a = (1, 0), b = (0, 1); the targets at known angles, so every cosine is a
    coordinate: s(w, A, B) = w_1 - w_2."""
    rows = {"a": (1, 0), "b": (0, 1), "x1": (1, 0), "x2": (0.5, SQRT3_2), "y1": (0, 1), "y2": (0.6, 0.8),
            "he": (1, 0), "she": (0, 1), "man": (0.8, 0.6), "woman": (0.6, 0.8), "nurse": (-0.6, 0.8)}
    vocab = {w: i for i, w in enumerate(rows)}
    return ws.WordSpace("tiny", vocab, np.array(list(rows.values()), np.float32), np.arange(len(rows)))


def tiny_sets() -> bias.WeatSets:
    return bias.WeatSets(("X", ["x1", "x2"]), ("Y", ["y1", "y2"]), ("A", ["a"]), ("B", ["b"]))


def test_weat_statistic_and_effect_size_by_hand():
    # s(x1) = 1 - 0 = 1, s(x2) = 0.5 - √3/2, s(y1) = 0 - 1 = -1, s(y2) = 0.6 - 0.8 = -0.2
    s_x, s_y = [1.0, 0.5 - SQRT3_2], [-1.0, -0.2]
    statistic = sum(s_x) - sum(s_y)                                   # = 1.8340
    everything = s_x + s_y
    mean = sum(everything) / 4
    std = math.sqrt(sum((v - mean) ** 2 for v in everything) / 3)    # sample std, ddof = 1
    d = (sum(s_x) / 2 - sum(s_y) / 2) / std
    row = bias.weat(tiny_space(), tiny_sets())
    assert [v for _, v in row["association"]["X"]] == pytest.approx(s_x, abs=1e-4)
    assert [v for _, v in row["association"]["Y"]] == pytest.approx(s_y, abs=1e-4)
    assert row["statistic"] == pytest.approx(statistic, abs=1e-4) and statistic == pytest.approx(1.834, abs=1e-3)
    assert row["effect_size"] == pytest.approx(d, abs=1e-4)
    # swapping the attributes swaps the sign of both
    flipped = bias.WeatSets(("X", ["x1", "x2"]), ("Y", ["y1", "y2"]), ("B", ["b"]), ("A", ["a"]))
    swapped = bias.weat(tiny_space(), flipped)
    assert swapped["statistic"] == pytest.approx(-statistic, abs=1e-4)
    assert swapped["effect_size"] == pytest.approx(-d, abs=1e-4)


def test_the_permutation_p_value_is_exact_on_a_tiny_case():
    """X u Y = {1, 0.5 - √3/2, -1, -0.2}: 6 splits into two pairs; the statistic 2 sum(X_i) - sum(all) is 1.834
    for the observed split and larger only for X_i = {1, -0.2} (2.166): p = 1/6."""
    row = bias.weat(tiny_space(), tiny_sets())
    assert row["exact"] and row["splits"] == 6 and row["all_splits"] == 6
    assert row["greater"] == 1 and row["p_value"] == pytest.approx(1 / 6)


def test_a_sampled_p_value_is_seeded_says_so_and_is_close_to_the_exact_one():
    s = np.random.default_rng(1).normal(size=20)
    s_x, s_y = s[:10] + 0.4, s[10:]                                    # C(20, 10) = 184,756 > EXACT_MAX
    out = bias.permutation_p(s_x, s_y, seed=3)
    assert not out["exact"] and out["splits"] == bias.SAMPLES and out["seed"] == 3
    assert out == bias.permutation_p(s_x, s_y, seed=3)                 # the same seed, the same p
    both, observed = np.concatenate([s_x, s_y]), s_x.sum() - s_y.sum()
    exact = np.mean([2 * both[list(c)].sum() - both.sum() > observed + 1e-9
                     for c in itertools.combinations(range(20), 10)])
    assert out["p_value"] == pytest.approx(exact, abs=0.015)


def test_missing_words_are_listed_and_too_few_words_said():
    sets = bias.WeatSets(("X", ["x1", "x2", "qqq"]), ("Y", ["y1", "y2"]), ("A", ["a", "zzz"]), ("B", ["b"]))
    row = bias.weat(tiny_space(), sets)
    assert row["missing"] == {"X": ["qqq"], "Y": [], "A": ["zzz"], "B": []} and row["used"]["X"] == ["x1", "x2"]
    assert row["statistic"] == pytest.approx(bias.weat(tiny_space(), tiny_sets())["statistic"])
    short = bias.weat(tiny_space(), bias.WeatSets(("X", ["x1"]), ("Y", ["y1", "y2"]), ("A", ["a"]), ("B", ["nope"])))
    assert short["error"] == "too few known words in X, B" and "statistic" not in short


def test_the_direction_is_the_unit_mean_of_the_pairs_and_projections_are_cosines():
    space = tiny_space()
    g, pairs, missing = bias.direction(space, [("he", "she"), ("man", "woman"), ("guy", "gal")])
    expected = (np.array([1, -1]) + np.array([0.2, -0.2])) / 2
    assert g == pytest.approx(expected / np.linalg.norm(expected), abs=1e-6)
    assert [p["pair"] for p in pairs] == [["he", "she"], ["man", "woman"]] and missing == ["guy", "gal"]
    assert [p["cosine_with_direction"] for p in pairs] == pytest.approx([1.0, 1.0], abs=1e-4)
    rows, absent = bias.projections(space, g, ["nurse", "he", "qqq", "man"])
    assert [r["word"] for r in rows] == ["he", "man", "nurse"] and absent == ["qqq"]
    assert rows[2]["projection"] == pytest.approx((-0.6 - 0.8) / math.sqrt(2), abs=1e-4)


def test_the_figures_have_the_expected_traces_and_the_text_says_the_same_numbers():
    space = tiny_space()
    data = bias.view(space, [space], [("he", "she")], ["nurse", "he", "man", "woman", "x2", "y2"], tiny_sets())
    fig = fb.projection_figure(data["projections"], "t")
    assert len(fig.data) == 1 and fig.data[0].type == "bar" and fig.data[0].orientation == "h"
    assert list(fig.data[0].y) == [r["word"] for r in data["projections"]]
    assert list(fig.data[0].x) == sorted(fig.data[0].x, reverse=True)
    colours = fig.data[0].marker.color
    assert all((c == fb.FIRST) == (v >= 0) for c, v in zip(colours, fig.data[0].x))
    text = fb.projection_md(data)
    top, bottom = data["projections"][0], data["projections"][-1]
    assert f"{top['word']} ({top['projection']:+.2f})" in text
    assert f"{bottom['word']} ({bottom['projection']:+.2f})" in text
    assert "(cosine with g, one pair's difference)" in text
    words = fb.association_figure(data["weat"]["models"][0], ("X", "Y"), "t")
    assert [t.name for t in words.data] == ["X", "Y"] and len(words.data[0].x) == 2
    table = fb.weat_md(data["weat"])
    assert "| tiny | 2, 2, 1, 1 | +1.834 |" in table and "(exact, 6 splits)" in table


# ---------------------------------------------------------------------------------------------
# The endpoint, on the shipped models

WORD_MODELS = [k for k in ("word2vec", "glove", "fasttext") if k in ws.space_keys()]


@pytest.mark.skipif(len(WORD_MODELS) < 3, reason="word2vec, GloVe and FastText are not all shipped")
def test_embedding_bias_answers_on_every_word_model(client):
    x, y, a, b = (f"{label}: {words}" for label, words in bias.WEAT_TESTS[next(iter(bias.WEAT_TESTS))])
    pairs = "he she\nman woman\nguy gal"
    out = client.predict("glove", pairs, "nurse, soldier, qqqq", x, y, a + ", zzzzq", b, 0, api_name="/embedding_bias")
    data = out[-1]
    assert data["source"] == "glove" and data["direction"]["missing"] == ["gal"]
    assert [r["word"] for r in data["projections"]] == ["soldier", "nurse"] and data["missing"] == ["qqqq"]
    models = data["weat"]["models"]
    assert [m["source"] for m in models] == ["word2vec", "glove", "fasttext"]
    for m in models:
        assert "zzzzq" in m["missing"]["A"] and "tulip" in m["missing"]["X"]
        assert not m["exact"] and m["splits"] == bias.SAMPLES and -2 <= m["effect_size"] <= 2
    assert data["weat"]["sets"]["X"]["label"] == "flowers"
    assert "soldier" in out[1] and "| word2vec |" in out[2]
