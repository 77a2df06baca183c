"""Figures of the Class quiz tab: the class's answers beside the true one."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from playground.figures.common import ACCENT, MUTED, layout

MAX_TICKS = 8   # on the count axis; beyond that the step grows, always by whole students


def _order(labels: list[str]) -> list[str]:
    """Numbers in numeric order, then the other answers ('never', choices) in the order given (most frequent first)."""
    numbers = sorted((k for k in labels if k.lstrip("-").isdigit()), key=int)
    return numbers + [k for k in labels if not k.lstrip("-").isdigit()]


def tally_figure(counts: dict[str, int], truth: str, question: str) -> go.Figure:
    """The class's answers as bars, the true one in colour and labelled. The true answer has its bar even when
    nobody chose it (a bar of height 0 is invisible, so its label says so): a class that all missed should see
    where the answer was."""
    truth = truth.lower()                                    # answers are counted lower case (exercises.normalise)
    counts = dict(counts)
    counts.setdefault(truth, 0)
    labels = _order(list(counts))
    heights = [counts[k] for k in labels]
    colours = [ACCENT if k == truth else MUTED for k in labels]
    top = max(heights)
    step = max(1, math.ceil(top / MAX_TICKS))               # a count of students: never a tick at 0.5
    marked = "✓ the answer" + (": nobody chose it" if counts[truth] == 0 else "")
    # above the bar's count; its x is the bar's position (on a category axis "5" would be read as position 5)
    return go.Figure(go.Bar(x=labels, y=heights, marker_color=colours, text=heights, textposition="outside",
                            hovertemplate="%{x}: %{y} answer(s)<extra></extra>"),
                     layout=layout(title=dict(text=question), height=360,
                                   annotations=[dict(x=labels.index(truth), y=counts[truth], text=marked,
                                                     showarrow=False,
                                                     yanchor="bottom", yshift=22, font=dict(color=ACCENT, size=14))],
                                   xaxis=dict(title=dict(text="answer (the true one in colour)"), type="category"),
                                   yaxis=dict(title=dict(text="students"), rangemode="tozero", tick0=0, dtick=step,
                                              range=[0, (top + step) * 1.35])))
