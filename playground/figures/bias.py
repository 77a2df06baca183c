"""Figure builders of the Embeddings tab's *Bias in embeddings* view: the projections on a gender direction as a
sorted bar chart, each target word's association s(w, A, B) as bars, and their text alternatives and the WEAT
table in Markdown, all from the data of playground/analysis/embeddings/bias.py. No torch, no gradio.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from playground.figures.common import ACCENT, distinguish, layout

FIRST, SECOND = "#1f77b4", ACCENT     # the pairs' first words (he) and second words (she)
SHOWN = 5                             # words named at each end in the text alternative
BAR_PX = 22                           # height per bar: plotly drops every other label below ~20 px


def _md(text: str) -> str:
    """User text in Markdown: HTML escaped, and the characters that would start emphasis or a table cell."""
    return html.escape(text).replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def projection_figure(rows: list[dict], title: str) -> go.Figure:
    """rows: [{word, projection}] sorted (he first). One horizontal bar per word, the first at the top, coloured
    by the side it leans to."""
    words = [r["word"] for r in rows]
    values = [r["projection"] for r in rows]
    bar = go.Bar(x=values, y=words, orientation="h", name="cos(w, g)",
                 marker=dict(color=[FIRST if v >= 0 else SECOND for v in values]),
                 hovertemplate="%{y}: %{x:+.3f}<extra></extra>")
    return go.Figure(bar, layout=layout(title=dict(text=title), height=max(320, BAR_PX * len(rows) + 110),
                                        yaxis=dict(autorange="reversed", automargin=True),
                                        xaxis=dict(title=dict(text="cos(w, g)  ← she · he →"), zeroline=True),
                                        showlegend=False))


def projection_md(data: dict) -> str:
    """The chart's text alternative, from the same rows: the words leaning most to each side, with their
    projections, and what the direction is made of."""
    rows, pairs = data["projections"], data["direction"]["pairs"]
    if not rows:
        return "None of the words is in the vocabulary."
    first, second = pairs[0]["pair"] if pairs else ("he", "she")
    n = min(SHOWN, len(rows))
    he = ", ".join(f"{_md(r['word'])} ({r['projection']:+.2f})" for r in rows[:n])
    she = ", ".join(f"{_md(r['word'])} ({r['projection']:+.2f})" for r in reversed(rows[-n:]))
    missing = f" Not in {data['source']}'s vocabulary: {_md(', '.join(data['missing']))}." if data["missing"] else ""
    made = "one pair's difference" if len(pairs) == 1 else f"the mean of {len(pairs)} pairs' differences"
    left = data["direction"]["missing"]
    left = f"; left out, not in its vocabulary: {_md(', '.join(left))}" if left else ""
    return (f"In {data['source']}, the {n} words leaning most to *{_md(first)}* are {he}; the {n} leaning most to "
            f"*{_md(second)}* are {she} (cosine with g, {made}{left}).{missing}")


def association_figure(row: dict, labels: tuple[str, str], title: str) -> go.Figure:
    """One model's s(w, A, B) for each target word: one trace for X, one for Y, each sorted, so the gap
    between the two sets (what d measures) is visible word by word."""
    traces = []
    for key, label, colour in (("X", labels[0], FIRST), ("Y", labels[1], SECOND)):
        pairs = sorted(row["association"][key], key=lambda p: -p[1])
        traces.append(go.Bar(x=[p[1] for p in pairs], y=[f"{p[0]} ({label})" for p in pairs], orientation="h",
                             name=label, marker=dict(color=colour),
                             hovertemplate="%{y}: s = %{x:+.3f}<extra></extra>"))
    n = sum(len(row["association"][k]) for k in "XY")
    fig = go.Figure(traces, layout=layout(title=dict(text=title), height=max(320, BAR_PX * n + 110),
                                          yaxis=dict(autorange="reversed", automargin=True),
                                          xaxis=dict(title=dict(text="s(w, A, B)"), zeroline=True)))
    return distinguish(fig)


def _p(row: dict) -> str:
    """The p-value as it was computed: exact over every split, or from a seeded sample (then never '0')."""
    if row["exact"]:
        return f"{row['p_value']:.4f} (exact, {row['splits']:,} splits)"
    if row["greater"] == 0:
        return f"< {1 / row['splits']:.4f} (none of {row['splits']:,} sampled splits, seed {row['seed']})"
    return f"{row['p_value']:.4f} ({row['splits']:,} sampled splits of {row['all_splits']:.2e}, seed {row['seed']})"


def weat_md(weat: dict) -> str:
    """The WEAT on each model as a Markdown table, then the words each model lacks."""
    sets = weat["sets"]
    head = (f"**X** = {_md(sets['X']['label'])}, **Y** = {_md(sets['Y']['label'])}, "
            f"**A** = {_md(sets['A']['label'])}, **B** = {_md(sets['B']['label'])}\n\n"
            "| model | words used (X, Y, A, B) | s(X, Y, A, B) | effect size d | p (one-sided) |\n"
            "|---|---|---|---|---|")
    lines, gaps = [], []
    for row in weat["models"]:
        used = ", ".join(str(len(row["used"][k])) for k in "XYAB")
        if "error" in row:
            lines.append(f"| {row['source']} | {used} | {row['error']} | | |")
        else:
            lines.append(f"| {row['source']} | {used} | {row['statistic']:+.3f} | **{row['effect_size']:+.2f}** "
                         f"| {_p(row)} |")
    missing = [f"{_md(sets[k]['label'])}: {_md(', '.join(row['missing'][k]))}"
               for row in weat["models"][:1] for k in "XYAB" if row["missing"][k]]
    same = all(r["missing"] == weat["models"][0]["missing"] for r in weat["models"])
    if missing:
        gaps.append(("Not in the vocabulary" + (" (of every model)" if same else f" of {weat['models'][0]['source']}")
                     + ", left out: " + "; ".join(missing) + "."))
    if not same:
        for row in weat["models"][1:]:
            more = [f"{_md(sets[k]['label'])}: {_md(', '.join(row['missing'][k]))}"
                    for k in "XYAB" if row["missing"][k]]
            gaps.append(f"Not in {row['source']}'s vocabulary: " + ("; ".join(more) or "none") + ".")
    return "\n".join([head, *lines]) + ("\n\n" + " ".join(gaps) if gaps else "")
