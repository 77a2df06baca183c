"""The Attention tab: a real pretrained BERT (all-MiniLM-L6-v2) and our GPT, head by head.

Head view (lines from each token to the tokens it attends to, one colour per head), model view
(every layer x head as a thumbnail), one head's heatmap (or the mean / max over heads), and one
head step by step from Q K^T to the softmax. Aggregation happens on the server, so 512 tokens stay
fast and light in the browser.
"""

from __future__ import annotations

import gradio as gr
import numpy as np

from playground.analysis import attention as att
from playground.analysis import models
from playground.figures import attention as fa
from playground.ui import attention_heads
from playground.ui.common import (FIGURE, LATEX, Shared, as_int, json_file, model_ids, refuse_missing_smollm2,
                                  text_input, things_to_try, warn)

# The registry's models with attention (analysis/models.py), each loaded on its first use, read-only: MiniLM, our GPT
# and BERT when their checkpoints are shipped, SmolLM2 when its package is installed or the Hub may be used
# (the Generation tab's one copy)
LISTED = models.ids("bert", "gpt", "llama")
DEFAULT_MODEL = "minilm"


def _model(key) -> att.AttentionModel:
    """A model by its id or alias (`gpt`, `bert`, `smollm2`: the ids of older calls and links)."""
    refuse_missing_smollm2(key)
    if models.resolve(key) not in LISTED:
        raise gr.Error(f"Unknown model {str(key)[:40]!r}; choose from {', '.join(LISTED)}.")
    try:
        return att.load(key)
    except models.Missing as err:  # SmolLM2's download from the Hub failed: the reason, never a traceback
        raise gr.Error(str(err)) from None


def _shape(key) -> tuple[int, int, int]:
    """(layers, query heads, query heads per key/value head) of a model, without loading SmolLM2."""
    s = models.shape(key if models.resolve(key) in LISTED else DEFAULT_MODEL)
    return s.layers, s.heads, s.kv_group


def _family(key) -> str:
    """"bert", "gpt" or "llama", without loading SmolLM2."""
    return models.family(key if models.resolve(key) in LISTED else DEFAULT_MODEL)


def applies(key) -> dict[str, bool]:
    """Which of the tab's controls mean something for a model: a sentence pair and [CLS]/[SEP] only for a BERT (a
    GPT or SmolLM2 reads one text and has neither token), the chat template only for SmolLM2."""
    bert = _family(key) == "bert"
    return {"pair": bert, "hide_special": bert, "chat": models.resolve(key) == models.SMOLLM2}


PE_MAX_POSITIONS, PE_MAX_DIM = 128, 256  # the PE figure and its JSON carry (n x d) + 2 (n x n) numbers


# ---------------------------------------------------------------------------------------------
# Handlers


def _inputs(text, text_b, model_key, notices: list[str]) -> tuple[att.AttentionModel, str, str]:
    m = _model(model_key)
    text = text_input(text, notices)
    if not text.strip():
        raise gr.Error("Type a sentence above to see its attention.")
    text_b = text_input(text_b, notices) if text_b is not None else ""
    return m, text, text_b


def _head(head, m: att.AttentionModel, notices: list[str]) -> int | str:
    if isinstance(head, str) and head.strip().lower() in att.AGGREGATES:
        return head.strip().lower()
    return as_int(head, "Head", 0, m.n_head - 1, notices)


def attention(text, text_b="", model_key=DEFAULT_MODEL, layer=0, head="mean", hide_special=False, detail="head",
              chat=False):
    """Every head of every layer on the sentence (or pair, or SmolLM2's chat prompt): head view, model view,
    heatmap, data."""
    notices: list[str] = []
    m, text, text_b = _inputs(text, text_b, model_key, notices)
    layer = as_int(layer, "Layer", 0, m.n_layer - 1, notices)
    head = _head(head, m, notices)
    if detail not in ("head", "all"):
        raise gr.Error("Detail should be 'head' (one T × T matrix) or 'all' (every layer and head).")
    try:
        v = att.view(m, text, text_b, layer, head, bool(hide_special), detail, notices, chat=bool(chat))
    except att.AttentionError as err:
        raise gr.Error(str(err)) from None
    enc = v.enc
    head_view = fa.head_view_html(enc.tokens, enc.segments, v.A_layer, v.edges, layer, v.edge_note, spans=enc.spans,
                                  shown=v.shown)
    model_view = fa.model_view_html(v.thumbs, (layer, head if isinstance(head, int) else -1), v.thumb_factor)
    if v.heat_factor > 1:
        heatmap = fa.heatmap_figure([enc.tokens[i] for i in v.heat_keep], v.heat, v.title, factor=v.heat_factor,
                                    causal=v.causal, spans=[enc.spans[i] for i in v.heat_keep])
    else:
        heatmap = fa.heatmap_figure(enc.tokens, v.heat, v.title, keep=v.heat_keep, causal=v.causal, spans=enc.spans)
    summary = fa.head_summary_figure(v.data["head_summary"], att.SUMMARY, v.data["kv_heads"])
    warn(notices)
    return head_view, model_view, heatmap, summary, json_file(v.data, "attention"), v.data


def reading(text, text_b="", model_key=DEFAULT_MODEL, chat=False) -> str:
    """The reading notes for the chosen model, with where its heads rest on this text (the model's own weights:
    [CLS] and [SEP] for a BERT, the first token for a causal model)."""
    notices: list[str] = []
    m, text, text_b = _inputs(text, text_b, model_key, notices)
    try:
        r = att.resting_places(m, text, text_b, notices, chat=bool(chat))
    except att.AttentionError:
        return gr.skip()  # the attention event has said what is wrong
    return fa.reading_md(m.label.split(" (")[0], r)


def pick_head(evt: gr.SelectData):
    """A click on a model-view thumbnail: show that layer and head."""
    layer, head = evt.index
    return gr.update(value=int(layer)), gr.update(value=str(head))


def attention_steps(text, text_b="", model_key=DEFAULT_MODEL, layer=0, head=att.SHARPEST, scale="paper", chat=False):
    """One head from the inside: Q, K, V, Q K^T, scaled and masked, softmax, output, and what the scale does.
    `head` "sharpest" (the default) is the head the head view opens on: the layer's sharpest on this text."""
    notices: list[str] = []
    m, text, text_b = _inputs(text, text_b, model_key, notices)
    layer = as_int(layer, "Layer", 0, m.n_layer - 1, notices)
    sharpest = isinstance(head, str) and head.strip().lower() == att.SHARPEST
    head = att.SHARPEST if sharpest else _head(head, m, notices)
    if not sharpest and not isinstance(head, int):
        notices.append(f"Step by step needs one head; showing head 0 (not the {head}).")
        head = 0
    if scale not in att.SCALES:
        raise gr.Error(f"Scale should be one of {', '.join(att.SCALES)}.")
    try:
        data, a = att.steps(m, text, text_b, layer, head, scale, notices, chat=bool(chat))
    except att.AttentionError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    d_k, sweep, head = data["d_k"], data["sweep"], data["head"]
    which = f"head {head} (the sharpest on this text: the head view's)" if sharpest else f"head {head}"
    steps_fig = fa.steps_figure(data["tokens"], a["q"], a["k"], a["v"], a, f"× 1/√{d_k}" if scale == "paper" else "× 1")
    sat_fig = fa.saturation_figure(sweep["factor"], sweep["mean_max_weight"], sweep["mean_gradient_at_max"],
                                   data["scale"])
    top = a["probs"].max(axis=1)
    summary = (f"Layer {layer}, {which}, d_k = {d_k}, {len(data['tokens'])} tokens, scale {att.SCALES[scale]}: "
               f"the scaled scores have standard deviation {float(np.std(a['scaled'])):.2f}; each row's largest "
               f"weight is {float(top.mean()):.2f} on average (entropy {float(a['entropy'].mean()):.2f} nats), "
               f"and σ(1 − σ) at that weight is {float((top * (1 - top)).mean()):.3f}. "
               f"At the paper's scale this recomputation matches the model's own weights to "
               f"{data['max_abs_difference_to_model']:.1e}.")
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
    data, a = att.positional(_model(DEFAULT_MODEL), n, d)
    return fa.positional_figure(a["pe"], a["dot_products"], a["learned"], "MiniLM", a["rope"], a["alibi"]), data


# ---------------------------------------------------------------------------------------------
# Layout and events

INTRO_MD = r"""**Self-attention** (Vaswani et al. 2017): every token $i$ makes a query $q_i = x_i W^Q$, a key
$k_i = x_i W^K$ and a value $v_i = x_i W^V$; its output is a weighted average of all values,
$$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right) V,$$
where row $i$ of the softmax holds the weights token $i$ gives to every token (they sum to 1), and $M$ is $0$ where
looking is allowed and $-\infty$ where it is not (padding; and, in a GPT, every later token: causal attention).
**Multi-head**: $h$ heads each do this in their own $d_k = d_\text{model}/h$-dimensional subspace,
$\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\,W^O$, so one layer can follow
several relations at once."""


def about_md(key) -> str:
    """The intro's sentence on the chosen model: its layers and heads, and which way it reads (it described MiniLM
    whichever model was chosen)."""
    n_layer, n_head, group = _shape(key)
    name = att.label(key).split(" (")[0]
    shared = (f"; every {group} query heads share one key and value head (grouped-query attention)"
              if group > 1 else "")
    if _family(key) == "bert":
        return (f"**{name}** has {n_layer} layers × {n_head} heads{shared}. A BERT reads in both directions, so a row "
                "may put weight anywhere in the sentence. Type a second sentence to make a pair "
                "`[CLS] A [SEP] B [SEP]` (segment ids 0 for A, 1 for B).")
    return (f"**{name}** has {n_layer} layers × {n_head} heads{shared}. It reads left to right (causal attention): "
            "row $i$ puts weight only on tokens $0$ to $i$, so the upper triangle is 0. It reads one text, no pair.")

PATTERNS_MD = "**Reading the patterns**: measured on the text above, for the chosen model…"  # until it is

SUMMARY_MD = r"""Each cell is one head (layers down, heads across), averaged over the sentence's tokens as queries: the
**entropy** of its attention (low: it looks at one token), the **mean distance** it looks over, and how much weight
it puts on the **previous token**, the **first token** (`[CLS]` in a BERT), the **`[SEP]`** tokens (a BERT's only) and
**the query itself**. A bright cell in *previous* is a previous-token head; bright in *[SEP]* (a BERT) or *first*
(a causal model, whose first query can only look at the first token), a head at rest.
**Rollout** (in the Head list: Abnar & Zuidema 2020) follows attention through the layers: each layer's mean over
heads, half mixed with the identity for the residual connection, multiplied from layer 0 up to the chosen one."""

STEPS_MD = r"""**One head from the inside.** First row: $Q$, $K$, $V$ (one row per token, $d_k$ columns) and the output.
Second row: the raw scores $QK^\top$, the scaled (and, for the GPT, causally masked) scores, the softmax, and its
local gradient $\partial\sigma_i/\partial z_i = \sigma_i(1-\sigma_i)$. If $q$ and $k$ have unit-variance components,
$q\cdot k$ has variance $d_k$: unscaled, the logits spread widely, the softmax gives almost one-hot rows, and
$\sigma_i(1-\sigma_i)$ is close to 0 both at the winner ($\sigma \approx 1$) and everywhere else ($\sigma \approx 0$),
so little gradient flows back to $W^Q$ and $W^K$. Dividing by $\sqrt{d_k}$ keeps the variance near 1. Switch the scale
to compare; the curve below sweeps the factor. It opens on the head the head view opens on: the layer's sharpest on
your text (most weight on one other word); pick any head by number."""


PE_MD = r"""**Where is each token?** Attention itself ignores order: permute the tokens and every weight moves with
them. The Transformer adds a position vector to each token embedding. Vaswani et al. (2017) use fixed sinusoids,
$PE_{(pos,\,2i)} = \sin(pos / 10000^{2i/d_\text{model}})$ and
$PE_{(pos,\,2i+1)} = \cos(pos / 10000^{2i/d_\text{model}})$: each pair of dimensions turns at its own frequency, from
one turn every $2\pi$ positions to one every $2\pi \cdot 10000$, so the dot product of two positions depends only on
their distance (the bands parallel to the diagonal) and a shift by $k$ is the same rotation everywhere. BERT and GPT-2
instead *learn* one vector per position (MiniLM: 512 of them); the third panel shows how similar MiniLM's learned
vectors are to each other: neighbours look alike there too.
**Below, position inside attention.** RoPE (Su et al. 2021; Llama, Mistral, SmolLM2) adds nothing to the input: it
rotates each pair of query and key dimensions by $m\theta_i$ at position $m$, so
$\langle R_m q, R_n k\rangle = \langle q, R_{n-m} k\rangle$ depends only on the distance $n - m$, exactly: the panel's
diagonals are constant (the JSON gives the largest deviation, rounding only). ALiBi (Press et al. 2022) adds no vector
either: each head subtracts $m_h (i - j)$ from the score of query $i$ for key $j$, with slopes $m_h = 2^{-8h/H}$."""


def model_choices() -> list[tuple[str, str]]:
    return [(att.label(key), key) for key in LISTED]


def one_head_choices(n_head: int, group: int = 1) -> list[tuple[str, str]]:
    """Each head by number; with grouped-query attention, the key/value head it reads too."""
    return [(f"head {h}" + (f" (K, V head {h // group})" if group > 1 else ""), str(h)) for h in range(n_head)]


def steps_head_choices(n_head: int, group: int = 1) -> list[tuple[str, str]]:
    """Inside one head: the layer's sharpest head on the text (the head view's, the default), or one by number."""
    return [("the sharpest (the head view's)", att.SHARPEST), *one_head_choices(n_head, group)]


def head_choices(n_head: int, group: int = 1) -> list[tuple[str, str]]:
    return [("mean over heads", "mean"), ("max over heads", "max"), ("rollout through the layers", "rollout"),
            *one_head_choices(n_head, group)]


def _shown_controls(model_key) -> tuple:
    """The second-sentence box, the [CLS]/[SEP] box and the chat box, shown only where they apply (`applies`)."""
    on = applies(model_key)
    return gr.update(visible=on["pair"]), gr.update(visible=on["hide_special"]), gr.update(visible=on["chat"])


def model_changed(model_key):
    n_layer, n_head, group = _shape(model_key)
    return (gr.update(maximum=n_layer - 1, value=0),
            gr.update(choices=head_choices(n_head, group), value="mean"),
            gr.update(maximum=n_layer - 1, value=0),
            gr.update(choices=steps_head_choices(n_head, group), value=att.SHARPEST),
            *_shown_controls(model_key))


def model_bounds(model_key):
    """On page load, and when a link or the tour sets the model: the layer sliders end at the chosen model's last
    layer (they are built to reach the deepest model's, SmolLM2's 30, which is what an API call is checked
    against), the head lists hold its heads, and the controls that apply to it show (`applies`). The values are
    left as they are: a link's were checked against its model (`link_limits`); a choice by hand resets them
    (`model_changed`)."""
    n_layer, n_head, group = _shape(model_key)
    return (gr.update(maximum=n_layer - 1), gr.update(choices=head_choices(n_head, group)),
            gr.update(maximum=n_layer - 1), gr.update(choices=steps_head_choices(n_head, group)),
            *_shown_controls(model_key))


def link_limits(params: dict[str, str]) -> dict[str, tuple | list]:
    """What a link's layer and head are checked against: the link's model (or the default), not the deepest."""
    n_layer, n_head, group = _shape(params.get("att.model", DEFAULT_MODEL))
    return {"att.layer": (0, n_layer - 1), "att.head": [value for _, value in head_choices(n_head, group)]}


def _wire_model(demo: gr.Blocks, shared: Shared, model: gr.Dropdown, bounds: list) -> None:
    """The controls that follow the model (`bounds`: model_changed's outputs), and a link's checked against it."""
    for key in ("att.layer", "att.head"):
        shared.limit(key, lambda params, key=key: link_limits(params)[key])
    shared.limit("att.model", model_ids(LISTED))  # an old link's `gpt` or `smollm2` too
    model.input(model_changed, inputs=model, outputs=bounds, api_visibility="private", queue=False)  # by hand
    for event in (demo.load, model.change):  # also a link's or the tour's model, whose layer and head stay
        event(model_bounds, inputs=model, outputs=bounds, api_visibility="private", queue=False)


TRY = [("a pronoun", ["The animal didn't cross the street because it was too tired.", ""]),
       ("a pair (BERT)", ["The man went to the store.", "He bought a gallon of milk."]),
       ("a long sentence", [" ".join(["The committee that the board appointed last spring, after months of debate "
                                      "about budgets, finally published the report which everyone had been "
                                      "waiting for."] * 3), ""]),
       ("repeated words", ["the cat saw the cat and the dog saw the dog", ""])]


def _below_heatmap(shared: Shared, model: gr.Dropdown, layer: gr.Slider, head: gr.Dropdown) -> gr.Plot:
    """The head view's two accordions: knock the chosen head out, and every head at a glance (its plot returned)."""
    attention_heads.build_knock_out(shared, model, layer, head)
    with gr.Accordion("Every head at a glance: the head summary", open=False):
        gr.Markdown(SUMMARY_MD)
        return gr.Plot(label="Head summary", elem_id="attn-summary")


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events; `sentence` is the text shared by every tab."""
    sentence = shared.text  # the committed sentence (see Shared)
    m0 = _model(DEFAULT_MODEL)
    deepest = max(_shape(key)[0] for key in LISTED)
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    about = gr.Markdown(about_md(DEFAULT_MODEL), latex_delimiters=LATEX, elem_id="attn-about")
    with gr.Row():
        text_b = gr.Textbox("", label="Second sentence (optional: makes a pair [CLS] A [SEP] B [SEP])", scale=2)
        with gr.Column(scale=3):
            model = gr.Dropdown(model_choices(), value=DEFAULT_MODEL, label="Model",  # its labels are long
                                allow_custom_value=True)  # an alias too (`gpt`, `smollm2`): _model checks it
            chat = gr.Checkbox(False, label="Chat: the sentence as the user's turn in SmolLM2's template",
                               visible=False)  # shown with SmolLM2 (model_changed)
    things_to_try(TRY, [sentence, text_b])
    with gr.Tabs() as views:
        with gr.Tab("Head view, model view, heatmap", id=attention_heads.HEAD_VIEW_TAB):
            with gr.Row():
                layer = gr.Slider(0, deepest - 1, value=0, step=1, label="Layer", scale=2)
                head = gr.Dropdown(head_choices(m0.n_head), value="mean", label="Head (heatmap)", scale=1)
                hide = gr.Checkbox(False, label="Hide [CLS] and [SEP] in the heatmap", scale=1)
            with gr.Row():
                with gr.Column(scale=1):
                    gr.Markdown("#### Head view: one layer, head by head")
                    head_view = gr.HTML(elem_id="attn-head-view", js_on_load=fa.HEAD_VIEW_JS)
                with gr.Column(scale=1):
                    gr.Markdown("#### Model view: click a head to enlarge it")
                    model_view = gr.HTML(elem_id="attn-model-view", elem_classes=FIGURE, js_on_load=fa.HEAD_PICK_JS)
            heatmap = gr.Plot(label="Attention heatmap", elem_id="attn-heatmap")
            patterns = gr.Markdown(PATTERNS_MD, elem_id="attn-reading")  # then the chosen model's, with its numbers
            summary = _below_heatmap(shared, model, layer, head)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                detail = gr.Radio([("the chosen head or aggregate (T × T)", "head"),
                                   (f"every layer and head (L × H × T × T, up to {att.ALL_LAYERS_MAX} tokens)", "all")],
                                  value="head", label="What the JSON holds")
                attn_file = gr.DownloadButton("Download JSON", size="sm")
                attn_json = gr.JSON(label="attention")
        with gr.Tab("Inside one head: Q, K, V, softmax") as steps_tab:
            gr.Markdown(STEPS_MD, latex_delimiters=LATEX)
            with gr.Row():
                s_layer = gr.Slider(0, deepest - 1, value=0, step=1, label="Layer", scale=2)
                s_head = gr.Dropdown(steps_head_choices(m0.n_head), value=att.SHARPEST, label="Head", scale=1)
                scale = gr.Radio([(label, key) for key, label in att.SCALES.items()], value="paper",
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
        opened = attention_heads.build(shared, model, layer, head, views)  # the head finder, the induction view

    shared.remember("att", text_b=text_b, model=model, layer=layer, head=head, hide=hide, chat=chat)
    _wire_model(demo, shared, model, [layer, head, s_layer, s_head, text_b, hide, chat])
    model.change(about_md, inputs=model, outputs=about, api_visibility="private", queue=False, show_progress="hidden")
    asked, shown = [sentence, text_b, model, layer, head, hide, detail, chat], [head_view, model_view, heatmap,
                                                                                summary, attn_file, attn_json]
    gr.on([demo.load, shared.changed("restored"), shared.changed("text"), text_b.submit, model.change, layer.release,
           head.change, hide.change, detail.change, chat.change], attention, inputs=asked, outputs=shown,
          api_name="attention", trigger_mode="always_last", show_progress="minimal").then(
        reading, inputs=[sentence, text_b, model, chat], outputs=patterns, api_visibility="private",
        trigger_mode="always_last", show_progress="hidden")  # the attention is kept: this does not run the model
    for picked in (model_view.select(pick_head, outputs=[layer, head], api_visibility="private", queue=False), opened):
        picked.then(attention, inputs=asked, outputs=shown, api_visibility="private", trigger_mode="always_last",
                    show_progress="minimal")  # a thumbnail's, or a ranked head's, layer and head redrawn
    gr.on([steps_tab.select, shared.changed("text"), text_b.submit, model.change, s_layer.release, s_head.change,
           scale.change, chat.change],
          attention_steps, inputs=[sentence, text_b, model, s_layer, s_head, scale, chat],
          outputs=[steps_summary, steps_plot, sat_plot, steps_json], api_name="attention_steps",
          trigger_mode="always_last", show_progress="minimal")
    gr.on([pe_tab.select, pe_n.release, pe_d.release], positional_encoding, inputs=[pe_n, pe_d],
          outputs=[pe_plot, pe_json], api_name="positional_encoding", trigger_mode="always_last",
          show_progress="minimal")
