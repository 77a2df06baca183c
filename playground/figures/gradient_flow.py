"""Figures of the RNN gradient-flow tab: per-step gradient norms, the input-gradient strip, gates over time,
the memory experiment."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from playground.figures.common import ACCENT, MUTED, distinguish, layout, token_label, visible

# ---------------------------------------------------------------------------------------------
# RNN gradient flow: per-step gradient norms, the input-gradient strip, gates over time

CELL_COLOURS = {"rnn": ACCENT, "lstm": "#337ab7", "gru": "#3c9a5f"}


def _finite_positive(values) -> list:
    """None for what a log axis cannot show (null from overflow, 0)."""
    return [v if v is not None and v > 0 else None for v in values]


def gradient_flow_figure(cells: dict[str, dict], labels: dict[str, str], chars: list[str],
                         spans: list[tuple[int, int]] | None = None) -> go.Figure:
    """|dL_T/dh_t| against t on a log scale, one line per cell (LSTM: |dL_T/dc_t| dashed). `spans`: the
    sentence's characters at each step t = 1..T, kept in the layout's `meta` for the page to shade the
    selected word's steps (assets/focus.js)."""
    T = len(chars) - 1
    t = list(range(1, T + 1))
    hover_chars = [token_label(c) for c in chars[:T]]
    data, notes = [], []
    for key, r in cells.items():
        colour = CELL_COLOURS.get(key, MUTED)
        data.append(go.Scatter(
            x=t, y=_finite_positive(r["grad_norms"]), mode="lines+markers", marker=dict(size=4), name=labels[key],
            line=dict(color=colour, width=2), customdata=hover_chars,
            hovertemplate="t=%{x} ('%{customdata}'): %{y:.3e}<extra>" + html.escape(labels[key]) + "</extra>",
        ))
        if r.get("cell_grad_norms") is not None:
            data.append(go.Scatter(
                x=t, y=_finite_positive(r["cell_grad_norms"]), mode="lines", name=f"{labels[key]}: cell c_t",
                line=dict(color=colour, width=1.5, dash="dash"), customdata=hover_chars,
                hovertemplate="t=%{x} ('%{customdata}'): |dL/dc_t| %{y:.3e}<extra></extra>",
            ))
        if r["status"] == "overflow":
            notes.append(f"{labels[key]}: overflow (inf/NaN), not plotted")
    title = "How far back the training signal reaches: |∂L_T/∂h_t| (log scale)"
    fig = go.Figure(data, layout=layout(
        title=dict(text=title + ("<br><sub>" + html.escape("; ".join(notes)) + "</sub>" if notes else "")),
        xaxis=dict(title=dict(text="time step t (the loss is at the last step, T)")),
        yaxis=dict(title=dict(text="gradient norm"), type="log", exponentformat="power"),
        height=420, legend=dict(orientation="h", y=-0.2), hovermode="x unified",
        meta={"spans": [list(span) for span in spans], "x0": 1} if spans else None,
    ))
    return distinguish(fig)


def gradient_strip_html(chars: list[str], cells: dict[str, dict], labels: dict[str, str]) -> str:
    """Each input character shaded by |dL_T/dx_t| (log scale, per cell): what the last prediction depends on."""
    import math

    T = len(chars) - 1
    rows = []
    for key, r in cells.items():
        norms = r["x_grad_norms"]
        logs = [math.log10(v) for v in norms if v is not None and v > 0]
        lo, hi = (min(logs), max(logs)) if logs else (0.0, 1.0)
        spans = []
        for ch, v in zip(chars[:T], norms):
            if v is None:
                spans.append(f'<span class="gf-ch gf-bad" title="overflow">{visible(ch)}</span>')
                continue
            level = 0.0 if v <= 0 or hi == lo else (math.log10(v) - lo) / (hi - lo)
            spans.append(f'<span class="gf-ch" style="background: rgba(51, 122, 183, {0.05 + 0.9 * level:.2f})" '
                         f'title="{html.escape(token_label(ch))}: {v:.3e}">{visible(ch)}</span>')
        spans.append(f'<span class="gf-ch gf-target" title="the character predicted at step T">'
                     f'{visible(chars[T])}</span>')
        span = f"10<sup>{round(lo)}</sup> … 10<sup>{round(hi)}</sup>" if logs else "no finite values"  # never "-0"
        rows.append(f'<div class="gf-row"><div class="gf-head"><b>{html.escape(labels[key])}</b> '
                    f'<span class="gf-range">|∂L_T/∂x_t| from {span}</span></div>'
                    f'<div class="gf-text">{"".join(spans)}</div></div>')
    return "".join(rows)


def gradient_status_html(cells: dict[str, dict], labels: dict[str, str], notices: list[str] = ()) -> str:
    """An explicit verdict per cell (stable, vanishing, exploding, overflow) and the rates per step."""
    def num(v, fmt=".3f"):
        return "–" if v is None else format(v, fmt)

    rows = []
    for key, r in cells.items():
        rates = r["rates"]
        extra = ""
        if "sigma_max" in rates:
            extra = (f"σ<sub>max</sub>(W<sub>hh</sub>) = {num(rates['sigma_max'])}, rms σ = {num(rates['sigma_rms'])}, "
                     f"mean φ′ = {num(rates['mean_activation_derivative'])}; bound max φ′·σ<sub>max</sub> = "
                     f"{num(rates['bound'])}")
        elif "measured_cell" in rates:
            extra = f"measured on c<sub>t</sub>: {num(rates['measured_cell'])}"
        if rates.get("naive") is not None:
            extra += f"{'; ' if extra else ''}naive estimate (a random direction at every step): {num(rates['naive'])}"
        rows.append(
            f'<tr><td><span class="gf-badge gf-{r["status"]}">{r["status"]}</span></td>'
            f'<td>{html.escape(labels[key])}</td>'
            f"<td>{num(rates['measured'])}</td><td>{num(rates.get('predicted'))}</td>"
            f"<td>{html.escape(rates.get('theory', ''))}</td><td>{extra}</td>"
            f"<td>{html.escape(r['message'])}</td></tr>"
        )
    notes = "".join(f'<div class="notice">{html.escape(n)}</div>' for n in notices)
    return (f"{notes}<table class='gf-table'><thead><tr><th>status</th><th>cell</th><th>measured factor per step</th>"
            f"<th>predicted</th><th>prediction from</th><th>details</th><th>verdict</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


GATE_TITLES = {"f": "forget gate f_t", "i": "input gate i_t", "o": "output gate o_t", "c": "cell state c_t",
               "z": "update gate z_t (1 keeps h_{t-1})", "r": "reset gate r_t"}


def gates_figure(gates: dict[str, list], chars: list[str], label: str) -> go.Figure:
    """One heatmap per gate, stacked: time across, units down, the value on hover (gates in [0, 1])."""
    import numpy as np

    names = list(gates)
    T = len(chars) - 1
    x = np.arange(1, T + 1)
    n = len(names)
    gap = 0.06
    height = (1 - gap * (n - 1)) / n
    data, axes, notes = [], {}, []
    hover_chars = np.array([token_label(c) for c in chars[:T]], dtype=object)
    for k, name in enumerate(names):
        z = np.asarray(gates[name], dtype=float).T          # (units, T); numpy: plotly validates it in one go
        units = z.shape[0]
        suffix = "" if k == 0 else str(k + 1)
        is_cell = name == "c"
        data.append(go.Heatmap(
            z=z, x=x, y=np.arange(units), xaxis=f"x{suffix}", yaxis=f"y{suffix}",
            customdata=np.tile(hover_chars, (units, 1)),
            colorscale="RdBu" if is_cell else "Viridis", zmid=0 if is_cell else None,
            zmin=None if is_cell else 0, zmax=None if is_cell else 1, showscale=k == 0 or is_cell,
            colorbar=dict(len=height, y=1 - k * (height + gap) - height / 2, yanchor="middle", thickness=12),
            hovertemplate=(f"{GATE_TITLES[name]}<br>t=%{{x}} ('%{{customdata}}'), unit %{{y}}: "
                           "%{z:.3f}<extra></extra>"),
        ))
        top = 1 - k * (height + gap)
        axes[f"yaxis{suffix}"] = dict(domain=[max(0.0, top - height), min(1.0, top)], title=dict(text="unit"),
                                      autorange="reversed")
        axes[f"xaxis{suffix}"] = dict(anchor=f"y{suffix}", matches="x" if k else None, showticklabels=k == n - 1)
        notes.append(dict(text=GATE_TITLES[name], x=0, y=top, xref="paper", yref="paper", xanchor="left",
                          yanchor="bottom", showarrow=False, font=dict(size=13)))
    return go.Figure(data, layout=layout(
        title=dict(text=f"{label}: gates over time (first {len(gates[names[0]][0]) if names else 0} units)"),
        height=120 + 200 * n, annotations=notes, margin=dict(l=10, r=10, t=70, b=40), **axes,
    ))



def memory_figures(result: dict, labels: dict[str, str]) -> tuple[go.Figure, go.Figure]:
    """The memory experiment: accuracy against the distance k to the key, and the training loss curves."""
    chance = 1 / result["config"]["n_keys"]
    acc, loss = [], []
    for key, r in result["cells"].items():
        colour = CELL_COLOURS.get(key, MUTED)
        name = f"{labels.get(key, key)} ({r['n_params']:,} parameters)"  # recurrent ones: the hover says so
        acc.append(go.Scatter(x=result["k"], y=r["accuracy"], mode="lines+markers", name=name,
                              line=dict(color=colour, width=2), marker=dict(size=5),
                              hovertemplate="k=%{x}: accuracy %{y:.2f}<extra>" + html.escape(labels.get(key, key))
                              + f" ({r['n_params']:,} recurrent parameters)</extra>"))
        loss.append(go.Scatter(x=[s for s, _ in r["loss_curve"]], y=[v for _, v in r["loss_curve"]], mode="lines",
                               name=labels.get(key, key), line=dict(color=colour, width=2),
                               hovertemplate="step %{x}: loss %{y:.3f}<extra></extra>"))
    acc.append(go.Scatter(x=[result["k"][0], result["k"][-1]], y=[chance, chance], mode="lines", name="chance",
                          line=dict(color="#999", dash="dot"), hoverinfo="skip"))
    acc_fig = go.Figure(acc, layout=layout(
        title=dict(text="Accuracy at the distance k each network was trained for"), height=380,
        xaxis=dict(title=dict(text="k: steps from the key to the answer (trained on 1..k)")),
        yaxis=dict(title=dict(text="accuracy"), range=[0, 1.05]), legend=dict(orientation="h", y=-0.25)))
    loss_fig = go.Figure(loss, layout=layout(
        title=dict(text="Training loss at the longest distance (cross-entropy at the last step)"), height=380,
        xaxis=dict(title=dict(text="Adam step")), yaxis=dict(title=dict(text="loss"), type="log"),
        legend=dict(orientation="h", y=-0.25)))
    return distinguish(acc_fig), distinguish(loss_fig)
