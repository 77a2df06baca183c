"""Figure builders for the Seq2seq attention tab: arrays and labels in, plotly out. No torch, no gradio.

- `alignment_figure`: the decoder's attention weights, target × source (Bahdanau et al. 2015, fig. 3).
- `step_figure`: one decoder step: the weights alpha_ij that make the context vector c_i.
- `bottleneck_figure`: exact-match accuracy against source length for every model (the bottleneck experiment).
- `heads_figure`: a Transformer's cross-attention, one panel per head, beside a recurrent model's alignment.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from playground.figures.common import distinguish, layout

COLOURS = {"none": "#7f7f7f", "bahdanau": "#1f77b4", "dot": "#2ca02c", "general": "#17becf", "transformer": "#d62728"}


def _labels(tokens: list[str]) -> list[str]:
    """Unique category labels: the position first, so a repeated word stays two columns ("3 seven", "7 seven");
    angle brackets as ‹ › (plotly would read </s> as a tag)."""
    return [f"{i} {t}".replace("<", "‹").replace(">", "›") for i, t in enumerate(tokens)]


def _message(text: str, height: int = 300) -> go.Figure:
    fig = go.Figure(layout=layout(height=height, xaxis=dict(visible=False), yaxis=dict(visible=False)))
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=15))
    return fig


def alignment_figure(source: list[str], target: list[str], alpha: np.ndarray | None, title: str,
                     step: int | None = None) -> go.Figure:
    """alpha (T_out, T_src): row i holds the weights of output token i over the source words (each row sums
    to 1). `step` outlines one row. None: a model without attention (a message says why there is no map)."""
    if alpha is None:
        return _message("No attention: the decoder reads the same context vector c = [→h_T ; ←h_1] at every step,<br>"
                        "so there is no alignment to draw. Pick Bahdanau, Luong or the Transformer.")
    x, y = _labels(source), _labels(target)
    fig = go.Figure(go.Heatmap(
        z=np.asarray(alpha, dtype=np.float32), x=x, y=y, colorscale="Blues", zmin=0, zmax=1,
        hovertemplate="output %{y}<br>source %{x}<br>α = %{z:.3f}<extra></extra>",
        colorbar=dict(title=dict(text="α"), thickness=12),
    ), layout=layout(
        title=dict(text=title), height=max(420, min(1000, 220 + 24 * len(target))),
        xaxis=dict(title=dict(text="source word j"), tickangle=-60, type="category", showgrid=False, dtick=1),
        yaxis=dict(title=dict(text="output token i"), autorange="reversed", type="category", showgrid=False,
                   dtick=1),
        margin=dict(l=10, r=10, t=60, b=10),
    ))
    if step is not None and 0 <= step < len(target):
        fig.add_shape(type="rect", xref="paper", x0=0, x1=1, yref="y", y0=step - 0.5, y1=step + 0.5,
                      line=dict(color="#d9534f", width=2))
    return fig


def step_figure(source: list[str], weights: np.ndarray | None, title: str) -> go.Figure:
    """weights (T_src,): alpha_ij for one decoder step i; the context vector is c_i = sum_j alpha_ij h_j."""
    if weights is None:
        return _message("No attention: c_i = c for every i (the same bar at every step would be meaningless).", 260)
    fig = go.Figure(go.Bar(x=_labels(source), y=np.asarray(weights, dtype=np.float32), marker_color="#1f77b4",
                           hovertemplate="%{x}: α = %{y:.3f}<extra></extra>"),
                    layout=layout(title=dict(text=title), height=340,  # the bars keep room under larger type
                                  xaxis=dict(type="category", tickangle=-60, title=dict(text="source word j")),
                                  yaxis=dict(range=[0, 1.02], title=dict(text="α_ij"))))
    return fig


def bottleneck_figure(series: dict[str, dict], labels: dict[str, str], trained_up_to: int, title: str) -> go.Figure:
    """series: model -> {"length": [...], "accuracy": [...]} (accuracy in [0, 1]); lengths past
    `trained_up_to` are shaded: no model saw sources that long."""
    fig = go.Figure(layout=layout(
        title=dict(text=title), height=420, legend=dict(orientation="h", y=-0.22),
        xaxis=dict(title=dict(text="source length (words, commas included)")),
        yaxis=dict(title=dict(text="exact match (held-out)"), range=[-0.02, 1.02], tickformat=".0%"),
    ))
    longest = max((max(s["length"]) for s in series.values() if s["length"]), default=trained_up_to)
    if longest > trained_up_to:
        fig.add_vrect(x0=trained_up_to + 0.5, x1=longest + 0.5, fillcolor="#f0ad4e", opacity=0.15, line_width=0)
        # its note above the plot, where the lines never run
        fig.add_annotation(text="longer than any training source", x=trained_up_to + 0.5, xref="x", xanchor="left",
                           y=1, yref="paper", yanchor="bottom", showarrow=False)
    for key, s in series.items():
        fig.add_trace(go.Scatter(x=s["length"], y=s["accuracy"], name=labels.get(key, key), mode="lines+markers",
                                 line=dict(color=COLOURS.get(key), width=3 if key == "none" else 2),
                                 hovertemplate="%{x} words: %{y:.1%}<extra>" + labels.get(key, key) + "</extra>"))
    return distinguish(fig)


def heads_figure(source: list[str], rnn_target: list[str], rnn_alpha: np.ndarray | None, rnn_title: str,
                 tr_target: list[str], cross: np.ndarray, layer: int) -> go.Figure:
    """A recurrent model's alignment (T_out, T_src) and the Transformer's cross-attention in one layer,
    cross (n_head, T_out', T_src), one panel per head, on the same source."""
    from plotly.subplots import make_subplots  # imported on first use (startup)

    H = cross.shape[0]
    cols = 1 + H
    # short panel titles (a fifth of the width each, ran into each other in a projector's type): the layer is said once
    titles = [rnn_title] + [f"head {h}" for h in range(H)]
    fig = make_subplots(rows=1, cols=cols, subplot_titles=titles, horizontal_spacing=0.025)
    x = _labels(source)
    if rnn_alpha is not None:
        fig.add_trace(go.Heatmap(z=np.asarray(rnn_alpha, dtype=np.float32), x=x, y=_labels(rnn_target),
                                 colorscale="Blues", zmin=0, zmax=1, showscale=False,
                                 hovertemplate="output %{y}<br>source %{x}<br>α = %{z:.3f}<extra></extra>"),
                      row=1, col=1)
    else:
        fig.add_annotation(text="no attention", showarrow=False, xref="x domain", yref="y domain", x=0.5, y=0.5)
    for h in range(H):
        fig.add_trace(go.Heatmap(z=np.asarray(cross[h], dtype=np.float32), x=x, y=_labels(tr_target),
                                 colorscale="Reds", zmin=0, zmax=1, showscale=False,
                                 hovertemplate=f"head {h}<br>output %{{y}}<br>source %{{x}}<br>weight %{{z:.3f}}"
                                               "<extra></extra>"), row=1, col=2 + h)
    n = max(len(rnn_target), len(tr_target))
    title = f"Left: {rnn_title}; then the Transformer's layer {layer}, head by head"
    fig.update_layout(**layout(title=dict(text=title),
                               height=max(420, min(940, 240 + 22 * n)), margin=dict(l=10, r=10, t=90, b=10)))
    fig.update_yaxes(autorange="reversed", type="category", showticklabels=False, showgrid=False, dtick=1)
    fig.update_yaxes(showticklabels=True, col=1)
    # upright labels: a narrow panel holds more of them than at -60°
    fig.update_xaxes(type="category", tickangle=-90, showgrid=False, tickfont=dict(size=10), dtick=1)
    return distinguish(fig)
