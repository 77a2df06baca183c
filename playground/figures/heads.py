"""Figures for the Attention tab's head finder and induction view, each with its text alternative (Markdown made from
the same numbers). Plain data in (the JSON of analysis/head_finder.py and analysis/induction.py), plotly or Markdown
out; no torch, no gradio.

- `finder_figure`: one statistic for every head (layers down, heads across), the top-ranked heads outlined;
- `finder_md`: the ranking's first rows as a table, every statistic of each head;
- `copy_loss_figure`: each token's loss along the repeated random sequence, the two copies shaded, chance marked
  (and, after an ablation, the same losses with the top induction heads and with as many other heads knocked out);
- `scores_figure`: every head placed by its previous-token (x) and induction (y) score, coloured by layer;
- `induction_md`: the two copies' losses and the strongest heads as tables, and the ablation's losses in words.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from playground.figures.common import ACCENT, MUTED, distinguish, layout

SHORT = {"entropy": "entropy", "distance": "distance", "previous": "previous", "first": "first",
         "duplicate": "duplicate", "induction": "induction"}
WEIGHTS = ("previous", "first", "duplicate", "induction")   # shares of a query's attention: coloured from 0 to 1


def _cell(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def finder_figure(data: dict, top: int) -> go.Figure:
    """The chosen statistic of every head as a heatmap; the `top` first heads of the ranking outlined and numbered."""
    stat, table = data["stat"], np.array(data["stats"][data["stat"]], dtype=float)
    L, H = table.shape
    # a fixed scale, said on the colour bar: a share of attention from 0 to 1 (a head at 0.04 is pale, whatever the
    # largest is), entropy and distance from 0 to their largest here
    zmax = 1.0 if stat in WEIGHTS else max(float(np.nanmax(table)), 1e-9)
    scale = "0 to 1" if stat in WEIGHTS else f"0 to the largest, {zmax:.2f}"
    fig = go.Figure(go.Heatmap(z=table, x=[f"h{h}" for h in range(H)], y=[f"layer {l}" for l in range(L)],
                               colorscale="Blues", zmin=0, zmax=zmax,
                               colorbar=dict(title=f"{SHORT[stat]}<br>({scale})", thickness=12),
                               hovertemplate=f"%{{y}}, %{{x}}: {stat} %{{z:.3f}}<extra></extra>"))
    ranked = data["ranking"][:top]
    fig.add_trace(go.Scatter(x=[f"h{r['head']}" for r in ranked], y=[f"layer {r['layer']}" for r in ranked],
                             mode="markers+text", text=[str(i + 1) for i in range(len(ranked))],
                             textfont=dict(color=ACCENT, size=11), name="ranked",
                             marker=dict(symbol="square-open", size=16, color=ACCENT, line=dict(width=2)),
                             hovertemplate="rank %{text}: %{y}, %{x}<extra></extra>", showlegend=False))
    where = "the corpus sample" if data["source"] == "corpus" else "your text"
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(**layout(title=f"{stat} of every head over {where} ({data['order']} first: the numbered)",
                               height=max(320, 120 + 22 * L), margin=dict(l=80, r=10, t=50, b=40)))
    return distinguish(fig)


def finder_md(data: dict, top: int, descriptions: dict[str, str]) -> str:
    """The ranking's first `top` heads as a Markdown table with all six statistics: the figure's text alternative."""
    stat = data["stat"]
    where = ("the corpus sample (" + html.escape(data["corpus"]) + ", " + str(data["protocol"]["windows"])
             + " windows)" if data["source"] == "corpus" else f"your text ({len(data['tokens'])} tokens)")
    head = "| rank | layer | head | " + " | ".join(SHORT) + " |\n|" + "---|" * (3 + len(SHORT)) + "\n"
    rows = "".join(f"| {i + 1} | {r['layer']} | {r['head']} | "
                   + " | ".join((f"**{_cell(r[k])}**" if k == stat else _cell(r[k])) for k in SHORT) + " |\n"
                   for i, r in enumerate(data["ranking"][:top]))
    n = data["layers"] * data["heads"]
    return (f"**{n} heads ranked by {descriptions[stat]}**, {data['order']} first, over {where}. "
            f"Open one in the head view below.\n\n" + head + rows)


def copy_loss_figure(data: dict) -> go.Figure:
    """Each token's loss along prefix + r + r: the first copy (unpredictable) and the second (predictable by
    induction) shaded, their means and ln(vocabulary) drawn."""
    losses, p, n = data["losses"], data["prefix"], data["n"]
    x = list(range(1, len(losses) + 1))
    fig = go.Figure(go.Scatter(x=x, y=losses, mode="lines+markers", name="loss of each token",
                               line=dict(color="#1f77b4"), marker=dict(size=4),
                               hovertemplate="token %{x}: %{y:.2f} nats<extra></extra>"))
    ablation = data.get("ablation")
    if ablation:
        k = ablation["k"]
        for name, label, style in (("induction_heads", f"top {k} induction heads knocked out", "solid"),
                                   ("control_heads", f"{k} other heads knocked out", "dash")):
            fig.add_trace(go.Scatter(x=x, y=ablation["runs"][name]["losses"], mode="lines", name=label,
                                     line=dict(color="#d62728" if style == "solid" else "#7f7f7f", dash=style),
                                     hovertemplate=f"{label}, token %{{x}}: %{{y:.2f}} nats<extra></extra>"))
    shapes, notes = [], []  # written into the layout at once: plotly's add_vrect and add_hline take ~0.1 s each
    # Each copy's mean is drawn across its own copy and named at that copy's right end, the chance line across both
    # and named at the left: two notes at one place were drawn on top of each other whenever the means were close
    # (a model that does not copy). Within the first copy, the chance note (left) and its mean's (right) sit apart.
    regions = ((p, p + n - 1, "first copy", MUTED, data["first_copy_loss"]),
               (p + n, p + 2 * n - 1, "second copy", ACCENT, data["second_copy_loss"]))
    for lo, hi, name, colour, mean in regions:
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=lo - 0.5, x1=hi + 0.5, y0=0, y1=1, line_width=0,
                           fillcolor=colour, opacity=0.12))
        notes.append(dict(xref="x", yref="paper", x=lo - 0.5, y=1, text=name, showarrow=False, xanchor="left",
                          yanchor="bottom"))
        shapes.append(dict(type="line", xref="x", yref="y", x0=lo - 0.5, x1=hi + 0.5, y0=mean, y1=mean,
                           line=dict(dash="dot", color=colour)))
        notes.append(dict(xref="x", yref="y", x=hi + 0.5, y=mean, text=f"{name}'s mean {mean:.2f}", showarrow=False,
                          xanchor="right", yanchor="top"))
    chance = data["chance_loss"]
    shapes.append(dict(type="line", xref="paper", yref="y", x0=0, x1=1, y0=chance, y1=chance,
                       line=dict(dash="dot", color="#7f7f7f")))
    notes.append(dict(xref="x", yref="y", x=p - 0.5, y=chance, text=f"chance: ln(vocabulary) {chance:.2f}",
                      showarrow=False, xanchor="left", yanchor="top"))
    fig.update_layout(**layout(title=f"{data['label']}: loss on {n} random tokens, then the same {n} again",
                               xaxis=dict(title="position in the sequence"), yaxis=dict(title="loss (nats)"),
                               height=380, showlegend=bool(ablation), shapes=shapes, annotations=notes,
                               legend=dict(orientation="h", y=-0.25)))
    return distinguish(fig)


def scores_figure(data: dict) -> go.Figure:
    """Every head at (previous-token score, induction score), coloured by layer: induction heads sit high, the
    previous-token heads that feed them far right."""
    ind, prev = np.array(data["induction"]), np.array(data["previous"])
    L, H = ind.shape
    layer = np.repeat(np.arange(L), H)
    head = np.tile(np.arange(H), L)
    fig = go.Figure(go.Scatter(x=prev.ravel(), y=ind.ravel(), mode="markers",
                               customdata=np.stack([layer, head], axis=1),
                               marker=dict(color=layer, colorscale="Viridis", size=9, showscale=True,
                                           colorbar=dict(title="layer", thickness=12), line=dict(width=0.5)),
                               hovertemplate=("layer %{customdata[0]}, head %{customdata[1]}: induction %{y:.3f}, "
                                              "previous-token %{x:.3f}<extra></extra>")))
    fig.update_layout(**layout(title=f"Every head of {data['label']}: induction against previous-token score",
                               xaxis=dict(title="previous-token score", range=[-0.02, 1.02]),
                               yaxis=dict(title="induction score", range=[-0.02, 1.02]), height=420))
    return distinguish(fig)


def _top_table(data: dict, key: str, k: int) -> str:
    table = np.array(data[key])
    order = sorted(((-table[l, h], l, h) for l in range(table.shape[0]) for h in range(table.shape[1])))[:k]
    rows = "".join(f"| {l} | {h} | {data['induction'][l][h]:.3f} | {data['previous'][l][h]:.3f} | "
                   f"{data['duplicate'][l][h]:.3f} |\n" for _, l, h in order)
    return "| layer | head | induction | previous-token | duplicate-token |\n|---|---|---|---|---|\n" + rows


def induction_md(data: dict, k: int = 5) -> str:
    """What the two figures show, in words and tables from the same numbers."""
    fell = data["first_copy_loss"] - data["second_copy_loss"]
    verdict = (f"The loss falls by {fell:.2f} nats on the second copy: the model copies from the first, the "
               "signature of induction heads." if fell > 0.5 else
               f"The loss does not fall on the second copy ({fell:+.2f} nats): this model does not copy the "
               "repeated sequence, and no head needs to be an induction head for it.")
    return (f"**{data['label']}**, {data['n']} distinct random tokens (seed {data['seed']}) then the same again"
            f"{' after the document start' if data['prefix'] else ''}. Mean loss over each copy's tokens after its "
            f"first: first copy **{data['first_copy_loss']:.2f}** nats, second copy "
            f"**{data['second_copy_loss']:.2f}** (chance, ln of the {data['vocabulary']:,} tokens drawn from: "
            f"{data['chance_loss']:.2f}). {verdict}\n\n"
            f"Strongest induction heads (of {len(data['induction']) * len(data['induction'][0])}):\n\n"
            + _top_table(data, "induction", k) + "\nStrongest previous-token heads:\n\n"
            + _top_table(data, "previous", k) + _ablation_md(data.get("ablation")))


def _ablation_md(a: dict | None) -> str:
    """The knockout's three runs in words: the second copy's loss as it is, without the top induction heads and
    without as many other heads (the sanity check), and what a student may conclude."""
    if not a:
        return ""
    runs = a["runs"]
    base, top, other = (runs[name]["second_copy_loss"] for name in ("none", "induction_heads", "control_heads"))
    named = ", ".join(f"{h['layer']}.{h['head']}" for h in a["induction_heads"])
    control = ", ".join(f"{h['layer']}.{h['head']}" for h in a["control_heads"])
    verdict = ("Knocking out the induction heads undoes much more of the copying than knocking out as many other "
               "heads: they are what the model copies with (on this sequence; a larger k, or another seed, tests it "
               "further)." if top - base > 2 * abs(other - base) and top - base > 0.5 else
               "Knocking out these heads does not undo the copying much more than knocking out as many other heads: "
               "on this model and sequence, the induction scores do not single out the heads the copying needs.")
    return (f"\n\n**Knockout** ({a['how']}): second copy's mean loss **{base:.2f}** nats as it is, **{top:.2f}** "
            f"without the top {a['k']} induction heads ({named}), **{other:.2f}** without {a['control']} "
            f"({control}). {verdict}")
