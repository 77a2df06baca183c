"""The Attention tab: a real pretrained BERT (all-MiniLM-L6-v2) and our GPT, head by head.

Head view (lines from each token to the tokens it attends to, one colour per head), model view
(every layer x head as a thumbnail), one head's heatmap (or the mean / max over heads), and one
head step by step from Q K^T to the softmax. Aggregation happens on the server, so 512 tokens stay
fast and light in the browser.
"""

from __future__ import annotations

import math

import gradio as gr
import numpy as np

from playground.analysis import attention as att
from playground.figures import attention as fa
from playground.ui.common import FIGURE, LATEX, Shared, as_int, json_file, text_input, warn

# Loaded once at import, read-only (our GPT and BERT only when their checkpoints are shipped)
MODELS = {m.key: m for m in (att.load_minilm(), att.load_gpt(), att.load_bert()) if m is not None}
DEFAULT_MODEL = "minilm"
HEATMAP_MAX = 128      # a longer input's heatmap is pooled to 128 x 128 blocks
THUMB_MAX = 48         # model view thumbnails: at most 48 x 48 pixels per head
EDGE_BUDGET = 12_000   # head view: at most about this many lines per layer
MIN_WEIGHT = 0.02      # head view: weaker links are not drawn (invisible at that opacity anyway)
JSON_FULL_MAX = 128    # the JSON carries the T x T matrix up to this length, the top keys per query beyond
ALL_LAYERS_MAX = 64    # "every layer and head" in the JSON only for inputs this short
STEPS_MAX = 48         # "inside one head" runs on the first 48 tokens (its panels are T x T and T x d_k)
SPECIAL = {"[CLS]", "[SEP]"}
SCALES = {"paper": "1/√d_k (the paper)", "none": "1 (no scaling)"}
PE_MAX_POSITIONS, PE_MAX_DIM = 128, 256  # the PE figure and its JSON carry (n x d) + 2 (n x n) numbers


# ---------------------------------------------------------------------------------------------
# Handlers


def _inputs(text, text_b, model_key, notices: list[str], max_tokens: int | None = None):
    if model_key not in MODELS:
        raise gr.Error(f"Unknown model {model_key!r}; choose from {', '.join(MODELS)}.")
    m = MODELS[model_key]
    text = text_input(text, notices)
    if not text.strip():
        raise gr.Error("Type a sentence above to see its attention.")
    text_b = text_input(text_b, notices) if text_b is not None else ""
    if m.family == "gpt" and text_b.strip():
        notices.append("The GPT reads one text (causal, no segments): the second sentence is ignored.")
    pair = m.family == "bert" and text_b.strip() != ""
    enc = att.encode(m, text, text_b if pair else None)
    if not enc.ids:
        raise gr.Error(f"None of these characters is in the vocabulary of {m.label}; try plain English text.")
    if enc.n_cut:
        notices.append(f"The input is longer than {m.max_tokens} tokens: {enc.n_cut:,} tokens were cut "
                       f"(the model has {m.max_tokens} positions).")
    if max_tokens is not None and len(enc.ids) > max_tokens:
        notices.append(f"This view runs on the first {max_tokens} tokens of {len(enc.ids)} (its panels grow as T²).")
        enc = att.Encoded(enc.tokens[:max_tokens], enc.ids[:max_tokens], enc.segments[:max_tokens])
    return m, enc


def _head(head, m: att.AttentionModel, notices: list[str]) -> int | str:
    if isinstance(head, str) and head.strip().lower() in ("mean", "max"):
        return head.strip().lower()
    return as_int(head, "Head", 0, m.n_head - 1, notices)


def attention(text, text_b="", model_key=DEFAULT_MODEL, layer=0, head="mean", hide_special=False, detail="head"):
    """Every head of every layer on the sentence (or pair): head view, model view, heatmap, data."""
    notices: list[str] = []
    m, enc = _inputs(text, text_b, model_key, notices)
    layer = as_int(layer, "Layer", 0, m.n_layer - 1, notices)
    head = _head(head, m, notices)
    if detail not in ("head", "all"):
        raise gr.Error("Detail should be 'head' (one T × T matrix) or 'all' (every layer and head).")
    T = len(enc.ids)
    if detail == "all" and T > ALL_LAYERS_MAX:
        raise gr.Error(f"Every layer and head is returned for inputs up to {ALL_LAYERS_MAX} tokens "
                       f"(this one has {T}: {m.n_layer * m.n_head * T * T:,} numbers); ask for one head instead.")
    A = att.attention(m, enc)                      # L x (H, T, T)
    M = att.aggregate(A[layer], head)              # (T, T)
    head_name = f"head {head}" if isinstance(head, int) else f"{head} over the {m.n_head} heads"

    k = max(1, min(T, EDGE_BUDGET // (m.n_head * T)))
    edges = att.top_edges(A[layer], k, MIN_WEIGHT)
    note = (f"{T} tokens: each token's {k} strongest link{'s' if k > 1 else ''} per head "
            f"(weight ≥ {MIN_WEIGHT}) are drawn." if k < T else "")
    head_view = fa.head_view_html(enc.tokens, enc.segments, A[layer], edges, layer, note, spans=enc.spans)

    pooled_layers = [att.pool(a, THUMB_MAX, "max") for a in A]
    thumbs, factor = np.stack([p for p, _ in pooled_layers]), pooled_layers[0][1]  # (L, H, n, n)
    model_view = fa.model_view_html(thumbs, (layer, head if isinstance(head, int) else -1), factor)

    keep = list(range(T))
    if hide_special:
        keep = [i for i, t in enumerate(enc.tokens) if t not in SPECIAL] or keep
        if len(keep) < T:
            notices.append("[CLS] and [SEP] are hidden; the weights are not renormalised, so rows sum to less than 1.")
    shown = M[np.ix_(keep, keep)]
    pooled, f = att.pool(shown, HEATMAP_MAX)
    title = f"Layer {layer}, {head_name}"
    if f > 1:
        title += f" (blocks of {f} × {f} tokens averaged: {len(keep)} tokens)"
        heat_tokens = [enc.tokens[i] for i in keep]
        heatmap = fa.heatmap_figure(heat_tokens, pooled, title, factor=f, causal=m.family == "gpt",
                                    spans=[enc.spans[i] for i in keep])
    else:
        heatmap = fa.heatmap_figure(enc.tokens, pooled, title, keep=keep, causal=m.family == "gpt", spans=enc.spans)

    data = {"model": m.key, "tokens": enc.tokens, "segments": enc.segments, "n_tokens": T, "layers": m.n_layer,
            "heads": m.n_head, "layer": layer, "head": head, "notices": notices}
    if detail == "all":
        data["attention_format"] = "layer × head × query × key"
        data["attention"] = np.round(np.stack(A), 5).tolist()
    elif T <= JSON_FULL_MAX:
        data["attention_format"] = "query × key"
        data["attention"] = np.round(M, 5).tolist()
    else:
        top = np.argsort(-M, axis=1)[:, :8]
        data["attention_format"] = "top keys per query: [[key, weight], ...] (the 8 strongest; long input)"
        data["attention"] = [[[int(j), round(float(M[i, j]), 5)] for j in row] for i, row in enumerate(top)]
    warn(notices)
    return head_view, model_view, heatmap, json_file(data, "attention"), data


def pick_head(evt: gr.SelectData):
    """A click on a model-view thumbnail: show that layer and head."""
    layer, head = evt.index
    return gr.update(value=int(layer)), gr.update(value=str(head))


def attention_steps(text, text_b="", model_key=DEFAULT_MODEL, layer=0, head=0, scale="paper"):
    """One head from the inside: Q, K, V, Q K^T, scaled and masked, softmax, output, and what the scale does."""
    notices: list[str] = []
    m, enc = _inputs(text, text_b, model_key, notices, max_tokens=STEPS_MAX)
    layer = as_int(layer, "Layer", 0, m.n_layer - 1, notices)
    head = _head(head, m, notices)
    if not isinstance(head, int):
        notices.append(f"Step by step needs one head; showing head 0 (not the {head}).")
        head = 0
    if scale not in SCALES:
        raise gr.Error(f"Scale should be one of {', '.join(SCALES)}.")
    warn(notices)
    inside = att.head_internals(m, enc, layer, head)
    q, k, v = inside["q"], inside["k"], inside["v"]
    d_k = q.shape[1]
    factor = 1 / math.sqrt(d_k) if scale == "paper" else 1.0
    causal = m.family == "gpt"
    steps = att.softmax_steps(q, k, v, causal, factor)
    paper = att.softmax_steps(q, k, v, causal, 1 / math.sqrt(d_k))
    check = float(np.abs(paper["probs"] - inside["attn"]).max())  # our recomputation against the model's own weights
    sweep = list(np.geomspace(0.01, 4.0, 40))
    maxp, grads = [], []
    for c in sweep:
        p = att.softmax_steps(q, k, v, causal, c)["probs"]
        top = p.max(axis=1)
        maxp.append(float(top.mean()))
        grads.append(float((top * (1 - top)).mean()))
    text_scale = f"× 1/√{d_k}" if scale == "paper" else "× 1"
    steps_fig = fa.steps_figure(enc.tokens, q, k, v, steps, text_scale)
    sat_fig = fa.saturation_figure(sweep, maxp, grads, factor)
    top = steps["probs"].max(axis=1)
    summary = (f"Layer {layer}, head {head}, d_k = {d_k}, {len(enc.ids)} tokens, scale {SCALES[scale]}: "
               f"the scaled scores have standard deviation {float(np.std(steps['scaled'])):.2f}; each row's largest "
               f"weight is {float(top.mean()):.2f} on average (entropy {float(steps['entropy'].mean()):.2f} nats), "
               f"and σ(1 − σ) at that weight is {float((top * (1 - top)).mean()):.3f}. "
               f"At the paper's scale this recomputation matches the model's own weights to {check:.1e}.")
    data = {"model": m.key, "tokens": enc.tokens, "layer": layer, "head": head, "d_k": d_k, "scale": factor,
            "causal": causal, "attention": np.round(steps["probs"], 5).tolist(),
            "max_abs_difference_to_model": check,
            "sweep": {"factor": sweep, "mean_max_weight": maxp, "mean_gradient_at_max": grads}}
    return summary, steps_fig, sat_fig, data


def positional_encoding(n_positions=64, d_model=128):
    """Sinusoidal positional encoding (Vaswani et al. 2017, §3.5) and MiniLM's learned positions to compare."""
    notices: list[str] = []
    n = as_int(n_positions, "Positions", 2, PE_MAX_POSITIONS, notices)
    d = as_int(d_model, "d_model", 2, PE_MAX_DIM, notices)
    if d % 2:
        d += 1
        notices.append(f"d_model must be even (sine and cosine pairs); using {d}.")
    warn(notices)
    pe = att.sinusoidal_pe(n, d)
    dots = pe @ pe.T                                                   # (n, n)
    minilm = MODELS[DEFAULT_MODEL].model
    learned = att.cosine_matrix(minilm.embeddings.pos.weight[:n].detach().numpy())  # (n, n), trained, not computed
    fig = fa.positional_figure(pe, dots, learned, "MiniLM")
    data = {"n_positions": n, "d_model": d, "pe": np.round(pe, 4).tolist(), "dot_products": np.round(dots, 3).tolist(),
            "minilm_position_cosine": np.round(learned, 3).tolist()}
    return fig, data


# ---------------------------------------------------------------------------------------------
# Layout and events

INTRO_MD = r"""**Self-attention** (Vaswani et al. 2017): every token $i$ makes a query $q_i = x_i W^Q$, a key $k_i = x_i W^K$
and a value $v_i = x_i W^V$; its output is a weighted average of all values,
$$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right) V,$$
where row $i$ of the softmax holds the weights token $i$ gives to every token (they sum to 1), and $M$ is $0$ where
looking is allowed and $-\infty$ where it is not (padding; and, in a GPT, every later token: causal attention).
**Multi-head**: $h$ heads each do this in their own $d_k = d_\text{model}/h$-dimensional subspace,
$\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\,W^O$, so one layer can follow
several relations at once. MiniLM-L6 has 6 layers × 12 heads of $d_k = 32$; BERT reads in both directions, so a row
may put weight anywhere in the sentence. Type a second sentence to make a pair `[CLS] A [SEP] B [SEP]`
(segment ids 0 for A, 1 for B)."""

PATTERNS_MD = r"""**Reading the patterns.** Many heads put most of their weight on `[SEP]` or `[CLS]`, or on the token itself or its
neighbour. Clark et al. (2019, *What does BERT look at?*) found that attention to `[SEP]` often works as a
"no-op": a head with nothing to do parks its weight there. Others follow syntax (a determiner to its noun, an object
to its verb) or link a word to its earlier mentions. **Attention weights are not explanations**: a weight says how
much of a value vector is mixed in, not how much that token mattered for the prediction. Values have different
norms, later layers mix already-mixed vectors, and different weights can give the same output (Jain & Wallace 2019;
Wiegreffe & Pinter 2019). Treat the views as a microscope on the computation, not as the model's reasons."""

STEPS_MD = r"""**One head from the inside.** First row: $Q$, $K$, $V$ (one row per token, $d_k$ columns) and the output.
Second row: the raw scores $QK^\top$, the scaled (and, for the GPT, causally masked) scores, the softmax, and its
local gradient $\partial\sigma_i/\partial z_i = \sigma_i(1-\sigma_i)$. If $q$ and $k$ have unit-variance components,
$q\cdot k$ has variance $d_k$: unscaled, the logits spread widely, the softmax gives almost one-hot rows, and
$\sigma_i(1-\sigma_i)$ is close to 0 both at the winner ($\sigma \approx 1$) and everywhere else ($\sigma \approx 0$),
so little gradient flows back to $W^Q$ and $W^K$. Dividing by $\sqrt{d_k}$ keeps the variance near 1. Switch the scale
to compare; the curve below sweeps the factor."""


PE_MD = r"""**Where is each token?** Attention itself ignores order: permute the tokens and every weight moves with
them. The Transformer adds a position vector to each token embedding. Vaswani et al. (2017) use fixed sinusoids,
$PE_{(pos,\,2i)} = \sin(pos / 10000^{2i/d_\text{model}})$ and $PE_{(pos,\,2i+1)} = \cos(pos / 10000^{2i/d_\text{model}})$:
each pair of dimensions turns at its own frequency, from one turn every $2\pi$ positions to one every $2\pi \cdot 10000$,
so the dot product of two positions depends only on their distance (the bands parallel to the diagonal) and a shift
by $k$ is the same rotation everywhere. BERT and GPT-2 instead *learn* one vector per position (MiniLM: 512 of
them); the third panel shows how similar MiniLM's learned vectors are to each other: neighbours look alike there too."""


def model_choices() -> list[tuple[str, str]]:
    return [(m.label, key) for key, m in MODELS.items()]


def head_choices(m: att.AttentionModel) -> list[tuple[str, str]]:
    return [("mean over heads", "mean"), ("max over heads", "max")] + [(f"head {h}", str(h)) for h in range(m.n_head)]


def model_changed(model_key):
    m = MODELS.get(model_key, MODELS[DEFAULT_MODEL])
    return (gr.update(maximum=m.n_layer - 1, value=0),
            gr.update(choices=head_choices(m), value="mean"),
            gr.update(maximum=m.n_layer - 1, value=0),
            gr.update(choices=[(f"head {h}", str(h)) for h in range(m.n_head)], value="0"))


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events; `sentence` is the text shared by every tab."""
    sentence = shared.text  # the committed sentence (see Shared)
    m0 = MODELS[DEFAULT_MODEL]
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    with gr.Row():
        text_b = gr.Textbox("", label="Second sentence (optional: makes a pair [CLS] A [SEP] B [SEP])", scale=3)
        model = gr.Dropdown(model_choices(), value=DEFAULT_MODEL, label="Model", scale=2)
    with gr.Tabs():
        with gr.Tab("Head view, model view, heatmap"):
            with gr.Row():
                layer = gr.Slider(0, m0.n_layer - 1, value=0, step=1, label="Layer", scale=2)
                head = gr.Dropdown(head_choices(m0), value="mean", label="Head (heatmap)", scale=1)
                hide = gr.Checkbox(False, label="Hide [CLS] and [SEP] in the heatmap", scale=1)
            with gr.Row():
                with gr.Column(scale=1):
                    gr.Markdown("#### Head view: one layer, every head")
                    head_view = gr.HTML(elem_id="attn-head-view", js_on_load=fa.HEAD_VIEW_JS)
                with gr.Column(scale=1):
                    gr.Markdown("#### Model view: click a head to enlarge it")
                    model_view = gr.HTML(elem_id="attn-model-view", elem_classes=FIGURE, js_on_load=fa.HEAD_PICK_JS)
            heatmap = gr.Plot(label="Attention heatmap", elem_id="attn-heatmap")
            gr.Markdown(PATTERNS_MD)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                detail = gr.Radio([("the chosen head or aggregate (T × T)", "head"),
                                   (f"every layer and head (L × H × T × T, up to {ALL_LAYERS_MAX} tokens)", "all")],
                                  value="head", label="What the JSON holds")
                attn_file = gr.DownloadButton("Download JSON", size="sm")
                attn_json = gr.JSON(label="attention")
        with gr.Tab("Inside one head: Q, K, V, softmax") as steps_tab:
            gr.Markdown(STEPS_MD, latex_delimiters=LATEX)
            with gr.Row():
                s_layer = gr.Slider(0, m0.n_layer - 1, value=0, step=1, label="Layer", scale=2)
                s_head = gr.Dropdown([(f"head {h}", str(h)) for h in range(m0.n_head)], value="0", label="Head",
                                     scale=1)
                scale = gr.Radio([(label, key) for key, label in SCALES.items()], value="paper",
                                 label="Scale of Q Kᵀ", scale=2)
            steps_summary = gr.Markdown(elem_id="attn-steps-summary")
            steps_plot = gr.Plot(label="Step by step")
            sat_plot = gr.Plot(label="Saturation")
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                steps_json = gr.JSON(label="attention_steps")
        with gr.Tab("Positional encoding") as pe_tab:
            gr.Markdown(PE_MD, latex_delimiters=LATEX)
            with gr.Row():
                pe_n = gr.Slider(2, PE_MAX_POSITIONS, value=64, step=1, label="Positions")
                pe_d = gr.Slider(2, PE_MAX_DIM, value=128, step=2, label="d_model")
            pe_plot = gr.Plot(label="Positional encoding", elem_id="attn-pe")
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                pe_json = gr.JSON(label="positional_encoding")

    shared.remember("att", text_b=text_b, model=model, layer=layer, head=head, hide=hide)
    model.change(model_changed, inputs=model, outputs=[layer, head, s_layer, s_head], api_visibility="private",
                 queue=False)
    gr.on([demo.load, shared.restored.change, sentence.change, text_b.submit, model.change, layer.release, head.change,
           hide.change, detail.change], attention, inputs=[sentence, text_b, model, layer, head, hide, detail],
          outputs=[head_view, model_view, heatmap, attn_file, attn_json], api_name="attention",
          trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    model_view.select(pick_head, outputs=[layer, head], api_visibility="private", queue=False).then(
        attention, inputs=[sentence, text_b, model, layer, head, hide, detail],
        outputs=[head_view, model_view, heatmap, attn_file, attn_json], api_visibility="private",
        trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    gr.on([steps_tab.select, sentence.change, text_b.submit, model.change, s_layer.release, s_head.change,
           scale.change],
          attention_steps, inputs=[sentence, text_b, model, s_layer, s_head, scale],
          outputs=[steps_summary, steps_plot, sat_plot, steps_json], api_name="attention_steps",
          trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    gr.on([pe_tab.select, pe_n.release, pe_d.release], positional_encoding, inputs=[pe_n, pe_d],
          outputs=[pe_plot, pe_json], api_name="positional_encoding", trigger_mode="always_last",
          show_progress="minimal")
