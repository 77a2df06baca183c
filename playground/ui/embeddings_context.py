"""The Embeddings tab's contextual view: one word in several sentences through an encoder's layers (MiniLM,
our BERT), or through our ELMo (a layer of its biLM, or eq. 1's mix with the γ and s_j you set)."""

from __future__ import annotations

import re

import gradio as gr

from playground.analysis import models
from playground.analysis.embeddings import EmbeddingError, contextual as ctx, encoders
from playground.figures import embeddings as fe
from playground.ui.common import LATEX, as_float, as_int, text_input, warn

MAX_CONTEXT_SENTENCES = 20
ELMO_WEIGHTS = 3             # s_0 .. s_2: ELMo's token layer and its L = 2 biLSTM layers (the shipped biLM's L)
S_RANGE = 5.0                # |s_j| ≤ 5: softmax weights from ~0 to ~1 already
GAMMA_RANGE = (0.1, 10.0)    # γ > 0: it scales the ELMo vector (cosines do not change)
CONTEXT_NAMES = {"minilm": "MiniLM", "bert": "our BERT", "elmo": "our ELMo"}


def encoder(model) -> encoders.Encoder:
    """The encoder `model` names (MiniLM, our BERT), or a gr.Error naming the choices."""
    m = encoders.encoder(model) if model in encoders.ENCODERS else None
    if m is None:
        raise gr.Error(f"Unknown or unavailable encoder {model!r}; choose from {', '.join(encoders.ENCODERS)}.")
    return m


def _elmo() -> encoders.ELMoEncoder:
    m = encoders.elmo_encoder()
    if m is None:
        raise gr.Error(f"Our ELMo ({encoders.ELMO_CHECKPOINT}) is not shipped here; choose "
                       f"{' or '.join(encoders.ENCODERS)}.")
    if m.n_layer + 1 != ELMO_WEIGHTS:
        raise gr.Error(f"This ELMo has {m.n_layer + 1} layers; the tab offers {ELMO_WEIGHTS} weights s_j.")
    return m


def contextual(word, sentences, layer=ctx.DEFAULT_LAYER, model="minilm", mix=True, gamma=1.0, s_0=0.0, s_1=0.0,
               s_2=0.0):
    """One word in several sentences, through MiniLM (or our BERT) at the chosen layer, or through our ELMo (a
    layer of its biLM, or with `mix` eq. 1's γ Σ_j softmax(s)_j h_j with s = (s_0, s_1, s_2)): its vectors and
    their similarity. mix, gamma and s_j are ELMo's only; their defaults are its card's (the plain average)."""
    notices: list[str] = []
    m = _elmo() if model == "elmo" else encoder(model)
    word = text_input(word, notices, 60).strip()
    if not word or not re.fullmatch(r"[^\W\d_][\w'-]*", word):
        raise gr.Error("Type one word (letters) to follow through the sentences, e.g. bank.")
    lines = [s.strip() for s in text_input(sentences, notices, 20_000).splitlines() if s.strip()]
    if len(lines) > MAX_CONTEXT_SENTENCES:
        notices.append(f"The first {MAX_CONTEXT_SENTENCES} sentences are used.")
        lines = lines[:MAX_CONTEXT_SENTENCES]
    mixing = model == "elmo" and bool(mix)
    layer = "mix" if mixing else as_int(layer, "Layer", 0, m.n_layer, notices)
    try:
        if model == "elmo":
            weights = [as_float(w, f"s_{j}", -S_RANGE, S_RANGE, notices) for j, w in enumerate((s_0, s_1, s_2))]
            gamma = as_float(gamma, "γ", *GAMMA_RANGE, notices)
            v = ctx.elmo_view(word, lines, layer, m, notices, weights, gamma)
            sweep = ctx.sense_sweep(word, m, tuple(weights), gamma)
        else:
            v = ctx.view(word, lines, layer, m, notices)
            sweep = ctx.sense_sweep(word, m)
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    v.data["senses"] = sweep
    kept, where = v.data["sentences"], "mix (eq. 1)" if mixing else f"layer {layer}"
    heat = fe.similarity_figure([f"{i + 1}. {s}" for i, s in enumerate(kept)], v.similarity,
                                f"{word!r} at {m.key} {where}: cosine between its vectors")
    scatter = fe.scatter_figure([str(i + 1) for i in range(len(kept))], v.coords, ["sentences"] * len(kept),
                                f"{word!r} in each sentence, {where} (PCA)", v.vectors)
    warn(notices)
    md = fe.contextual_md(v.data, v.similarity, v.in_word2vec)
    return md + ("\n\n" + senses_md(sweep, layer) if sweep else ""), scatter, heat, v.data


def senses_md(sweep: dict, shown) -> str:
    """Whether the encoder tells the word's senses apart, layer by layer, from ctx.sense_sweep's measurement (the
    labelled sentences, not the typed ones); the layer shown in bold, the verdict in words."""
    rows, word, model = sweep["layers"], sweep["word"], CONTEXT_NAMES.get(sweep["model"], sweep["model"])
    n, senses = rows[0]["sentences"], ", ".join(f"{v} {k}" for k, v in sweep["senses"].items())
    chance = sum(c * (c - 1) for c in sweep["senses"].values()) / (n - 1)  # a random nearest is of the same sense
    name = lambda j: f"**{j}**" if j == shown else str(j)  # noqa: E731
    gaps = " | ".join(f"{r['gap']:+.3f}" for r in rows)
    nearest = " | ".join(f"{r['nearest_same']}/{n}" for r in rows)
    table = "\n".join([f"| layer | {' | '.join(name(r['layer']) for r in rows)} |", f"|:--|{'--:|' * len(rows)}",
                        f"| same sense − across (mean cosine) | {gaps} |",
                        f"| nearest is of its own sense | {nearest} |"])
    best = ctx.best_layer(sweep)
    if best is not None:
        full = [str(r["layer"]) for r in rows if r["nearest_same"] == n]
        b = next(r for r in rows if r["layer"] == best)
        verdict = (f"At layer{'s' if len(full) > 1 else ''} {', '.join(full)} every occurrence's nearest is of its own "
                   f"sense; the gap is largest at layer {best}. Cosines stay high across senses there too "
                   f"({b['across']:.2f} on average, {b['within']:.2f} within one): the senses show in which "
                   "occurrences are nearest, not in low cosines.")
    else:
        top = max(rows, key=lambda r: (r["nearest_same"], r["gap"]))
        verdict = (f"**{model[0].upper() + model[1:]} does not separate them**: at no layer is every occurrence's "
                   f"nearest of its own sense (at best {top['nearest_same']} of {n}, layer {top['layer']}; a random "
                   f"nearest would be about {chance:.0f}), and there cosines within a sense ({top['within']:.2f}) are "
                   f"barely above those across ({top['across']:.2f}).")
    return (f"**Does {model} tell *{word}*'s senses apart?** Measured now on {n} labelled sentences ({senses}; the "
            f"default ones among them), at every layer:\n\n{table}\n\n{verdict}")


CONTEXT_MD = r"""**Contextual embeddings.** word2vec gives *bank* one vector. A Transformer gives each occurrence
its own, mixed with the sentence by attention: follow one word through MiniLM's layers (0: the input embedding
plus position; 6: the last layer), or our small BERT's, and compare its vectors across sentences. ELMo (our
biLM) does it with two LSTM language models, one reading forward and one backward. For *bank*, the text under
the sentences measures whether the model tells its two senses apart at each layer, on 16 sentences labelled by
sense; the layer shown first is the one where MiniLM does so best."""


ELMO_MD = r"""**ELMo** (Peters et al. 2018) reads words with a forward and a backward LSTM language model; the word's
layer $j$ is $h_{k,j} = [\overrightarrow{h}_{k,j}; \overleftarrow{h}_{k,j}]$, layer 0 (the token layer) is
$[x_k; x_k]$, the same in every sentence, and layers 1–2 are the biLSTM's. Eq. 1 mixes them:
$\mathrm{ELMo}_k = \gamma \sum_{j=0}^{L} \mathrm{softmax}(s)_j\, h_{k,j}$. The paper **learns $s$ and $\gamma$
for each downstream task**, with that task's model; there is no task here, so you set them: $s = 0$, $\gamma = 1$
(the card's defaults) is the plain average of the layers. $\gamma$ only scales the vector, so the cosines do not
move with it. Unticking the mix shows the layer chosen above. Words outside ELMo's vocabulary are read as [UNK]."""


def build() -> None:
    """Contextual: one word through an encoder's layers, in several sentences."""
    with gr.Tab("Contextual") as tab:
        gr.Markdown(CONTEXT_MD, latex_delimiters=LATEX)
        with gr.Row():
            word = gr.Textbox("bank", label="Word", scale=1)
            model = gr.Dropdown([(label, key) for key, label in encoders.CONTEXTUAL.items()
                                 if models.resolve(key if key == "minilm" else f"{key}-english")],
                                value="minilm", label="Encoder", scale=2)
            layer = gr.Slider(0, 6, value=ctx.DEFAULT_LAYER, step=1, label="Layer", scale=2)
        mix, gamma, weights, elmo_box = _elmo_controls()
        sentences = gr.Textbox("\n".join(ctx.CONTEXT_SENTENCES), lines=5, label="Sentences (one per line)")
        md = gr.Markdown()
        with gr.Row():
            plot = gr.Plot(label="The word's vectors")
            heat = gr.Plot(label="Similarity")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            data = gr.JSON(label="contextual")

    def model_changed(key, value):
        """The layer slider narrowed to the encoder's layers, its value first (a value above the new maximum
        would be refused by the slider when the view is computed next)."""
        top = encoders.contextual_layers(key) or encoders.contextual_layers("minilm")
        held = value if isinstance(value, (int, float)) and 0 <= value else top
        return gr.update(maximum=top, value=min(int(held), top)), gr.update(visible=key == "elmo")

    inputs, outputs = [word, sentences, layer, model, mix, gamma, *weights], [md, plot, heat, data]
    gr.on([tab.select, word.submit, layer.release, sentences.blur, mix.change, gamma.release,
           *[w.release for w in weights]], contextual, inputs=inputs, outputs=outputs,
          api_name="contextual", trigger_mode="always_last", show_progress="minimal")
    model.change(model_changed, inputs=[model, layer], outputs=[layer, elmo_box], api_visibility="private",
                 queue=False).then(contextual, inputs=inputs, outputs=outputs, api_name="contextual_new_encoder",
                                   api_visibility="private", show_progress="minimal")


def _elmo_controls():
    """ELMo's mix (eq. 1): the switch, γ and one weight s_j per layer, defaults from its card; shown for ELMo."""
    name = encoders.ELMO_CHECKPOINT
    mix = (models.card(name) if models.resolve(name) else {}).get("mix") or {}   # the card, not the weights
    s = mix.get("s") if len(mix.get("s") or []) == ELMO_WEIGHTS else (0.0,) * ELMO_WEIGHTS
    g = float(mix.get("gamma", 1.0))
    names = ["token layer", *(f"biLSTM {j}" for j in range(1, ELMO_WEIGHTS))]
    with gr.Column(visible=False) as box:
        gr.Markdown(ELMO_MD, latex_delimiters=LATEX)
        with gr.Row():
            mix = gr.Checkbox(True, label="Mix the layers (eq. 1)", scale=1)
            gamma = gr.Slider(GAMMA_RANGE[0], GAMMA_RANGE[1], value=g, step=0.1, label="γ", scale=1)
            weights = [gr.Slider(-S_RANGE, S_RANGE, value=w, step=0.1, label=f"s_{j} ({name})", scale=1)
                       for j, (w, name) in enumerate(zip(s, names))]
    return mix, gamma, weights, box
