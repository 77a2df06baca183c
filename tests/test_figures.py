"""Figure builders: escaped HTML, visible whitespace, byte pieces grouped, plotly traces."""

from __future__ import annotations

import pytest
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


def test_the_lemmatizer_row_shows_each_words_part_of_speech_and_its_table_every_row():
    stages = normalize.apply("Better cats", ["lowercase", "stem", "lemmatize"])["stages"]
    html = ft.normalize_html(stages)
    assert "good<sub>a</sub>" in html and "reads the lowercase stage" in html
    table = ft.lemma_table_html(normalize.stem_and_lemmatize("Better <cats>", "auto"))
    assert "<th>better</th>" in table and "<td>good</td>" in table
    for row in ("Porter stem", "part of speech", "WordNet lemma", "lemma as adverb"):
        assert f'<th scope="row">{row}</th>' in table
    assert "every word read as a verb" in ft.lemma_table_html(normalize.stem_and_lemmatize("x", "v"))
    assert "No words" in ft.lemma_table_html(normalize.stem_and_lemmatize("", "auto"))


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


# ---------------------------------------------------------------------------------------------
# What a class reads off the figures (#32): counts, signs, ticks, colour bars, every row labelled


def test_a_single_token_is_one_token_not_one_tokens():
    one = result(["x"], [[0, 1]], label="A")
    fig = ft.token_count_figure({"a": one, "b": result(["x", "y"], [[0, 1], [1, 2]], label="B")})
    assert fig.data[0].text[0].startswith("1 token,") and fig.data[0].text[1].startswith("2 tokens,")
    assert list(fig.data[0].customdata) == ["1 token", "2 tokens"]          # the hover says it too
    assert "1 token ·" in ft.tokens_html(compared("x", {"a": one}))
    stages = normalize.apply("Cats!", ["lowercase", "punctuation"])["stages"]
    assert "1 token ·" in ft.normalize_html(stages) and "1 tokens" not in ft.normalize_html(stages)
    assert common.plural(1_024, "token") == "1,024 tokens" and common.plural(1, "head") == "1 head"


def test_a_value_that_rounds_to_zero_has_no_minus_sign():
    import numpy as np

    from playground.figures import embeddings as fe

    sim = np.array([[1.0, -0.001], [-0.001, 1.0]], dtype=np.float32)
    text = fe.similarity_figure(["a", "b"], sim, "t").data[0].text
    assert [cell for row in text for cell in row] == ["1.00", "0.00", "0.00", "1.00"]
    assert common.fixed(-0.004) == "0.00" and common.fixed(-0.006) == "-0.01" and common.fixed(0.0) == "0.00"
    md = fe.contextual_md({"word": "bank", "model": "minilm", "layer": 3}, np.array([[1, -0.002], [-0.002, 1]]), True)
    assert "from 0.00 to 0.00" in md


def test_the_similarity_cells_take_the_type_that_fits_them():
    """No fixed size: plotly's own, the largest that fits the narrowest cell as drawn (a fixed 12 px ran the
    numbers of a half-width heatmap together in lecture mode)."""
    import numpy as np

    from playground.figures import embeddings as fe

    cell = fe.similarity_figure(list("abc"), np.eye(3), "t").data[0]
    assert cell.texttemplate == "%{text}" and cell.textfont.size is None


def test_the_gradient_strip_never_says_ten_to_the_minus_zero():
    from playground.figures.gradient_flow import gradient_strip_html

    cells = {"rnn": {"x_grad_norms": [0.4, 0.9, 3.0]}}   # log10 from -0.4 (rounds to 0) to 0.48
    html = gradient_strip_html(list("abcd"), cells, {"rnn": "RNN"})
    assert "10<sup>0</sup> … 10<sup>0</sup>" in html and "-0<" not in html


def test_counts_are_ticked_on_whole_numbers_and_every_pair_is_labelled():
    trace = subwords.bpe_trace([("low", 2), ("lower", 1), ("newest", 3)], 3)
    fig = ft.bpe_pairs_figure(trace, 2)
    x = fig.layout.xaxis
    assert x.tick0 == 0 and x.dtick >= 1 and float(x.dtick).is_integer()   # plotly put ticks at 0.5 for counts of 3
    assert fig.layout.yaxis.dtick == 1                                       # ten bars, ten labels
    assert common.count_axis(3) == {"tick0": 0, "dtick": 1} and common.count_axis(100)["dtick"] == 13


def test_the_softmax_and_positional_panels_have_colour_bars_beside_them():
    import numpy as np

    from playground.figures import attention as fa

    T, d = 5, 4
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(T), size=T)
    steps = {"out": rng.normal(size=(T, d)), "raw": rng.normal(size=(T, T)), "masked": rng.normal(size=(T, T)),
             "probs": probs, "grad": probs * (1 - probs)}
    fig = fa.steps_figure(list("abcde"), *rng.normal(size=(3, T, d)), steps, "× 1/√4")
    shown = [(i, t) for i, t in enumerate(fig.data) if t.showscale]
    assert [i for i, _ in shown] == [6, 7]                                   # softmax weights, softmax gradient
    for i, trace in shown:
        right = fig.layout[f"xaxis{i + 1}"].domain[1]
        assert right < trace.colorbar.x < right + 0.05                      # beside its own panel, not the figure's edge
    pe = rng.normal(size=(8, 6))
    fig = fa.positional_figure(pe, pe @ pe.T, np.eye(8), "MiniLM", rope=pe @ pe.T, alibi=-np.abs(pe @ pe.T))
    assert len(fig.data) == 5 and all(t.showscale is not False for t in fig.data)
    assert len({(round(t.colorbar.x, 3), round(t.colorbar.y, 3)) for t in fig.data}) == 5   # each in its own place


def test_every_query_row_of_the_attention_heatmap_is_labelled():
    """Plotly labelled every other or third row of 40 tokens, so the selected word's row could go unlabelled."""
    import numpy as np

    from playground.figures import attention as fa
    from playground.figures.generation import causal_attention_figure

    for n in (12, 40, 64):
        fig = fa.heatmap_figure([f"t{i}" for i in range(n)], np.eye(n), "t")
        y = fig.layout.yaxis
        rows_px = fig.layout.height - 150                                   # margins, the keys' short labels, title
        assert y.dtick == 1 and 8 <= y.tickfont.size <= 13 and y.tickfont.size * 1.25 * n <= rows_px, n
    crowded = fa.heatmap_figure([f"t{i}" for i in range(128)], np.eye(128), "t").layout.yaxis
    assert crowded.dtick is None and crowded.tickfont.size == 8             # 128 rows cannot all be read: plotly picks
    causal = causal_attention_figure([f"t{i}" for i in range(30)], np.eye(30).tolist(), "t").layout.yaxis
    assert causal.dtick == 1 and causal.tickfont.size >= 8


def test_the_3d_word_space_has_no_stray_axis_titles_and_readable_labels():
    import numpy as np

    from playground.figures import embeddings as fe

    fig = fe.scatter_figure(list("abcd"), np.eye(4)[:, :3], ["x", "x", "y", "y"], "t")
    assert all(fig.layout.scene[axis].title.text == "" for axis in ("xaxis", "yaxis", "zaxis"))
    assert fig.data[0].textfont.size >= 12


def _alike(fig) -> list[tuple[str, str]]:
    """Pairs of series in one subplot, of one kind, that look the same but for their colour: the same mode, dash,
    marker symbol and bar pattern (plotly's defaults filled in)."""
    seen: dict[tuple, str] = {}
    pairs = []
    for trace in fig.data:
        if trace.type not in ("scatter", "scattergl", "scatter3d", "bar"):
            continue
        where = (trace.type == "bar", getattr(trace, "xaxis", None), getattr(trace, "yaxis", None))
        if trace.type == "bar":
            pattern = trace.marker.pattern
            look = (pattern.shape or "", (pattern.fillmode or "overlay") if pattern.shape else "")
        else:
            markers = "markers" in (trace.mode or "")
            look = (trace.mode, trace.line.dash or "solid", (trace.marker.symbol or "circle") if markers else None)
        if (where, look) in seen:
            pairs.append((seen[(where, look)], trace.name))
        seen.setdefault((where, look), trace.name)
    return pairs


def test_series_are_told_apart_by_more_than_their_colour():
    """WCAG 1.4.1 (issue #35): series that differ only by colour get a marker symbol, a dash or a bar pattern each;
    what a figure set itself stays, and a series in two subplots keeps one look."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2)
    for i, name in enumerate(("a", "b", "c")):
        fig.add_trace(go.Scatter(name=name, mode="lines+markers", x=[0, 1], y=[0, i]), 1, 1)
        fig.add_trace(go.Scatter(name=name, mode="lines+markers", x=[0, 1], y=[i, 0], showlegend=False), 1, 2)
    fig.add_trace(go.Scatter(name="live", mode="markers", x=[1], y=[1], marker=dict(symbol="star")), 1, 1)
    fig.add_trace(go.Scatter(name="p", mode="lines", x=[0, 1], y=[1, 1]), 1, 1)
    fig.add_trace(go.Scatter(name="q", mode="lines", x=[0, 1], y=[2, 2]), 1, 1)
    fig.add_trace(go.Bar(name="u", x=[0], y=[1]), 1, 2)
    fig.add_trace(go.Bar(name="v", x=[0], y=[2], marker=dict(pattern=dict(shape="/"))), 1, 2)
    fig.add_trace(go.Bar(name="w", x=[0], y=[3]), 1, 2)
    assert _alike(fig)
    common.distinguish(fig)
    assert not _alike(fig)
    symbols = {(t.name, t.xaxis): t.marker.symbol for t in fig.data if getattr(t, "mode", "") == "lines+markers"}
    assert symbols[("a", "x")] == symbols[("a", "x2")] and len(set(symbols.values())) == 3
    assert "star" not in symbols.values() and fig.data[6].marker.symbol == "star"
    assert [t.marker.pattern.shape for t in fig.data if t.type == "bar"][1] == "/"      # the figure's own pattern


@pytest.mark.slow  # every figure of the app
def test_no_figure_of_the_app_tells_its_series_apart_by_colour_alone():
    """Every figure the endpoints draw at the page's values (and the transfer-learning curve with a live run):
    no two series of one kind in one subplot look the same but for their colour."""
    import inspect

    import app
    from playground.analysis import classify
    from playground.figures import classify as fc

    slow = {"lora_finetune", "sft", "dpo", "classify_train", "classify_probe", "chat_tools", "chain_of_thought",
            "memory_experiment", "batching"}            # training runs and SmolLM2's decoding: their own tests
    figures = {}
    for fn in app.demo.fns.values():
        if fn.api_visibility != "public" or fn.fn is None or fn.api_name in slow:
            continue
        try:
            out = fn.fn(*(component.value for component in fn.inputs))
            if inspect.isgenerator(out):
                *_, out = out
        except Exception:   # noqa: BLE001 - a view that needs a room or a session draws nothing here
            continue
        for i, value in enumerate(out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(value, go.Figure):
                figures[f"{fn.api_name}[{i}]"] = value
    curve = classify.curve()
    if curve:
        figures["the transfer-learning curve"] = fc.curve_figure(curve, {"n": 16, "accuracy": 0.5,
                                                                         "method": "probe-cls"})
    assert len(figures) >= 15, sorted(figures)
    alike = {name: _alike(fig) for name, fig in figures.items() if _alike(fig)}
    assert not alike, alike
