"""Figure builders for the Masked-LM tab: predictions and model data in, plotly figures or HTML out.
No torch, no gradio.

- `predictions_figure`: per mask, a horizontal bar chart of its top-k tokens and probabilities.
- `filled_html`: the text with each mask filled by its most probable token (marked).
- `masking_html`: one sentence through BERT's 15% / 80-10-10 masking, token by token.
- `pair_table_html` and `embeddings_figure`: the input representation of [CLS] A [SEP] B [SEP]
  (ids, segments, positions; token, segment and position embeddings and their sum).
- `cards_figure`: what the shipped models' cards say (held-out top-1 / top-5, NSP, parameters).

The CSS classes live in assets/style.css (section "Masked-LM tab").
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go

from playground.figures.common import ACCENT, distinguish, layout, row_labels, token_label

ACTION_CLASSES = ("fm-none", "fm-mask", "fm-random", "fm-kept")  # playground.training.bert action codes 0..3
ACTION_TEXT = ("not selected", "→ [MASK] (80%)", "→ random token (10%)", "kept unchanged (10%)")


def _piece(token: str) -> str:
    """A WordPiece token as a reader sees it: a continuation piece "##ing" shown as "-ing"."""
    return "-" + token[2:] if token.startswith("##") and len(token) > 2 else token


def predictions_figure(masks: list[dict]) -> go.Figure:
    """masks: [{"title": str, "tokens": [str], "scores": [float]}] in the text's order. One panel per
    mask (at most three per row); in each, the most probable token on top. The grid is laid out by
    hand, from plain dicts: plotly's make_subplots and its validation cost more than the model here."""
    n = max(1, len(masks))
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    k = max((len(m["tokens"]) for m in masks), default=1)
    top = max((max(m["scores"], default=0) for m in masks), default=0)
    row_h = 70 + 22 * k                                        # px per row of panels
    height = max(260, rows * row_h)
    gap_x, gap_y = 0.10, 50 / height                           # between panels: a label column, a title line
    traces, axes, titles = [], {}, []
    for i, m in enumerate(masks):
        r, c = divmod(i, cols)
        x0, x1 = c / cols + (gap_x if c else gap_x / 2), (c + 1) / cols - 0.01
        y1 = 1 - r / rows - (gap_y if r else 0.02)
        y0 = 1 - (r + 1) / rows + 0.02
        suffix = "" if i == 0 else str(i + 1)
        labels = [f"{rank + 1}. {token_label(_piece(t))}" for rank, t in enumerate(m["tokens"])]
        traces.append(dict(type="bar", x=m["scores"], y=labels, orientation="h", xaxis=f"x{suffix}",
                           yaxis=f"y{suffix}", marker=dict(color=[ACCENT] + ["#4a7bd0"] * (len(labels) - 1)),
                           showlegend=False, text=[f"{s:.1%}" for s in m["scores"]], textposition="auto",
                           hovertemplate="%{y}: p = %{x:.4f}<extra></extra>"))
        axes[f"xaxis{suffix}"] = dict(domain=[x0, x1], anchor=f"y{suffix}", rangemode="tozero",
                                      tickformat=".0%" if top >= 0.1 else ".1%", gridcolor="#e5e5e5")
        axes[f"yaxis{suffix}"] = dict(domain=[y0, y1], anchor=f"x{suffix}", autorange="reversed", type="category")
        titles.append(dict(text=html.escape(m["title"]), x=(x0 + x1) / 2, y=y1, xref="paper", yref="paper",
                           xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=14)))
    # plain dicts, not validated: plotly's property validation took longer than the model (~20 ms)
    return go.Figure(dict(data=traces, layout=layout(height=height, margin=dict(l=10, r=10, t=40, b=30), bargap=0.2,
                                                     annotations=titles, **axes)), _validate=False)


def filled_html(parts: list[tuple[str, str | None]], notices: list[str] = ()) -> str:
    """parts: (text, None) for the text as typed, (token, title) for a filled mask (title: hover text).
    A mask that was not predicted comes as ("[MASK]", "") and is shown as such."""
    out = [f'<div class="notice">{html.escape(n)}</div>' for n in notices]
    spans = []
    for text, title in parts:
        if title is None:
            spans.append(html.escape(text))
        elif title == "":
            spans.append(f'<span class="fm-fill fm-lost" title="not predicted">{html.escape(text)}</span>')
        else:
            spans.append(f'<span class="fm-fill" title="{html.escape(title)}">{html.escape(text)}</span>')
    out.append(f'<div class="fm-filled">{"".join(spans)}</div>')
    return "".join(out)


def masking_html(demo: dict) -> str:
    """Each token of the sentence (top) and what BERT's masking made of it (below), coloured by what
    happened; then the rates over many draws on the same sentence."""
    cells = []
    for tok, seen, code in zip(demo["tokens"], demo["input_tokens"], demo["action"]):
        special = tok in ("[CLS]", "[SEP]")
        cls = "fm-special" if special else ACTION_CLASSES[code]
        what = "special: never selected" if special else ACTION_TEXT[code]
        cells.append(f'<div class="fm-cell {cls}" title="{html.escape(what)}">'
                     f'<div class="fm-orig">{html.escape(token_label(tok))}</div>'
                     f'<div class="fm-seen">{html.escape(token_label(seen))}</div>'
                     f'<div class="fm-what">{html.escape(what if code else "")}</div></div>')
    d = demo["draws"]
    n_sel = sum(1 for a in demo["action"] if a)
    eligible = sum(1 for t in demo["tokens"] if t not in ("[CLS]", "[SEP]"))
    legend = "".join(f'<span class="fm-cell fm-key {c}">{html.escape(t)}</span>'
                     for c, t in zip(ACTION_CLASSES[1:], ACTION_TEXT[1:]))
    mode = "whole words" if demo["whole_word"] else "WordPiece tokens"
    stats = (f"This draw (seed {demo['seed']}, {mode}): {n_sel} of {eligible} tokens selected. "
             f"Over {d['n']:,} draws on this sentence: {d['selected']:.1%} selected (expected 15%), "
             f"and of those {d['mask']:.1%} [MASK], {d['random']:.1%} random, {d['kept']:.1%} kept "
             "(expected 80 / 10 / 10).")
    return (f'<div class="fm-legend">{legend}</div><div class="fm-cells">{"".join(cells)}</div>'
            f'<div class="fm-stats">{html.escape(stats)}</div>')


def pair_table_html(tokens: list[str], ids: list[int], segments: list[int]) -> str:
    """The input as BERT's Fig. 2 lays it out: one column per position; rows token, id, segment, position."""
    head = "".join(f'<th class="{"fm-b" if s else "fm-a"}">{html.escape(token_label(t))}</th>'
                   for t, s in zip(tokens, segments))
    row = lambda name, values: (f"<tr><td class=\"fm-rowname\">{name}</td>"  # noqa: E731
                                + "".join(f"<td>{v}</td>" for v in values) + "</tr>")
    return ('<div class="fm-table-wrap"><table class="fm-table"><tr><td class="fm-rowname">token</td>' + head + "</tr>"
            + row("id x_t", ids) + row("segment s_t (A 0, B 1)", segments) + row("position t", range(len(tokens)))
            + "</table></div>")


def embeddings_figure(tokens: list[str], parts: dict[str, np.ndarray], max_dims: int = 128) -> go.Figure:
    """parts: name -> (T, C) embeddings (E_tok[x_t], E_seg[s_t], E_pos[t], their sum, ...), one heatmap
    each, rows = positions, columns = the first `max_dims` dimensions, one shared colour scale."""
    from plotly.subplots import make_subplots

    names = [f"{i} {token_label(t)}" for i, t in enumerate(tokens)]
    C = next(iter(parts.values())).shape[1]
    shown = min(C, max_dims)
    # a few outlier dimensions (MiniLM has some near ±3) would wash out the rest: clip the scale at the 99th percentile
    bound = float(np.percentile(np.abs(np.concatenate([p[:, :shown] for p in parts.values()])), 99)) or 1.0
    titles = [f"{name}" for name in parts]
    fig = make_subplots(rows=1, cols=len(parts), subplot_titles=titles, horizontal_spacing=0.03, shared_yaxes=True)
    for col, (name, z) in enumerate(parts.items(), start=1):
        fig.add_trace(go.Heatmap(z=np.asarray(z[:, :shown], dtype=np.float32), y=names, colorscale="RdBu_r",
                                 zmin=-bound, zmax=bound, zmid=0, showscale=col == len(parts),
                                 colorbar=dict(thickness=10),
                                 hovertemplate=f"{name}<br>%{{y}}, dimension %{{x}}: %{{z:.3f}}<extra></extra>"),
                      row=1, col=col)
    height = max(320, 120 + 18 * len(tokens))
    fig.update_yaxes(autorange="reversed", type="category", **row_labels(len(tokens), height - 130))  # every token
    fig.update_xaxes(title_text=f"dimension (first {shown} of {C})" if shown < C else "dimension")
    fig.update_layout(**layout(height=height, margin=dict(l=10, r=10, t=50, b=40)))
    return fig


def cards_figure(models: list[dict]) -> go.Figure:
    """models: [{"name", "top1", "top5", "nsp" (or None), "trainable", "total"}] from their cards.
    Left: held-out accuracies; right: trainable and total parameters (log scale), with the ratio."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=["held-out masked-token accuracy (and NSP)",
                                                        "parameters trained vs in the model"],
                        horizontal_spacing=0.12)
    colours = ["#4a7bd0", ACCENT, "#3c9a5f", "#9467bd"]
    for i, m in enumerate(models):
        metrics = [(label, m.get(key)) for label, key in (("top-1", "top1"), ("top-5", "top5"), ("NSP", "nsp"))
                   if m.get(key) is not None]
        colour = colours[i % len(colours)]
        fig.add_trace(go.Bar(x=[label for label, _ in metrics], y=[v for _, v in metrics], name=m["name"],
                             marker_color=colour, text=[f"{v:.1%}" for _, v in metrics], textposition="auto",
                             legendgroup=m["name"], hovertemplate="%{x}: %{y:.1%}<extra>" + m["name"] + "</extra>"),
                      row=1, col=1)
        if m.get("total"):
            trainable = m.get("trainable") or m["total"]
            ratio = trainable / m["total"]
            fig.add_trace(go.Bar(x=["trainable", "total"], y=[trainable, m["total"]], name=m["name"],
                                 marker_color=colour, showlegend=False, legendgroup=m["name"],
                                 text=[f"{trainable / 1e6:.2f}M ({ratio:.1%})", f"{m['total'] / 1e6:.2f}M"],
                                 textposition="auto", hovertemplate="%{x}: %{y:,}<extra>" + m["name"] + "</extra>"),
                          row=1, col=2)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(**layout(height=380, barmode="group", legend=dict(orientation="h", y=-0.15),
                               margin=dict(l=10, r=10, t=50, b=40)))
    return distinguish(fig)


def words_html(units: list[tuple[int, int, str]]) -> str:
    """The text's words and punctuation marks as buttons-like spans (a click masks one, see
    WORD_CLICK_JS); the masks already in the text are marked and not clickable."""
    spans = []
    for i, (_, _, piece) in enumerate(units):
        if piece.upper() == "[MASK]":
            spans.append('<span class="fm-word fm-is-mask">[MASK]</span>')
        else:
            spans.append(f'<span class="fm-word" data-i="{i}" title="click to mask">{html.escape(piece)}</span>')
    if not spans:
        return '<div class="fm-words fm-empty">Type a sentence: its words appear here, click one to mask it.</div>'
    return f'<div class="fm-words">{" ".join(spans)}</div>'


WORD_CLICK_JS = """
element.addEventListener('click', (event) => {
  const word = event.target.closest('.fm-word[data-i]');
  if (!word) return;
  trigger('select', {index: +word.dataset.i, value: word.textContent});
});
"""
