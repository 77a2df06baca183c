"""Figures for the Classify view (Fine-tuning tab), each with its text alternative made from the same numbers. Plain
data in (the JSON of analysis/classify.py), plotly or Markdown out; no torch, no gradio.

- `probabilities_figure`: each class's probability per method, from scratch beside transfer;
- `attributions_figure`: per token, gradient × input and integrated gradients (each row scaled by its largest
  magnitude, signed), and beside them the attention from [CLS], labelled as what it is;
- `steps_figure`: the LSTM's class probabilities after each word;
- `classify_md`: all of it as Markdown tables (the text alternative).
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from playground.figures.common import distinguish, layout, token_label

COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]
WAYS = ("lstm", "bilstm", "probe-cls", "probe-mean", "lora", "finetune")   # a colour each; the base by pattern
BASE_STYLE = {"scratch": ("", "dot"), "minilm": ("", "solid"), "bert": ("/", "dash")}  # bar pattern, line dash


def _style(method: str) -> tuple[str, str, str]:
    """A method's colour (how it learns), and its bar pattern and line dash (from scratch, on MiniLM, on our BERT),
    so that no two methods differ by colour alone. `method`: "bert-lora", or a classifier's id "classify-bert-lora"."""
    method = method.removeprefix("classify-")
    way = method.removeprefix("bert-")
    base = "bert" if method.startswith("bert-") else "scratch" if way in ("lstm", "bilstm") else "minilm"
    colour = COLOURS[WAYS.index(way) % len(COLOURS)] if way in WAYS else "#7f7f7f"
    return (colour, *BASE_STYLE[base])


def probabilities_figure(data: dict) -> go.Figure:
    """Grouped bars: classes across, one bar per method, the held-out accuracy in the legend."""
    fig = go.Figure()
    for row in data["methods"]:
        acc = row.get("held_out_accuracy")
        name = row["method"] + (f" (held-out {acc:.0%})" if acc is not None else "")
        colour, pattern, _ = _style(row["id"])
        fig.add_trace(go.Bar(x=data["classes"], y=row["probs"], name=name,
                             marker=dict(color=colour, pattern=dict(shape=pattern)),
                             hovertemplate="%{x}: %{y:.3f}<extra>" + html.escape(row["method"]) + "</extra>"))
    fig.update_layout(**layout(title="Probability of each class, per method", barmode="group",
                               yaxis=dict(range=[0, 1], title="probability"), legend=dict(orientation="h", y=-0.2),
                               margin=dict(b=110)))
    return distinguish(fig)


def _scaled(values: list[float]) -> list[float]:
    top = max((abs(v) for v in values), default=0.0) or 1.0
    return [v / top for v in values]


def attributions_figure(data: dict) -> go.Figure:
    """Three rows over the tokens: grad × input and IG (signed, each scaled to its largest |value|; red for the
    predicted class, blue against) and the attention from [CLS] (0 to its largest weight)."""
    a = data["attribution"]
    tokens = [token_label(t) for t in a["tokens"]]
    x = [f"{i}: {t}" for i, t in enumerate(tokens)]   # positions keep repeated tokens apart
    signed = dict(zmin=-1, zmax=1, colorscale="RdBu_r")
    rows = [("gradient × input", a["grad_x_input"], signed, "%{customdata:.4f}")]
    if a["integrated_gradients"] is not None:   # None when asked for no steps
        rows.append(("integrated gradients", a["integrated_gradients"], signed, "%{customdata:.4f}"))
    rows.append(("attention from [CLS] (not an explanation)", a["attention_from_cls"],
                 dict(zmin=0, zmax=1, colorscale="Greys"), "weight %{customdata:.3f}"))
    fig = go.Figure()
    for k, (name, raw, scale, shown) in enumerate(rows):
        # row k at y = k (y0, not a category name: one-row heatmaps on a category axis drew each row a row or two
        # away from its label, in a range of five rows for three)
        fig.add_trace(go.Heatmap(z=[_scaled(raw)], x=x, y0=k, dy=1, **scale, showscale=False, customdata=[raw],
                                 name=name, hovertemplate=f"%{{x}}: {shown}<extra>{name}</extra>"))
    fig.update_layout(**layout(title=f"Why '{a['target']}'? Per-token attributions ({html.escape(a['model'])})",
                               xaxis=dict(tickangle=-45), height=300, margin=dict(l=230, b=90),
                               yaxis=dict(tickvals=list(range(len(rows))), ticktext=[r[0] for r in rows],
                                          range=[len(rows) - 0.5, -0.5], showgrid=False)))   # the first row on top
    return fig


def steps_figure(data: dict) -> go.Figure | None:
    """The LSTM's probability of each class after each word (None without the LSTM)."""
    steps = data.get("steps")
    if not steps:
        return None
    x = [f"{i + 1}: {token_label(w)}" for i, w in enumerate(steps["words"])]
    fig = go.Figure()
    for k, label in enumerate(data["classes"]):
        fig.add_trace(go.Scatter(x=x, y=[row[k] for row in steps["probs"]], name=label, mode="lines+markers",
                                 line=dict(color=COLOURS[k % len(COLOURS)])))
    fig.update_layout(**layout(title="The LSTM read many-to-one, word by word: its prediction after each word",
                               yaxis=dict(range=[0, 1], title="probability"), xaxis=dict(tickangle=-45)))
    return distinguish(fig)


def _cell(text: str) -> str:
    return html.escape(text).replace("|", "\\|")


def classify_md(data: dict) -> str:
    """The text alternative of the three figures: the probabilities, the attributions and the word-by-word reading."""
    head = "| method | " + " | ".join(data["classes"]) + " | prediction | held-out accuracy |"
    lines = ["**Probability of each class, per method**", "", head, "|" + "---|" * (len(data["classes"]) + 3)]
    for row in data["methods"]:
        acc = row.get("held_out_accuracy")
        lines.append(f"| {_cell(row['method'])} | " + " | ".join(f"{p:.3f}" for p in row["probs"]) +
                     f" | {row['prediction']} | {'–' if acc is None else f'{acc:.1%}'} |")
    a = data.get("attribution")
    if a:
        c, ig = a["completeness"], a["integrated_gradients"] or [None] * len(a["tokens"])
        how = (f"integrated gradients: {a['ig_steps']} steps, baseline: {a['baseline']}; sum {c['sum_ig']:.3f} "
               f"against f(x) − f(baseline) {c['f_input_minus_f_baseline']:.3f}" if c else "no integrated gradients")
        lines += ["", f"**Attributions of '{a['target']}'** ({a['model']}; {how})", "",
                  "| token | gradient × input | integrated gradients | attention from [CLS] |", "|---|---|---|---|"]
        for t, g, i, w in zip(a["tokens"], a["grad_x_input"], ig, a["attention_from_cls"]):
            lines.append(f"| {_cell(t)} | {g:.4f} | {'–' if i is None else f'{i:.4f}'} | {w:.3f} |")
        lines += ["", a["attention_note"] + "."]
    s = data.get("steps")
    if s:
        lines += ["", "**The LSTM after each word** (the most likely class)", "", "| word | class | probability |",
                  "|---|---|---|"]
        for w, row in zip(s["words"], s["probs"]):
            k = max(range(len(row)), key=row.__getitem__)
            lines.append(f"| {_cell(w)} | {data['classes'][k]} | {row[k]:.3f} |")
    return "\n".join(lines)


_SAID = {"lstm": "LSTM (from scratch)", "bilstm": "BiLSTM (from scratch)", "probe-cls": "probe on [CLS]",
         "probe-mean": "probe on the mean", "lora": "+ LoRA", "finetune": "top block fine-tuned"}


def method_name(method: str) -> str:
    """A curve's method id as a legend says it: "bert-lora" -> "our BERT + LoRA"."""
    way = method.removeprefix("bert-")
    if way in ("lstm", "bilstm") or way not in _SAID:
        return _SAID.get(way, method)
    return ("our BERT " if method.startswith("bert-") else "MiniLM ") + _SAID[way]


def curve_figure(curve: dict, live: dict | None = None) -> go.Figure:
    """Held-out accuracy against labelled examples (log axis), one line per method (colour: how it learns; dots: from
    scratch, solid: on MiniLM, dashes: on our BERT), chance dashed grey; a live probe run as a star."""
    fig = go.Figure()
    for method, points in curve["curves"].items():
        colour, _, dash = _style(method)
        fig.add_trace(go.Scatter(x=[p["n"] for p in points], y=[p["accuracy"] for p in points], mode="lines+markers",
                                 name=method_name(method), line=dict(color=colour, dash=dash)))
    fig.add_hline(y=curve["chance"], line_dash="dash", line_color="#999999", annotation_text="chance")
    if live:
        fig.add_trace(go.Scatter(x=[live["n"]], y=[live["accuracy"]], mode="markers",
                                 name=f"your live run ({method_name(live['method'])})",
                                 marker=dict(symbol="star", size=16, color="#c44e52")))
    fig.update_layout(**layout(title="Held-out accuracy against the number of labelled examples",
                               xaxis=dict(type="log", title="labelled training examples"),
                               yaxis=dict(range=[0, 1], title="held-out accuracy")))
    return distinguish(fig)


def curve_md(curve: dict, live: dict | None = None) -> str:
    """The curve's text alternative: every point, the protocol, and the live run if any."""
    methods = list(curve["curves"])
    sizes = [p["n"] for p in curve["curves"][methods[0]]]
    lines = ["| labelled examples | " + " | ".join(method_name(m) for m in methods) + " |",
             "|---|" + "---|" * len(methods)]
    for k, n in enumerate(sizes):
        lines.append(f"| {n:,} | " + " | ".join(f"{curve['curves'][m][k]['accuracy']:.1%}" for m in methods) + " |")
    lines += ["", f"Chance: {curve['chance']:.0%}. Protocol: {curve['protocol']}. Made by `{curve['command']}`."]
    if live:
        what = (f"a probe on {live['pooling']}" if "pooling" in live else
                f"{method_name(live['method'])}, {live['steps']:,} steps in {live['seconds']:g} s,")
        lines += ["", f"**Your live run**: {what} with {live['n']} examples (seed {live['seed']}): held-out accuracy "
                      f"{live['accuracy']:.1%} over {live['examples']:,} sentences."]
    return "\n".join(lines)
