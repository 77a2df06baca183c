"""Figure builders: escaped HTML, visible whitespace, byte pieces grouped, plotly traces."""

from __future__ import annotations

import plotly.graph_objects as go

from playground.analysis import normalize, subwords, tokenization
from playground.figures import common, tokenization as ft


def result(tokens, offsets, unknown=None, label="Tokenizer"):
    n = len(tokens)
    return {"label": label, "tokens": tokens, "ids": list(range(n)), "offsets": offsets,
            "unknown": unknown or [False] * n, "n_tokens": n, "n_unknown": sum(unknown or []), "chars_per_token": 1.0,
            "vocab_size": 10}


def compared(text, results, notices=()):
    return {"text": text, "n_chars": len(text), "notices": list(notices), "tokenizers": results}


def test_user_text_labels_and_notices_are_escaped():
    text = "<script>alert(1)</script>"
    chars = result(list(text), [[i, i + 1] for i in range(len(text))], label="<b>char</b>")
    html = ft.tokens_html(compared(text, {"char": chars}, ["<i>notice</i>"]))
    assert "<script>" not in html and "&lt;" in html
    assert "&lt;b&gt;char" in html and "&lt;i&gt;notice" in html


def test_tokens_table_has_one_row_per_token_with_the_characters_it_covers():
    text = "ab\tc"
    data = compared(text, {"a": result(["ab", "[UNK]"], [[0, 2], [3, 4]], [False, True], "A"),
                           "b": result(list(text), [[i, i + 1] for i in range(4)], label="B")})
    table = ft.tokens_table(data)
    assert len(table) == 6 and list(table["tokenizer"]) == ["A"] * 2 + ["B"] * 4
    assert list(table.iloc[1][["token", "characters", "unknown"]]) == ["[UNK]", "c", True]
    assert table.iloc[4]["characters"] == "→"  # the tab, made visible


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
    assert "Type or paste some text" in ft.tokens_html(compared("", {}))


def test_token_count_figure_has_one_bar_per_tokenizer():
    fig = ft.token_count_figure({"a": result(["x"], [[0, 1]], label="A"),
                                 "b": result(["x", "y"], [[0, 1], [1, 2]], label="B")})
    assert isinstance(fig, go.Figure) and list(fig.data[0].x) == [1, 2] and list(fig.data[0].y) == ["A", "B"]


def test_bpe_figures_highlight_the_chosen_pair():
    trace = subwords.bpe_trace([("low", 5), ("lower", 2), ("newest", 6)], 3)
    fig = ft.bpe_pairs_figure(trace, 1)
    colours = list(fig.data[0].marker.color)
    assert colours.count(common.ACCENT) == 1 and colours[0] == common.ACCENT  # the winner is the top bar
    html = ft.bpe_step_html(trace, 2)
    assert 'class="chip new"' in html and "Step 2" in html
    assert "Step 0" in ft.bpe_step_html(trace, 0)
    table = ft.merges_table(trace)
    assert list(table["pair"]) == ["w + e", "l + o", "n + e"] and list(table["count"]) == [8, 7, 6]


def test_normalize_html_strikes_removed_tokens():
    stages = normalize.apply("The cats are running!", ["lowercase", "punctuation", "stopwords", "stem"])["stages"]
    html = ft.normalize_html(stages)
    assert "removed" in html and "run" in html


def test_similarity_cells_print_two_decimals_and_only_while_readable():
    import re

    import numpy as np

    from playground.figures.embeddings import CELL_TEXT_MAX, similarity_figure

    sim = np.array([[1.0, 0.68], [0.68, 1.0]], dtype=np.float32)  # 0.68 in float32 is 0.6800000071525574
    text = similarity_figure(["a", "b"], sim, "t").to_plotly_json()["data"][0]["text"]
    assert [cell for row in text for cell in row] == ["1.00", "0.68", "0.68", "1.00"]
    n = CELL_TEXT_MAX + 1
    crowded = similarity_figure([str(i) for i in range(n)], np.eye(n, dtype=np.float32), "t").to_plotly_json()
    assert crowded["data"][0].get("text") is None and "cosine %{z:.3f}" in crowded["data"][0]["hovertemplate"]
    assert all(re.fullmatch(r"-?\d\.\d\d", c) for row in text for c in row)
