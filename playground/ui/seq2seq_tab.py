"""The Seq2seq attention tab: numbers in English words into digits, with and without attention.

1. Source in, translation out, the alignment heatmap (target × source) and a step slider through the decoder
   showing the weights alpha_ij that make the context vector c_i at step i.
2. The bottleneck experiment: exact-match accuracy against source length for every shipped model, from their
   training cards, and a button that re-runs a quick evaluation on a few lengths.
3. The Transformer's cross-attention per head beside a recurrent model's alignment for the same source.
4. The score functions' equations beside the plots, as the code computes them (playground/nets/seq2seq.py).

The models are small (0.2 M parameters each), from the registry (analysis/models.py: `seq2seq-<variant>`, loaded on
first use, read-only); the shared sentence of the other tabs is English, not numbers, so this tab has its own source
box. A model is named by its variant (`bahdanau`) or its id (`seq2seq-bahdanau`).
"""

from __future__ import annotations

import gradio as gr

from playground.analysis import seq2seq as an
from playground.figures import seq2seq as fs
from playground.training import seq2seq as task
from playground.ui.common import LATEX, Shared, as_int, json_file, text_input, things_to_try, warn

VARIANTS = an.variants()   # the shipped encoder-decoders, by variant; nothing is loaded here
RNN_MODELS = [v for v in VARIANTS if v != "transformer"]
DEFAULT_MODEL = "bahdanau" if "bahdanau" in VARIANTS else next(iter(VARIANTS), "bahdanau")
EXAMPLE = "three hundred forty two , seven , ninety , six hundred five , eleven"
MAX_BEAM = 8


# ---------------------------------------------------------------------------------------------
# Handlers


def _source(text, notices: list[str]) -> task.Source:
    text = text_input(text, notices)
    src = task.read_source(text)
    if src.bad_chars:
        shown = ", ".join(repr(c) for c in src.bad_chars[:12])
        raise gr.Error(f"Characters outside the task's vocabulary: {shown}. Write numbers from 0 to 999 in English "
                       f"words, separated by commas, e.g. “{EXAMPLE}”.")
    if src.unknown:
        words = ", ".join(f"'{w}'" + (f" (did you mean '{src.suggestions[w]}'?)" if w in src.suggestions else "")
                          for w in src.unknown[:8])
        raise gr.Error(f"Words outside the task's vocabulary: {words}. The vocabulary is: "
                       f"{' '.join(task.SRC_VOCAB[1:])}.")
    if not src.words:
        raise gr.Error(f"Type numbers in words, e.g. “{EXAMPLE}”.")
    if len(src.words) > task.MAX_SOURCE_LEN:
        notices.append(f"The source has {len(src.words)} words; the first {task.MAX_SOURCE_LEN} are translated.")
        src.words, src.ids = src.words[:task.MAX_SOURCE_LEN], src.ids[:task.MAX_SOURCE_LEN]
    if len(src.words) > task.MAX_TRAIN_LEN:
        notices.append(f"{len(src.words)} words is longer than any training source ({task.MAX_TRAIN_LEN} words): "
                       f"expect accuracy to drop, most of all without attention. That is the experiment.")
    return src


def _variant(key, listed: list[str], what: str = "model") -> str:
    """A model's variant (`bahdanau`), also when it is named by its id (`seq2seq-bahdanau`); a gr.Error naming the
    choices when it is none of `listed`."""
    variant = key.removeprefix("seq2seq-") if isinstance(key, str) else key
    if variant not in listed:
        raise gr.Error(f"Unknown {what} {key!r}; choose from {', '.join(listed)}.")
    return variant


def _model(key) -> tuple[str, object]:
    """(its variant, the encoder-decoder) of a model named by its variant or id."""
    if not VARIANTS:
        raise gr.Error("No seq2seq model is shipped; train one: python -m playground.train seq2seq --variant=bahdanau")
    variant = _variant(key, VARIANTS)
    return variant, an.model(variant).model


def _label(key: str) -> str:
    return an.LABELS.get(key, key)


def translate(source, model_key=DEFAULT_MODEL, beam_size=1):
    """Translate; the alignment heatmap, the first decoder step, and the data."""
    notices: list[str] = []
    src = _source(source, notices)
    model_key, model = _model(model_key)
    beam = as_int(beam_size, "Beam size", 1, MAX_BEAM, notices)
    data, a = an.translate(model, model_key, src.words, src.ids, beam, notices)
    label = _label(model_key)
    heat = fs.alignment_figure(src.words, a["tokens"], a["alpha"], f"{label}: alignment α (output × source)", step=0)
    step_fig = _step_plot(src.words, a["tokens"], a["alpha"], 0, label)
    ref = data["reference"]
    verdict = "" if ref is None else (" ✓ correct" if data["correct"] else f" ✗ the answer is **{ref}**")
    summary = (f"### {data['output'] or '(empty)'}{verdict}\n{label}, {data['decoding']}: "
               f"{len(src.words)} source words, {len(a['tokens'])} output tokens (the end token included), "
               f"log p(y | x) = {a['log_prob']:.3f}.")
    state = {"model": model_key, "source": src.words, "tokens": a["tokens"], "alpha": data["alignment"]}
    warn(notices)
    slider = gr.update(maximum=max(1, len(a["tokens"]) - 1), value=0)
    return summary, heat, slider, step_fig, state, json_file(data, "seq2seq"), data


def _step_plot(source: list[str], tokens: list[str], alpha, i: int, label: str):
    weights = None if alpha is None else alpha[i]
    so_far = "".join(t for t in tokens[:i] if t != "</s>")
    token = "the end token" if tokens[i] == "</s>" else f"“{tokens[i]}”"
    after = f"after “{so_far}”" if i else "first, after the start token ‹s› alone"  # ‹s›: plotly reads <s> as a tag
    title = f"{label}, step {i}: emits {token} {after}; c_{i} = Σ_j α_{i}j h_j"
    return fs.step_figure(source, weights, title)


def decoder_step(state, step=0):
    """One decoder step of the last translation (this user's, from gr.State): its weights over the source."""
    notices: list[str] = []
    if not state or not state.get("tokens"):
        raise gr.Error("Translate a source first.")
    tokens, alpha = state["tokens"], state["alpha"]
    i = as_int(step, "Step", 0, len(tokens) - 1, notices)
    warn(notices)
    data = an.decoder_step(state["source"], tokens, alpha, i)
    label = _label(state["model"])
    heat = fs.alignment_figure(state["source"], tokens, alpha, f"{label}: alignment α (output × source)", step=i)
    return heat, _step_plot(state["source"], tokens, alpha, i, label), data


def compare(source, rnn_key=DEFAULT_MODEL, layer=1):
    """The Transformer's cross-attention per head (one layer) beside a recurrent model's alignment."""
    notices: list[str] = []
    src = _source(source, notices)
    if "transformer" not in VARIANTS:
        raise gr.Error("The Transformer checkpoint is not shipped: python -m playground.train seq2seq "
                       "--variant=transformer")
    rnn_key = _variant(rnn_key, RNN_MODELS, "recurrent model")
    transformer = an.model("transformer")
    layer = as_int(layer, "Layer", 0, transformer.config.n_layer - 1, notices)
    warn(notices)
    data, a = an.compare(an.model(rnn_key).model, rnn_key, transformer.model, src.words, src.ids, layer, notices)
    fig = fs.heads_figure(src.words, a["rnn_tokens"], a["rnn_alpha"], _label(rnn_key), a["tokens"], a["cross"], layer)
    return fig, data


def bottleneck():
    """Accuracy against source length for every shipped model, as recorded in its card.json at training time."""
    data = an.bottleneck(VARIANTS)
    if not data["models"]:
        raise gr.Error("No seq2seq card holds an accuracy by length yet; train the models first.")
    per = next(iter(data["models"].values()))["per_bucket"]
    fig = fs.bottleneck_figure(data["models"], an.LABELS, task.MAX_TRAIN_LEN,
                               f"Training cards: {per} sources per 4-word bucket")
    return fig, data


def evaluate(per_length=20, seed=0):
    """A quick re-run of the experiment: every model, a few lengths, fresh held-out sources."""
    notices: list[str] = []
    n = as_int(per_length, "Sources per length", 1, 100, notices)
    seed = as_int(seed, "Seed", 0, 2**31 - 1, notices)
    warn(notices)
    if not VARIANTS:
        raise gr.Error("No seq2seq model is shipped.")
    data = an.evaluate({key: an.model(key).model for key in VARIANTS}, n, seed)
    fig = fs.bottleneck_figure(data["models"], an.LABELS, task.MAX_TRAIN_LEN,
                               f"Now: {n} fresh sources per length (seed {seed})")
    return fig, data


# ---------------------------------------------------------------------------------------------
# Layout and events

INTRO_MD = r"""**The bottleneck and the fix.** An encoder reads the source, a decoder writes the translation one token
at a time. The task (generated in code, `playground/training/seq2seq.py`): numbers from 0 to 999 in English words,
separated by commas, into digits: *three hundred forty two , seven* → `342,7`. The encoder is a bidirectional GRU; its
annotation of word $j$ is $h_j = [\overrightarrow{h}_j ; \overleftarrow{h}_j]$. **Without attention** (Cho et al.
2014; Sutskever et al. 2014) the decoder gets one fixed vector $c = [\overrightarrow{h}_T ; \overleftarrow{h}_1]$ and
must keep the whole source in it: a bottleneck that hurts more as the source grows. **With attention** (Bahdanau et
al. 2015) step $i$ gets its own context $c_i = \sum_j \alpha_{ij} h_j$, a weighted average of the annotations with
$\sum_j \alpha_{ij} = 1$; the weights form the alignment below. The Transformer (Vaswani et al. 2017) keeps the
attention and drops the recurrence."""

SCORES_MD = (r"""**Score functions** (as `playground/nets/seq2seq.py` computes them; $s$ is the decoder state, $e_{ij}$
the score, $\alpha_{ij} = \exp(e_{ij}) / \sum_k \exp(e_{ik})$):

| model | score $e_{ij}$ | decoder step |
|---|---|---|
| no attention | none | $s_i = \mathrm{GRU}([E y_{i-1} ; c], s_{i-1})$, the same $c$ every step |
| Bahdanau (additive) | $v_a^\top \tanh(W_a s_{i-1} + U_a h_j)$ | $c_i = \sum_j \alpha_{ij} h_j$, """
r"""then $s_i = \mathrm{GRU}([E y_{i-1} ; c_i], s_{i-1})$ |
| Luong dot | $s_i^\top h_j$ | $s_i = \mathrm{GRU}([E y_{i-1} ; \tilde h_{i-1}], s_{i-1})$ first, """
r"""then $c_i$, $\tilde h_i = \tanh(W_c [c_i ; s_i])$ |
| Luong general | $s_i^\top W_a h_j$ | as Luong dot |
| Transformer | $\frac{q_i \cdot k_j}{\sqrt{d_k}}$ per head, $q_i = \mathrm{LN}(u_i) W^Q + b^Q$, """
r"""$k_j = m_j W^K + b^K$ ($m$: the encoder output) | """
r"""cross-attention in every decoder layer, after causal self-attention |

Bahdanau scores with the *previous* state $s_{i-1}$ (attention before the recurrent step), Luong with the *current*
$s_i$ (after it). Our Bahdanau output layer is $\tanh(W_t [s_i ; c_i ; E y_{i-1}])$ rather than the paper's maxout.""")

STEP_MD = r"""**One decoder step.** Move the slider: the bars are $\alpha_{i1}, \dots, \alpha_{iT}$ for output token
$i$, the weights of the context vector $c_i = \sum_j \alpha_{ij} h_j$ (they sum to 1). A digit usually looks at the word
that spells it; a zero that no word spells (the 0 of *three hundred seven*) looks at *hundred*."""

BOTTLENECK_MD = r"""**The bottleneck experiment.** Exact match (the whole digit string right) on held-out sources, by
source length. Every recurrent model has the same encoder and a decoder of the same size; only the context differs.
Sources longer than 32 words were never seen in training (shaded)."""

COMPARE_MD = r"""**The Transformer's cross-attention**, one panel per head of one decoder layer
($\mathrm{softmax}(QK^\top/\sqrt{d_k})$ with queries from the output prefix, keys from the encoded source), beside a
recurrent model's alignment for the same source. Heads split the work: some follow the alignment, some look at the
commas or at the words around."""


TRY = [("a short one", ["seven , forty two"]),
       ("a long source: the bottleneck", [", ".join(["three hundred forty two", "seven", "ninety", "six hundred five",
                                               "eleven", "two hundred"] * 2) + " , eight hundred one"]),
       ("a misspelt word", ["three hundered forty two , sevn"]),
       ("a zero no word spells", ["three hundred seven , one hundred"])]


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events. The sentence shared by the other tabs is not this task's input:
    the source box below is."""
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    with gr.Row():
        source = gr.Textbox(EXAMPLE, label="Source: numbers 0–999 in English words, separated by commas", scale=4,
                            elem_id="s2s-source")
        model = gr.Dropdown([(an.LABELS[k], k) for k in VARIANTS], value=DEFAULT_MODEL if VARIANTS else None,
                            label="Model", scale=2)
        beam = gr.Slider(1, MAX_BEAM, value=1, step=1, label="Beam size (1 = greedy)", scale=1)
    with gr.Row():
        go_button = gr.Button("Translate", variant="primary", scale=0)
        shuffle = gr.Button("A random held-out source", scale=0)
    tries = things_to_try(TRY, [source])
    summary = gr.Markdown(elem_id="s2s-output")
    state = gr.State(None)
    with gr.Row():
        with gr.Column(scale=1):
            heatmap = gr.Plot(label="Alignment (target × source)", elem_id="s2s-alignment")
        with gr.Column(scale=1):
            gr.Markdown(SCORES_MD, latex_delimiters=LATEX, elem_classes=["score-table"])
    gr.Markdown(STEP_MD, latex_delimiters=LATEX)
    step = gr.Slider(0, 10, value=0, step=1, label="Decoder step i", elem_id="s2s-step")
    step_plot = gr.Plot(label="Context weights at step i", elem_id="s2s-step-plot")
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        s2s_file = gr.DownloadButton("Download JSON", size="sm")
        s2s_json = gr.JSON(label="seq2seq")
        step_json = gr.JSON(label="seq2seq_step")

    gr.Markdown(BOTTLENECK_MD, latex_delimiters=LATEX)
    with gr.Row():
        with gr.Column(scale=1):
            bottleneck_plot = gr.Plot(label="From the training cards", elem_id="s2s-bottleneck")
        with gr.Column(scale=1):
            eval_plot = gr.Plot(label="Quick re-evaluation", elem_id="s2s-eval")
    with gr.Row():
        per_length = gr.Slider(5, 100, value=20, step=5, label="Sources per length", scale=2)
        seed = gr.Number(0, label="Seed", precision=0, scale=1)
        eval_button = gr.Button(f"Re-run on lengths {', '.join(map(str, an.EVAL_LENGTHS))}", scale=2)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        bottleneck_json = gr.JSON(label="seq2seq_bottleneck")
        eval_json = gr.JSON(label="seq2seq_evaluate")

    gr.Markdown(COMPARE_MD, latex_delimiters=LATEX)
    with gr.Row():
        rnn_model = gr.Dropdown([(an.LABELS[k], k) for k in RNN_MODELS],
                                value=DEFAULT_MODEL if DEFAULT_MODEL in RNN_MODELS else None,
                                label="Recurrent model", scale=2)
        n_layer = an.model("transformer").config.n_layer if "transformer" in VARIANTS else 1
        layer = gr.Slider(0, max(1, n_layer - 1), value=n_layer - 1, step=1, label="Transformer decoder layer",
                          scale=1)
        compare_button = gr.Button("Compare", scale=0)
    compare_plot = gr.Plot(label="Cross-attention per head", elem_id="s2s-heads")
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        compare_json = gr.JSON(label="seq2seq_compare")

    shared.remember("s2s", source=source, model=model, beam=beam)
    translation = dict(inputs=[source, model, beam],
                       outputs=[summary, heatmap, step, step_plot, state, s2s_file, s2s_json],
                       trigger_mode="always_last", show_progress="minimal")
    gr.on([demo.load, shared.changed("restored"), go_button.click, source.submit, model.change, beam.release],
          translate,
          api_name="seq2seq", **translation)
    for click in tries:
        click.then(translate, api_visibility="private", **translation)
    step.release(decoder_step, inputs=[state, step], outputs=[heatmap, step_plot, step_json],
                 api_name="seq2seq_step", trigger_mode="always_last", show_progress="hidden")
    shuffle.click(an.random_source, outputs=source, api_visibility="private", queue=False).then(
        translate, inputs=[source, model, beam], outputs=[summary, heatmap, step, step_plot, state, s2s_file, s2s_json],
        api_visibility="private", show_progress="minimal")
    gr.on([demo.load], bottleneck, outputs=[bottleneck_plot, bottleneck_json], api_name="seq2seq_bottleneck",
          show_progress="hidden")
    # every panel drawn on load (the re-evaluation and the cross-attention used to wait, empty, for their button)
    gr.on([demo.load, eval_button.click], evaluate, inputs=[per_length, seed], outputs=[eval_plot, eval_json],
          api_name="seq2seq_evaluate")
    gr.on([demo.load, shared.changed("restored"), compare_button.click, rnn_model.change, layer.release], compare,
          inputs=[source, rnn_model, layer],
          outputs=[compare_plot, compare_json], api_name="seq2seq_compare", trigger_mode="always_last",
          show_progress="minimal")
