"""Figures of the Causal lab: the patching grids, an ablation's before and after, the heads sweep, steering.

Each figure has a text alternative built from the same data (a Markdown summary and table), shown beside it: the
numbers a screen reader reads are the ones the picture draws.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.common import ACCENT, MUTED, distinguish, fixed, layout, token_label

DIVERGING = "RdBu"        # blue: the clean answer restored; red: pushed further toward the corrupted one


def md(text) -> str:
    """User text (a token, a word) safe inside Markdown: its markup characters escaped."""
    out = token_label(str(text))
    for ch in "\\`*_{}[]<>()#+!|~":
        out = out.replace(ch, "\\" + ch)
    return out or "∅"


def _positions(data: dict) -> list[str]:
    """Column labels: the clean token, and "clean/corrupted" where the two prompts differ."""
    return [f"{t}: {token_label(a)}" if a == b else f"{t}: {token_label(a)}/{token_label(b)}"
            for t, (a, b) in enumerate(zip(data["clean_tokens"], data["corrupted_tokens"]))]


def _grid(part: dict) -> tuple[list, bool]:
    """The normalised grid, or the raw changes when normalising is 0/0."""
    return (part["normalised"], True) if part["normalised"] is not None else (part["raw"], False)


# ---------------------------------------------------------------------------------------------
# Patching


def _reinit_scaled(data: dict) -> list | None:
    """The re-initialised model's raw changes over the trained model's clean − corrupted margin, so that its grid is
    drawn on the trained one's scale: normalised by its own margin (-0.51 vs -0.47: a gap of 0.04) its noise looked
    as vivid as a real effect. None when the trained margin is 0/0 (the raw changes are drawn then)."""
    if "sanity" not in data or data["exact"]["normalised"] is None:
        return None
    gap = data["metric_clean"] - data["metric_corrupted"]
    return [[v / gap for v in row] for row in data["sanity"]["reinit"]["raw"]]


def patch_figure(data: dict) -> go.Figure:
    """The exact grid, the attribution grid and the re-initialised model's grid, layers × positions, side by side,
    on one colour scale: the share of the trained model's margin restored (the re-initialised model's too), or,
    when that is 0/0, the raw change of the metric up to the largest of the trained model's grids."""
    normalised = data["exact"]["normalised"] is not None
    panels = [("Exact patching", _grid(data["exact"])[0])]
    if "attribution" in data:
        panels.append(("Attribution patching", _grid(data["attribution"])[0]))
    limit = 1.0 if normalised else max([1e-9] + [abs(v) for _, z in panels for row in z for v in row])
    if "sanity" in data:
        reinit = _reinit_scaled(data)
        panels.append(("Sanity: re-initialised" + ("<br>on the trained scale" if normalised else " model"),
                       reinit if normalised else data["sanity"]["reinit"]["raw"]))
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[0] for p in panels], shared_yaxes=True,
                        horizontal_spacing=0.04)
    x, y = _positions(data), [f"layer {l}" for l in range(data["layers"])]
    for i, (title, z) in enumerate(panels, start=1):
        fig.add_trace(go.Heatmap(z=z, x=x, y=y, colorscale=DIVERGING, zmid=0, zmin=-limit, zmax=limit,
                                 showscale=i == 1, name=title,
                                 colorbar=dict(title="restored" if normalised else "Δ metric", len=0.8),
                                 hovertemplate="%{y}, %{x}<br>" + ("restored %{z:.3f}" if normalised
                                                                   else "Δ metric %{z:.3f}") + "<extra></extra>"),
                      row=1, col=i)
    agreement = data.get("agreement")
    shown = "" if agreement is None else f"; exact vs attribution r = {agreement:.2f}"
    metric = f"logit({token_label(data['answer']['text'])}) − logit({token_label(data['other']['text'])})"
    fig.update_layout(**layout(title=dict(text=f"{data['site']} patching, metric {metric}{shown}", font=dict(size=15)),
                               height=max(320, 22 * data["layers"] + 160), margin=dict(l=70, r=10, t=80, b=90)))
    fig.update_yaxes(autorange="reversed")
    return fig


def _top_cells(grid: list, x: list[str], n: int = 5) -> list[tuple[float, int, str]]:
    cells = sorted(((v, layer, x[t]) for layer, row in enumerate(grid) for t, v in enumerate(row)),
                   key=lambda c: -abs(c[0]))
    return cells[:n]


def _cells(cells: list[tuple[float, int, str]]) -> str:
    return "; ".join(f"layer {layer}, {md(position)}: {fixed(v)}" for v, layer, position in cells)


def patch_markdown(data: dict) -> str:
    """The grid as text: the metric on both prompts, the cells that restore most, agreement, sanity, the table."""
    x = _positions(data)
    z, normalised = _grid(data["exact"])
    unit = "restored (0 = corrupted, 1 = clean)" if normalised else "change of the metric (normalising is 0/0)"
    lines = [f"**Metric** logit({md(data['answer']['text'])}) − logit({md(data['other']['text'])}): "
             f"clean {fixed(data['metric_clean'])}, corrupted {fixed(data['metric_corrupted'])}. Cells: {unit}.", "",
             "**Largest exact effects:** " + _cells(_top_cells(z, x))]
    if "attribution" in data:
        a, _ = _grid(data["attribution"])
        lines.append("**Largest by attribution:** " + _cells(_top_cells(a, x)))
        r = "undefined (a constant grid)" if data["agreement"] is None else fixed(data["agreement"])
        lines.append(f"**Agreement** (Pearson r over all cells): {r}. Where they differ, the model is not linear "
                     "between the two prompts.")
    if "sanity" in data:
        s = data["sanity"]
        re = s["reinit"]
        reinit = _reinit_scaled(data)
        scaled = "" if reinit is None else (
            f"; on the trained model's scale its largest cell is {max(abs(v) for row in reinit for v in row):.3f} "
            f"(the trained model's: {max(abs(v) for row in z for v in row):.3f})")
        lines.append(f"**Sanity:** two clean prompts change the metric by at most {s['clean_clean_max_abs']:.1e} "
                     f"(nothing to restore); the re-initialised model's margin is {fixed(re['metric_clean'])} vs "
                     f"{fixed(re['metric_corrupted'])}{scaled}: any pattern it shows is not knowledge.")
    lines += ["", "| layer | " + " | ".join(md(p) for p in x) + " |", "|---" * (len(x) + 1) + "|"]
    lines += [f"| {l} | " + " | ".join(fixed(v) for v in row) + " |" for l, row in enumerate(z)]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Ablation and the sweep


def ablate_figure(data: dict) -> go.Figure:
    """Left: the top tokens' probabilities before and after; right: the loss at every position before and after."""
    at = token_label(data["tokens"][data["position"]])
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"Prediction at {at}", "Loss per position"],
                        horizontal_spacing=0.1)
    ids = [t["id"] for t in data["before"]] + [t["id"] for t in data["after"] if t["id"] not in
                                                 {b["id"] for b in data["before"]}]
    label = {t["id"]: token_label(t["token"]) for t in data["before"] + data["after"]}
    after = {t["id"]: t["prob"] for t in data["after"]}
    after.update({m["id"]: m["after"] for m in data["movers"]})
    before = {t["id"]: t["prob"] for t in data["before"]}
    before.update({m["id"]: m["before"] for m in data["movers"]})
    x = [f"{label[i]} " for i in ids]
    fig.add_trace(go.Bar(x=x, y=[before.get(i, 0) for i in ids], name="before", marker_color=MUTED), row=1, col=1)
    fig.add_trace(go.Bar(x=x, y=[after.get(i, 0) for i in ids], name="after", marker_color=ACCENT), row=1, col=1)
    positions = [f"{t}: {token_label(tok)}" for t, tok in enumerate(data["tokens"])]
    for name, key, colour in (("loss before", "loss_before", MUTED), ("loss after", "loss_after", ACCENT)):
        fig.add_trace(go.Scatter(x=positions, y=data[key], name=name, mode="lines+markers",
                                 line=dict(color=colour)), row=1, col=2)
    what = {"head": f"head {data['head']} of layer {data['layer']}", "attn": f"layer {data['layer']}'s attention",
            "mlp": f"layer {data['layer']}'s MLP"}[data["target"]]
    fig.update_layout(**layout(title=dict(text=f"{what} ablated ({data['how']}): KL = {data['kl']:.3f} nats",
                                          font=dict(size=15)), barmode="group", height=380))
    return distinguish(fig)


def ablate_markdown(data: dict) -> str:
    top1 = data["top1"]
    lines = [f"**KL(before ‖ after)** = {data['kl']:.4f} nats. The top token {md(top1['token'])}: log p "
             f"{fixed(top1['logp_before'], 3)} → {fixed(top1['logp_after'], 3)} ({top1['change']:+.3f}).", "",
             "| token | before | after | change |", "|---|---|---|---|"]
    lines += [f"| {md(m['token'])} | {m['before']:.3f} | {m['after']:.3f} | {m['change']:+.3f} |"
              for m in data["movers"]]
    if "sanity" in data:
        s = data["sanity"]
        lines += ["", f"**Sanity**, the same ablation on the re-initialised model: KL = {s['kl']:.4f}, top-token log p "
                      f"change {s['top1_change']:+.3f}."]
    return "\n".join(lines)


def sweep_figure(data: dict) -> go.Figure:
    """KL(before ‖ after) of every head knocked out, layers × heads."""
    fig = go.Figure(go.Heatmap(z=data["kl"], x=[f"head {h}" for h in range(data["heads"])],
                               y=[f"layer {l}" for l in range(data["layers"])], colorscale="Reds", zmin=0,
                               colorbar=dict(title="KL"),
                               hovertemplate="%{y}, %{x}<br>KL %{z:.4f} nats<extra></extra>"))
    fig.update_layout(**layout(title=dict(text=f"Which heads matter here? Each knocked out ({data['how']}) in turn",
                                          font=dict(size=15)), height=max(300, 18 * data["layers"] + 140)))
    fig.update_yaxes(autorange="reversed")
    return fig


def sweep_markdown(data: dict, n: int = 10) -> str:
    lines = [f"The prediction {md(data['top1']['token'])} (log p {fixed(data['top1']['logp'], 3)}); the "
             f"{n} heads whose ablation moves it most:", "", "| rank | layer | head | KL | Δ log p(top) |",
             "|---|---|---|---|---|"]
    lines += [f"| {i + 1} | {r['layer']} | {r['head']} | {r['kl']:.4f} | {r['top1_change']:+.3f} |"
              for i, r in enumerate(data["ranking"][:n])]
    if "sanity" in data:
        lines += ["", f"**Sanity:** on the re-initialised model the largest KL of any head is "
                      f"{data['sanity']['max_kl']:.4f}."]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Steering


def steer_figure(data: dict) -> go.Figure:
    """What each chosen word gains or loses at the prompt's last position: the shift of its log-probability,
    log p_with − log p_without (its sign is the probability's; a logit's own shift is not, every logit moving), by
    the contrast's direction, and by the sanity check's random direction of the same norm beside it (grey)."""
    words = [token_label(s["word"]) for s in data["shifts"]]
    shifts = [s["logp_shift"] for s in data["shifts"]]
    ratios = [[s["prob_without"], s["prob_with"]] for s in data["shifts"]]
    fig = go.Figure(go.Bar(x=words, y=shifts, name="the contrast's direction", customdata=ratios,
                           marker_color=[ACCENT if v < 0 else "#3b7dd8" for v in shifts],
                           hovertemplate="%{x}: %{y:+.3f} nats, p %{customdata[0]:.4f} → %{customdata[1]:.4f}"
                                         "<extra>the contrast's direction</extra>"))
    fig.add_trace(go.Bar(x=words, y=[s["logp_shift_random"] for s in data["shifts"]], marker_color="#8a8f98",
                         name="a random direction, same norm (sanity check)",
                         hovertemplate="%{x}: %{y:+.3f} nats<extra>random direction</extra>"))
    fig.update_layout(**layout(title=dict(text=f"What each word gains (up) or loses (down), strength "
                                               f"{data['strength']:g} at layer {data['layer']}", font=dict(size=15)),
                               height=320, yaxis=dict(title="Δ log p (nats)"), barmode="group"))
    return distinguish(fig)


def steer_markdown(data: dict) -> str:
    lines = [f"Direction norm {data['direction_norm']:.2f} (the stream's mean norm there: {data['stream_norm']:.2f}); "
             f"strength {data['strength']:g}, seed {data['seed']}.", "",
             "| without | with |", "|---|---|",
             f"| {md(data['without']['text'])} | {md(data['with']['text'])} |", ""]
    sanity = data.get("sanity")
    if sanity:
        lines += [f"**Sanity check**, {sanity['what']}: {md(sanity['text'])}", "",
                  f"KL(without ‖ with) at the next token: **{data['kl']:.4f} nats** by the contrast's direction, "
                  f"**{sanity['kl']:.4f} nats** by the random one. Only what the contrast's direction does beyond "
                  "the random one's can be credited to the direction; a push of that size alone did the rest.", ""]
    if data["shifts"]:
        lines += ["What each word gains or loses is the shift of its log-probability, Δ log p = log p with − log p "
                  "without (the bars); its logit's own shift can have the other sign, every logit moving.", "",
                  "| word | p without | p with | Δ log p | Δ log p, random direction | logit without | logit with |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {md(s['word'])} | {s['prob_without']:.4f} | {s['prob_with']:.4f} | {s['logp_shift']:+.3f} | "
                  f"{s['logp_shift_random']:+.3f} | {fixed(s['logit_without'])} | {fixed(s['logit_with'])} |"
                  for s in data["shifts"]]
    return "\n".join(lines)
