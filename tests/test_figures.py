"""Figure builders: escaped HTML, visible whitespace, byte pieces grouped, plotly traces."""

from __future__ import annotations

import plotly.graph_objects as go

from playground.figures import common, tokenization as ft
from playground.analysis import normalize
from playground.analysis import tokenization


def result(tokens, offsets, unknown=None):
    n = len(tokens)
    return {"tokens": tokens, "ids": list(range(n)), "offsets": offsets, "unknown": unknown or [False] * n,
            "n_tokens": n, "n_unknown": sum(unknown or []), "chars_per_token": 1.0, "vocab_size": 10}


def test_user_text_is_escaped():
    text = "<script>alert(1)</script>"
    html = ft.tokens_html(text, {"char": result(list(text), [[i, i + 1] for i in range(len(text))])}, {})
    assert "<script>" not in html and "&lt;" in html


def test_whitespace_and_controls_are_visible():
    out = common.visible("a b\tc\nd\x07\u200d")
    assert "·" in out and "→" in out and "↵" in out and "<br>" in out and "\\x07" in out
    assert common.token_label("a\x1b b") == "a\\x1b·b"
    assert "ZWJ" in common.visible("\u200d")          # a joiner alone is named
    assert common.visible("\u0301").startswith("◌")   # a combining accent alone sits on a dotted circle


def test_byte_pieces_of_one_character_are_one_span():
    groups = ft.token_groups([[0, 1], [1, 2], [1, 2], [1, 2], [2, 3]])
    assert groups == [(0, 1, [0]), (1, 2, [1, 2, 3]), (2, 3, [4])]


def test_real_emoji_renders_as_one_coloured_group():
    tok = tokenization.load("bpe")
    text = "a 👩‍💻"
    enc = tokenization.encode(tok, text)
    html = ft.token_spans_html(text, enc)
    assert html.count('class="tok') == len(ft.token_groups(enc["offsets"])) < enc["n_tokens"]
    assert "multi" in html


def test_uncovered_text_is_grey_and_unknown_is_marked():
    text = "ab cd"
    html = ft.token_spans_html(text, result(["ab", "[UNK]"], [[0, 2], [3, 5]], [False, True]))
    assert 'class="gap"' in html and " unk" in html


def test_token_count_figure_has_one_bar_per_tokenizer():
    fig = ft.token_count_figure({"a": result(["x"], [[0, 1]]), "b": result(["x", "y"], [[0, 1], [1, 2]])},
                                     {"a": "A", "b": "B"})
    assert isinstance(fig, go.Figure) and list(fig.data[0].x) == [1, 2] and list(fig.data[0].y) == ["A", "B"]


def test_bpe_figures_highlight_the_chosen_pair():
    trace = tokenization.bpe_trace([("low", 5), ("lower", 2), ("newest", 6)], 3)
    fig = ft.bpe_pairs_figure(trace, 1)
    colours = list(fig.data[0].marker.color)
    assert colours.count(common.ACCENT) == 1 and colours[0] == common.ACCENT  # the winner is the top bar
    html = ft.bpe_step_html(trace, 2)
    assert 'class="chip new"' in html and "Step 2" in html
    assert "Step 0" in ft.bpe_step_html(trace, 0)


def test_normalize_html_strikes_removed_tokens():
    stages = normalize.normalize_steps("The cats are running!", ["lowercase", "punctuation", "stopwords", "stem"])
    html = ft.normalize_html(stages)
    assert "removed" in html and "run" in html
