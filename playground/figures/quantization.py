"""Figures of the Inference tab's Quantization view: each format's bytes and step time, its weight error layer by
layer, its next-token KL token by token, and one real Q4_1 block of the GGUF file drawn weight by weight.

Each figure has a text alternative built from the same data (a Markdown table), shown beside it.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.common import distinguish, layout, token_label

COLOURS = {"fp32": "#4c72b0", "fp16": "#55a868", "bf16": "#8172b2", "int8": "#c44e52", "q4_1": "#dd8452"}
BITS = {"fp32": "32", "fp16": "16", "bf16": "16", "int8": "8 + a scale per row", "q4_1": "5 (4 + d and m per 32)"}


def md(text) -> str:
    """User text (a token) safe inside Markdown: its markup characters escaped."""
    out = token_label(str(text))
    for ch in "\\`*_{}[]<>()#+!|~":
        out = out.replace(ch, "\\" + ch)
    return out or "∅"


def _g(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def cost_figure(data: dict) -> go.Figure:
    """Each format's weights in MB and a generation step's time in ms, side by side."""
    names = data["formats"]
    labels = [data["labels"][f] for f in names]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Weights (MB)", "One generation step (ms)"],
                        horizontal_spacing=0.12)
    mb = [data["memory_bytes"][f] / 1e6 for f in names]
    ms = [data["step_ms"][f] for f in names]
    colours = [COLOURS[f] for f in names]
    fig.add_trace(go.Bar(x=labels, y=mb, marker_color=colours, text=[f"{v:.0f}" for v in mb], textposition="auto",
                         name="MB", showlegend=False, hovertemplate="%{x}: %{y:.1f} MB<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=ms, marker_color=colours, text=[f"{v:.0f}" for v in ms], textposition="auto",
                         name="ms", showlegend=False, hovertemplate="%{x}: %{y:.1f} ms<extra></extra>"), row=1, col=2)
    fig.update_layout(**layout(title=dict(text="What each format costs: bytes to store, time to read them",
                                          font=dict(size=15)), height=340))
    return fig


def error_figure(data: dict) -> go.Figure:
    """Each layer's relative weight error ‖Ŵ − W‖_F / ‖W‖_F against fp32, one line per format that has one."""
    fig = go.Figure()
    exact = []
    for f in data["formats"]:
        errors = data["weight_error"][f]["relative"]
        if not any(errors):
            exact.append(data["labels"][f])
            continue
        fig.add_trace(go.Scatter(x=list(range(len(errors))), y=errors, name=data["labels"][f], mode="lines+markers",
                                 line=dict(color=COLOURS[f]),
                                 hovertemplate=f"{data['labels'][f]}, layer %{{x}}: %{{y:.3g}}<extra></extra>"))
    note = f" ({' and '.join(exact)}: exactly 0)" if exact else ""
    fig.update_layout(**layout(title=dict(text=f"Relative weight error per layer, against fp32{note}",
                                          font=dict(size=15)), height=360,
                               xaxis=dict(title="layer"), yaxis=dict(title="‖Ŵ − W‖ / ‖W‖", type="log"),
                               legend=dict(orientation="h", y=-0.25)))
    return distinguish(fig)


def kl_figure(data: dict) -> go.Figure:
    """KL(p_fp32 ‖ p_format) at each token of the text, one line per format that differs from fp32."""
    fig = go.Figure()
    x = [f"{t}: {token_label(tok)}" for t, tok in enumerate(data["tokens"])]
    exact = []
    for f in data["formats"]:
        kl = data["kl_per_token"][f]
        if not any(kl):
            exact.append(data["labels"][f])
            continue
        floor = [max(v, 1e-9) for v in kl]     # a log axis has no 0: an exact match is drawn at 1e-9
        fig.add_trace(go.Scatter(x=x, y=floor, name=f"{data['labels'][f]} (mean {_g(data['kl'][f])})",
                                 mode="lines+markers", line=dict(color=COLOURS[f]),
                                 hovertemplate="%{x}: KL %{y:.3g} nats<extra></extra>"))
    note = f" ({' and '.join(exact)}: 0 at every token)" if exact else ""
    fig.update_layout(**layout(title=dict(text=f"Next-token KL from fp32 at each token of your text{note}",
                                          font=dict(size=15)), height=380,
                               yaxis=dict(title="KL (nats)", type="log"), legend=dict(orientation="h", y=-0.35)))
    return distinguish(fig)


def summary_markdown(data: dict) -> str:
    """The whole comparison as a table (the figures' text alternative), with the checks and what was skipped."""
    lines = ["| format | bits a weight | weights | step | weight error (median over layers) | KL on your text "
             "| top-1 agreement | perplexity (shipped text) |", "|---|---|---|---|---|---|---|---|"]
    for f in data["formats"]:
        errors = sorted(data["weight_error"][f]["relative"])
        median = errors[len(errors) // 2]
        lines.append(f"| {data['labels'][f]} | {BITS[f]} | {data['memory_bytes'][f] / 1e6:,.1f} MB | "
                     f"{data['step_ms'][f]:.1f} ms | {_g(median)} | {_g(data['kl'][f])} | "
                     f"{100 * data['top1'][f]:.1f}% | {data['perplexity'][f]:.3f} |")
    n = len(data["tokens"])
    lines += ["", f"KL and top-1 agreement over the {n} token{'s' if n != 1 else ''} of your text; perplexity over "
                  f"the first {data['reference']['tokens']} tokens of {data['reference']['file']}. "
                  f"**Checks:** fp32 against itself: KL {_g(data['kl']['fp32'])}, largest logit difference "
                  f"{_g(data['max_logit_diff']['fp32'])} (lossless). "
                  + (f"Q4_1 (the file's blocks, dequantised at every product): KL {_g(data['kl']['q4_1'])}, largest "
                     f"logit difference {_g(data['max_logit_diff']['q4_1'])}: the same numbers as fp32."
                     if data["source"] == "gguf" else ""),
              "", f"**The weights:** {data['source_about']}."]
    for f, why in data["skipped"].items():
        lines += ["", f"**{f} is not measured here:** {why}."]
    lines += ["", f"Bytes, weight errors, step times and perplexity measured {data['measured_at']} in this process; "
                  f"this text's KL measured now ({data['seconds']:.1f} s)."]
    return "\n".join(lines)


def block_figure(block: dict) -> go.Figure:
    """One Q4_1 block's 32 weights at their levels: the 16 levels m + d q (q = 0..15) as lines, each weight a bar."""
    fig = go.Figure()
    for q, level in enumerate(block["levels"]):
        fig.add_hline(y=level, line=dict(color="#dddddd", width=1))
    fig.add_trace(go.Bar(x=list(range(32)), y=block["w"], marker_color="#4c72b0", name="w = d q + m",
                         text=[str(q) for q in block["q"]], textposition="outside",
                         customdata=list(zip(block["q"], block["nibble_of"])),
                         hovertemplate="weight %{x}: q = %{customdata[0]} (%{customdata[1]}), w = %{y:.5g}"
                                       "<extra></extra>"))
    fig.add_annotation(x=31.5, y=block["levels"][0], text="m (q = 0)", showarrow=False, xanchor="left")
    fig.add_annotation(x=31.5, y=block["levels"][-1], text="m + 15 d (q = 15)", showarrow=False, xanchor="left")
    fig.update_layout(**layout(title=dict(text=f"{block['tensor']}, row {block['row']}, block {block['block']}: "
                                               f"d = {block['d']:.4g}, m = {block['m']:.4g}", font=dict(size=15)),
                               height=380, margin=dict(r=110), xaxis=dict(title="weight j in the block", dtick=1),
                               yaxis=dict(title="w_j"), showlegend=False))
    return fig


def block_markdown(block: dict) -> str:
    """The block's bytes, d, m and every weight as a table (the drawing's text alternative)."""
    hexed = " ".join(block["hex"][i:i + 2] for i in range(0, len(block["hex"]), 2))
    where = ("as the file stores it" if block["source"] == "gguf" else
             "the original's, quantised here with llama.cpp's rule")
    lines = [f"**{block['tensor']}**, row {block['row']} of {block['rows']} ({where}), block "
             f"{block['block']} of {block['blocks_per_row']}: 20 bytes `{hexed}`.", "",
             f"- d = `{block['d_hex']}` (fp16) = {block['d']:.6g}; m = `{block['m_hex']}` (fp16) = {block['m']:.6g}",
             "- 16 bytes of nibbles: weight j in the low 4 bits of byte j, weight j + 16 in its high 4 bits",
             f"- checks: our dequantisation equals `gguf.quants.dequantize`: **{block['gguf_equal']}**; "
             f"llama.cpp's rule applied to these 32 weights gives the same 20 bytes back: "
             f"**{block['requantized_equal']}**", "",
             "| j | q_j | w_j = d q_j + m |", "|---|---|---|"]
    lines += [f"| {j} | {q} | {w:.6g} |" for j, (q, w) in enumerate(zip(block["q"], block["w"]))]
    return "\n".join(lines)
