"""Figures of the Class quiz tab: the class's answers beside the true one."""

from __future__ import annotations

import plotly.graph_objects as go

from playground.figures.common import ACCENT, MUTED, layout


def tally_figure(counts: dict[str, int], truth: str, question: str) -> go.Figure:
    """The class's answers as bars (numbers in order, other answers most frequent first), the true one in colour."""
    labels = list(counts)
    numeric = all(k.lstrip("-").isdigit() for k in labels)
    if numeric:
        labels.sort(key=int)
    colours = [ACCENT if k == truth.lower() else MUTED for k in labels]
    return go.Figure(go.Bar(x=labels, y=[counts[k] for k in labels], marker_color=colours,
                            hovertemplate="%{x}: %{y} answer(s)<extra></extra>"),
                     layout=layout(title=dict(text=question), height=360,
                                   xaxis=dict(title=dict(text="answer (the true one in colour)"), type="category"),
                                   yaxis=dict(title=dict(text="students"), rangemode="tozero")))
