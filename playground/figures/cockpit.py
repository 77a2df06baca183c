"""The lecturer's cockpit: a workshop's funnel, step by step (how many students reached, answered, answered right).

Plain data in (playground/rooms/progress.cockpit's `workshops`), a plotly figure out. Its text alternative is the
cockpit's funnel table, computed from the same data (ui/cockpit.py)."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from playground.figures.common import ACCENT, MUTED, count_axis, distinguish, layout

# reached, answered, right: the grey of the whole, the answered, the accent of the right
SERIES = (("reached", "reached", "#c9ced6"), ("answered", "answered", MUTED), ("correct", "answered right", ACCENT))


def funnel_figure(workshop: dict) -> go.Figure:
    """Three bars per step of one workshop (progress.cockpit's `workshops[i]`): reached, answered, answered right."""
    name = html.escape(workshop["workshop"])    # plotly reads tags in a title: an id is shown as text
    steps = [f"step {s['step']}" for s in workshop["steps"]]
    top = max([s["reached"] for s in workshop["steps"]] + [1])
    bars = [go.Bar(name=label, x=steps, y=[s[key] for s in workshop["steps"]], marker_color=colour,
                   text=[s[key] for s in workshop["steps"]], textposition="outside",
                   hovertemplate=f"%{{x}}: %{{y}} student(s) {label}<extra></extra>")
            for key, label, colour in SERIES]
    fig = go.Figure(bars, layout=layout(title=dict(text=f"Workshop {name}: the class step by step"),
                                        barmode="group", height=360,
                                        xaxis=dict(type="category"),
                                        yaxis=dict(title=dict(text="students"), rangemode="tozero",
                                                   range=[0, top * 1.3], **count_axis(top * 1.25))))
    return distinguish(fig)
