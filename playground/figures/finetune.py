"""Figures of the Fine-tuning tab: the loss over steps (DPO: its terms, rewards and the KL to the reference),
the trainable-parameter table with the lecture's formula, SFT's loss mask, the texts before and after."""

from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from playground.figures.common import ACCENT, MUTED, distinguish, layout, visible

CHOSEN, REJECTED, KL = "#3c9a5f", "#c0392b", "#8e44ad"


def _line(steps: list[dict], key: str, name: str, colour: str, dash: str | None = None) -> go.Scatter:
    return go.Scatter(x=[s["step"] for s in steps], y=[s[key] for s in steps], mode="lines+markers", name=name,
                      line=dict(color=colour, width=2, dash=dash), marker=dict(size=4),
                      hovertemplate=f"step %{{x}}: {html.escape(name)} %{{y:.4f}}<extra></extra>")


def loss_figure(result: dict) -> go.Figure:
    """The training loss per step; for DPO four panels: the loss, the log-probabilities of the chosen and the
    rejected answers under π (solid) and π_ref (dotted), the implicit rewards β log π/π_ref with their margin,
    and the KL from the reference."""
    steps, method = result["steps"], result["method"]
    what = {"lora": "next-token loss on the text", "sft": "loss on the response tokens"}
    if method != "dpo":
        return go.Figure([_line(steps, "loss", "loss", ACCENT)], layout=layout(
            title=dict(text=f"Training: {what[method]} (nats per token)"), height=340, showlegend=False,
            xaxis=dict(title=dict(text="Adam step")), yaxis=dict(title=dict(text="loss"))))
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.07, subplot_titles=(
        "DPO loss −log σ(margin) (0.693 = ln 2 at the start)", "log π(y|x) of the answers (dotted: π_ref)",
        "implicit rewards β (log π − log π_ref)", "KL(π ‖ π_ref) per answer token"))
    fig.add_trace(_line(steps, "loss", "loss", ACCENT), 1, 1)
    fig.add_trace(_line(steps, "chosen_logp", "log π(chosen)", CHOSEN), 2, 1)
    fig.add_trace(_line(steps, "rejected_logp", "log π(rejected)", REJECTED), 2, 1)
    fig.add_trace(_line(steps, "chosen_ref_logp", "log π_ref(chosen)", CHOSEN, dash="dot"), 2, 1)
    fig.add_trace(_line(steps, "rejected_ref_logp", "log π_ref(rejected)", REJECTED, dash="dot"), 2, 1)
    fig.add_trace(_line(steps, "chosen_reward", "chosen reward", CHOSEN), 3, 1)
    fig.add_trace(_line(steps, "rejected_reward", "rejected reward", REJECTED), 3, 1)
    fig.add_trace(_line(steps, "margin", "margin", MUTED, dash="dot"), 3, 1)
    fig.add_trace(_line(steps, "kl", "KL", KL), 4, 1)
    fig.update_layout(**layout(height=820, legend=dict(orientation="h", y=-0.06)))
    fig.update_xaxes(title_text="Adam step (each a batch of the triples)", row=4, col=1)
    return distinguish(fig)


def counts_markdown(result: dict) -> str:
    """The trainable and total counts, exactly, with the lecture's formula r (d + k) per adapted matrix."""
    counts, cfg = result["counts"], result["config"]
    rows = {}
    for m in counts["matrices"]:
        key = (m["name"].split(".")[-1] if "." in m["name"] else m["name"], m["d"], m["k"], m["r"])
        rows[key] = rows.get(key, 0) + 1
    table = "\n".join(f"| {name} | {d} × {k} | {n} | {r} × ({d} + {k}) × {n} = {r * (d + k) * n:,} | {d * k * n:,} |"
                      for (name, d, k, r), n in rows.items())
    return (f"**{counts['trainable']:,} trainable of {counts['total']:,} parameters: "
            f"{counts['trainable'] / counts['total']:.4%}** (rank r = {cfg['rank']}, α = {cfg['alpha']:g}, "
            f"update scaled by α / r = {cfg['alpha'] / cfg['rank']:g}). Each adapted d × k matrix W gets "
            f"B (d × r) and A (r × k): r (d + k) numbers instead of d k. The lecture's example: 8,000 / 1,000,000 = "
            f"0.008.\n\n| matrix | d × k | layers | trainable r (d + k) | frozen d k |\n|---|---|---|---|---|\n"
            + table)


def held_out_markdown(result: dict) -> str:
    """What the adapters do on data training never saw, beside the base."""
    h = result.get("held_out")
    if not h:
        return ""
    if "margin" in h:
        return (f"**Held out** ({h['protocol']}): DPO loss {h['loss']:.3f}, reward margin {h['margin']:+.3f}, "
                f"chosen answer ahead in {h['accuracy']:.0%} of the triples.")
    return f"**Held out** ({h['protocol']}): {h['loss_base']:.3f} for the base → {h['loss']:.3f} with the adapters."


def exactness_markdown(result: dict) -> str:
    """Step 0 (B = 0, so B A = 0) and the merge W' = W + (α / r) B A, each measured on the first example."""
    merged = result.get("merged_max_abs_diff")
    after = "" if merged is None else (
        f" After training, the adapters merged into the weights, W' = W + (α/r) B A, give the same logits "
        f"as the unmerged model: max |Δ| = {merged:.1e} (float32 rounding; no extra cost at inference).")
    return (f"At step 0 the adapted model's logits equal the base model's: max |Δ| = "
            f"{result['step0_max_abs_diff']:.1e} (B = 0).{after}")


def mask_html(mask: dict) -> str:
    """SFT's loss mask on one example: the prompt's tokens (given, not learnt) and the response's (the loss)."""
    chips = "".join(f'<span class="ft-token {"ft-loss" if counted else "ft-prompt"}" title="'
                    f'{"in the loss" if counted else "masked: label −100"}">{visible(t).replace("<br>", "")}</span>'
                    for t, counted in zip(mask["tokens"], mask["in_loss"]))
    n = sum(mask["in_loss"])
    return (f'<div class="ft-mask"><p><span class="ft-token ft-prompt">prompt</span> masked (label −100, no loss) · '
            f'<span class="ft-token ft-loss">response</span> in the loss: {n} of {len(mask["tokens"])} tokens</p>'
            f'<div class="ft-tokens">{chips}</div></div>')


def texts_html(result: dict) -> str:
    """The greedy texts of the base and of the adapted model, prompt by prompt."""
    rows = "".join(f"<tr><td>{html.escape(b['prompt'])}</td><td>{html.escape(b['text'])}</td>"
                   f"<td>{html.escape(a['text'])}</td></tr>" for b, a in zip(result["before"], result.get("after", [])))
    return ('<table class="ft-texts"><thead><tr><th>prompt</th><th>before (the base, greedy)</th>'
            f'<th>after (with the adapters, greedy)</th></tr></thead><tbody>{rows}</tbody></table>')
