"""Figures of the Inference tab's Speculative decoding view: every verification pass with its accepted and rejected
draft tokens and the model's own token, and the measured time and forward passes against plain greedy decoding.

Each has a text alternative built from the same data (a Markdown summary and table), shown beside it.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.common import ACCENT, MUTED, layout, token_label, visible


def md(text) -> str:
    out = token_label(str(text))
    for ch in "\\`*_{}[]<>()#+!|~":
        out = out.replace(ch, "\\" + ch)
    return out or "∅"


def _tokens(pieces: list[str], kind: str, mark: str) -> str:
    return "".join(f'<span class="tok spec-{kind}" title="{kind}">{visible(p)}<sup>{mark}</sup></span>'
                   for p in pieces)


def steps_html(data: dict) -> str:
    """One line per verification pass: the drafted tokens the model accepted (✓), those it rejected (✗, struck
    through), then the token the model itself wrote (its correction, or the bonus after a draft accepted whole)."""
    rows = []
    for n, step in enumerate(data["steps"], 1):
        a = step["accepted"]
        own = step["emitted"][a:]
        cells = (_tokens(step["drafted"][:a], "accepted", "✓") + _tokens(step["rejected"], "rejected", "✗")
                 + _tokens(own, "model", "●"))
        rows.append(f'<li><span class="spec-pass">pass {n + 1}</span> {cells} '
                    f'<span class="spec-source">{html.escape(step["source"])}</span></li>')
    verdict = ("identical to plain greedy, token for token" if data["identical"] else
               f"differs from plain greedy at new token {data['first_difference']}")
    rate = "no draft" if data["acceptance_rate"] is None else f"{100 * data['acceptance_rate']:.0f}% of drafts accepted"
    return (f'<div class="spec-steps"><p><b>{html.escape(data["draft_label"])}</b>: {rate}; '
            f"{len(data['speculative']['ids'])} new tokens in {data['speculative']['passes']} passes "
            f"(plain greedy: {data['plain']['passes']}). <b>Output {verdict}.</b></p>"
            f'<p class="spec-legend"><span class="tok spec-accepted">accepted ✓</span> '
            f'<span class="tok spec-rejected">rejected ✗</span> <span class="tok spec-model">the model\'s token ●'
            f'</span>. Pass 1 reads the prompt and gives the first token.</p>'
            f'<ol class="spec-list" start="2">{"".join(rows)}</ol>'
            f'<p><b>The text:</b> {visible(data["speculative"]["text"])}</p></div>')


def speed_figure(data: dict) -> go.Figure:
    """Plain greedy against speculative decoding: wall time (the draft's share marked) and the model's passes."""
    plain, spec = data["plain"], data["speculative"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Wall time (s)", "The model's forward passes"],
                        horizontal_spacing=0.12)
    x = ["plain greedy", "speculative"]
    fig.add_trace(go.Bar(x=x, y=[plain["seconds"], spec["seconds"] - spec["draft_seconds"]], name="the model",
                         marker_color=MUTED, hovertemplate="%{x}: %{y:.3f} s<extra>the model</extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=x, y=[0, spec["draft_seconds"]], name="drafting", marker_color=ACCENT,
                         marker_pattern_shape="/", hovertemplate="%{x}: %{y:.3f} s<extra>drafting</extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(x=x, y=[plain["passes"], spec["passes"]], name="passes", marker_color=MUTED,
                         showlegend=False, text=[plain["passes"], spec["passes"]], textposition="auto",
                         hovertemplate="%{x}: %{y} passes<extra></extra>"), row=1, col=2)
    fig.update_layout(**layout(title=dict(text=f"Speed-up: {data['speedup_time']:.2f}x in time, "
                                               f"{data['speedup_passes']:.2f}x in passes", font=dict(size=15)),
                               barmode="stack", height=340, legend=dict(orientation="h", y=-0.2)))
    return fig


def speed_markdown(data: dict) -> str:
    """The figures' text alternative: the two runs, the acceptance, and each pass as a table row."""
    plain, spec = data["plain"], data["speculative"]
    rate = "—" if data["acceptance_rate"] is None else f"{100 * data['acceptance_rate']:.1f}%"
    draft = f", of which drafting {spec['draft_seconds']:.3f} s"
    if data["draft"] == "self":
        draft += f" ({spec['draft_passes']} passes of the first {data['k']} layers)"
    lines = [f"**Plain greedy:** {len(plain['ids'])} tokens, {plain['passes']} passes, {plain['seconds']:.3f} s. "
             f"**Speculative ({data['draft_label']}, γ = {data['gamma']}):** {len(spec['ids'])} tokens, "
             f"{spec['passes']} passes, {spec['seconds']:.3f} s{draft}.",
             "", f"**Speed-up:** {data['speedup_time']:.2f}x in wall time, {data['speedup_passes']:.2f}x in passes. "
                 f"**Accepted:** {data['accepted']} of {data['drafted']} drafted tokens ({rate}); "
                 f"{data['tokens_per_pass']:.2f} new tokens per verification pass. "
                 f"**Same text as plain greedy:** {'yes, token for token' if data['identical'] else 'no'} (the plain "
                 f"run's closest call: its top two logits {data['closest_call']} apart).",
             "", "| pass | drafted | accepted | rejected | the model's token |", "|---|---|---|---|---|"]
    for n, step in enumerate(data["steps"], 2):
        a = step["accepted"]
        lines.append(f"| {n} | {' '.join(md(t) for t in step['drafted']) or '—'} | {a} | "
                     f"{' '.join(md(t) for t in step['rejected']) or '—'} | "
                     f"{' '.join(md(t) for t in step['emitted'][a:]) or '—'} |")
    return "\n".join(lines)
