"""The Masked-LM fill-in tab: type [MASK] (or click a word) and see what a BERT guesses, with the
probabilities; and "How BERT was trained": the 15% / 80-10-10 masking of a sentence, the input
representation of a sentence pair with the NSP prediction, and the models' cards.

Models: the registry's masked LMs (analysis/models.py): MiniLM adapted to masked-LM with LoRA (`minilm-mlm`, the
default) and our small BERT pre-trained from scratch (`bert-english`), each listed when its checkpoint is whole and
loaded on first use.
"""

from __future__ import annotations

import gradio as gr
import numpy as np

from playground import checkpoints
from playground.analysis import focus, models
from playground.figures import fill_mask as fm
from playground.analysis import fill_mask as core
from playground.ui.common import FIGURE, FOLLOW, LATEX, Shared, as_int, json_file, text_input, things_to_try, warn

DESCRIPTIONS = {"minilm-mlm": "pretrained MiniLM + LoRA", "bert-english": "small BERT from scratch"}
DEFAULT_TEXT = "The cat sat on the [MASK]."
TOP_K_MAX = 50         # the slider's range; the API is held to it too
MAX_MASKS = 32         # predictions (and bar charts) for at most this many masks
PAIR_MAX = 64          # the input representation shows at most 64 positions
MASKING_MAX = 64       # the masking demo reads at most 64 tokens
MAX_SEED = 2**31 - 1


MASKED = models.MASKED  # the registry's families of masked LMs (MiniLM itself, a `bert`, has no MLM head)


def names() -> list[str]:
    """The masked LMs of the registry, the MiniLM-based first. Listed from their folders and cards; loading
    minilm-mlm rebuilds MiniLM around its adapters, a few seconds the app's start cannot spare, so each is loaded
    on first use (then kept, read-only)."""
    return [name for family in MASKED for name in models.ids(family) if name != models.MINILM]


LISTED = names()
DEFAULT_MODEL = LISTED[0] if LISTED else None
NSP_MODEL = "bert-english" if "bert-english" in LISTED else DEFAULT_MODEL
FAST: dict[str, bool] = {}   # per model: whether its MLM head may run at the masks only (checked on first use)


def _label(name: str) -> str:
    top5 = _card_numbers(name)["top5"]  # the figure the cards table shows
    extra = f", top-5 {top5:.0%}" if isinstance(top5, (int, float)) else ""
    return f"{name} ({DESCRIPTIONS.get(name, 'masked-LM')}{extra})"


def _model(name) -> models.Model:
    """A masked LM of the registry by its id, loaded on its first use under the registry's lock (a second request
    meanwhile waits for the same copy), the masked-LM contract checked once (analysis/fill_mask.check_model)."""
    key = models.resolve(name)  # a loaded model's at once; the folders are surveyed only for an unknown name
    if key is None or key == models.MINILM or models.family(key) not in MASKED:
        listed = names()
        if not listed:
            raise gr.Error("No masked-LM checkpoint is shipped yet: train one (docs/models.md, “Masked-LM fill-in”).")
        raise gr.Error(f"Unknown model {str(name)[:40]!r}; choose from {', '.join(listed)}.")
    try:
        m = models.get(key)
        if key not in FAST:  # two first requests at once may both check: the same answer
            core.check_model(m.model, m.tokenizer)
            FAST[key] = core.fast_path_agrees(m.model, m.tokenizer)
    except (FileNotFoundError, checkpoints.CheckpointError, core.FillMaskError) as err:
        raise gr.Error(f"The checkpoint {key} cannot be used: {str(err)[:400]}") from None
    return m


def warm_up() -> None:
    """Load every listed model now (the bench and scripts call this; the app loads on first use)."""
    for name in LISTED:
        _model(name)


# ---------------------------------------------------------------------------------------------
# Handlers


def fill_mask(text, model_name=DEFAULT_MODEL, top_k=5):
    """The top-k tokens for each [MASK], in the transformers fill-mask pipeline's format."""
    notices: list[str] = []
    ckpt = _model(model_name)
    k = as_int(top_k, "top_k", 1, TOP_K_MAX, notices)
    text = text_input(text, notices)
    try:
        pred = core.predict(ckpt.model, ckpt.tokenizer, text, k, max_masks=MAX_MASKS,
                            fast=FAST.get(ckpt.id))  # the MLM head at the masks only
    except core.FillMaskError as err:
        raise gr.Error(str(err)) from None
    notices += pred.notices
    data = core.pipeline_format(ckpt.tokenizer, pred)
    rows = data if len(pred.masks) > 1 else [data]
    masks = [{"title": f"[MASK] {i + 1}" if len(rows) > 1 else "[MASK]",
              "tokens": [r["token_str"] for r in row], "scores": [r["score"] for r in row]}
              for i, row in enumerate(rows)]
    warn(notices)
    return _filled(text, rows, notices), fm.predictions_figure(masks), json_file(data, "fill_mask"), data


def _filled(text: str, rows: list[list[dict]], notices: list[str]) -> str:
    """The text as typed, each predicted mask replaced by its best token (a "##" piece glued on)."""
    text, _ = core.normalise_masks(text)
    parts, last = [], 0
    for i, unit in enumerate(u for u in core.words(text) if u[2] == core.MASK):
        start, end, _ = unit
        before = text[last:start]
        if i < len(rows):
            best = rows[i][0]
            token = best["token_str"]
            if token.startswith("##"):
                before, token = before.rstrip(), token[2:]
            parts += [(before, None), (token, f"[MASK] {i + 1}: {best['token_str']} (p = {best['score']:.3f})")]
        else:
            parts += [(before, None), (core.MASK, "")]
        last = end
    parts.append((text[last:], None))
    return fm.filled_html(parts, notices)


def show_words(text):
    """The clickable words of the text."""
    text, _ = core.normalise_masks(text_input(text, []))
    return fm.words_html(core.words(text))


def click_word(text, evt: gr.SelectData):
    """A click on a word: that word becomes [MASK]."""
    text, _ = core.normalise_masks(text_input(text, []))
    index = evt.index if isinstance(evt.index, int) else -1
    return core.mask_word(text, index)


def masking(text, model_name=DEFAULT_MODEL, seed=0, whole_word=False):
    """BERT's masking of one sentence with a seed, token by token; and the rates over many draws."""
    notices: list[str] = []
    ckpt = _model(model_name)
    seed = as_int(seed, "Seed", 0, MAX_SEED, notices)
    text, _ = core.normalise_masks(text_input(text, notices))
    if not text.strip():
        raise gr.Error("Type a sentence to see how BERT's pre-training masks it.")
    try:
        demo = core.masking_demo(ckpt.tokenizer, text, seed, bool(whole_word), max_tokens=MASKING_MAX)
    except core.FillMaskError as err:
        raise gr.Error(str(err)) from None
    if demo["n_cut"]:
        notices.append(f"The masking view reads the first {MASKING_MAX - 2} tokens; {demo['n_cut']:,} were left out.")
    demo["notices"] = notices
    warn(notices)
    return fm.masking_html(demo), demo


def input_representation(text_a, text_b="", model_name=NSP_MODEL):
    """[CLS] A [SEP] B [SEP]: ids, segments, positions, the three embeddings and their sum; the NSP guess."""
    notices: list[str] = []
    ckpt = _model(model_name)
    text_a = text_input(text_a, notices)
    text_b = text_input(text_b, notices) if text_b is not None else ""
    if not text_a.strip():
        raise gr.Error("Type sentence A (and B, to make a pair).")
    try:
        rep = core.input_representation(ckpt.model, ckpt.tokenizer, text_a, text_b.strip() or None,
                                        max_tokens=min(PAIR_MAX, core.n_positions(ckpt.model)))
    except core.FillMaskError as err:
        raise gr.Error(str(err)) from None
    if rep["n_cut"]:
        notices.append(f"This view shows at most {PAIR_MAX} positions: {rep['n_cut']} tokens were cut "
                       "(from the end of the longer sentence, as BERT truncates pairs).")
    parts = {"E_tok[x_t]: token": rep["token_embedding"], "E_seg[s_t]: segment": rep["segment_embedding"],
             "E_pos[t]: position": rep["position_embedding"], "sum (then LayerNorm → h_0)": rep["sum"]}
    fig = fm.embeddings_figure(rep["tokens"], parts)
    nsp = rep["nsp"]
    if nsp is None:
        summary = (f"**{ckpt.name} has no next-sentence-prediction head** (its pre-training had none), so there is no "
                   "IsNext / NotNext guess; choose bert-english to see one.")
    elif not rep["pair"]:
        summary = "Type sentence B to ask the NSP head whether B follows A."
    else:
        verdict = "IsNext" if nsp["IsNext"] >= nsp["NotNext"] else "NotNext"
        summary = (f"**NSP ({ckpt.name}):** p(IsNext) = {nsp['IsNext']:.3f}, p(NotNext) = {nsp['NotNext']:.3f}: "
                   f"the head reads B as **{verdict}**.")
    label = {k: v for k, v in nsp.items()} if nsp is not None and rep["pair"] else None
    data = {"model": ckpt.name, "tokens": rep["tokens"], "ids": rep["ids"], "segments": rep["segments"],
            "positions": rep["positions"], "nsp": nsp if rep["pair"] else None, "has_nsp_head": nsp is not None,
            "notices": notices,
            "embeddings": {key: np.round(rep[key], 4).tolist()
                           for key in ("token_embedding", "segment_embedding", "position_embedding", "sum")}}
    warn(notices)
    return (fm.pair_table_html(rep["tokens"], rep["ids"], rep["segments"]), fig, label, summary,
            json_file(data, "input_representation"), data)


def _card_numbers(name: str) -> dict:
    """What the tab shows of a model's card (read without loading it), each figure by its one name
    (checkpoints.CARD): the held-out split's accuracies, the parameters, the steps and the time."""
    card = models.card(name)
    held_out = card.get("held_out", {})
    return {"name": name, "top1": held_out.get("top1"), "top5": held_out.get("top5"),
            "nsp": held_out.get("nsp_accuracy"), "trainable": card.get("trainable_params"),
            "total": card.get("n_params"), "steps": card.get("steps"), "seconds": card.get("wall_time_s"),
            "baseline": card.get("frequency_baseline"), "command": card.get("command")}


def model_cards():
    """The shipped masked-LMs' cards: held-out top-1 / top-5 (and NSP) accuracy, steps and time, parameters."""
    models = [_card_numbers(name) for name in names()]
    if not models:
        return None, "No masked-LM checkpoint is shipped yet.", {"models": []}
    lines = ["| model | held-out top-1 | top-5 | NSP | trainable / total parameters | steps | training time |",
             "|---|---|---|---|---|---|---|"]
    pct = lambda v: "–" if v is None else f"{v:.1%}"  # noqa: E731
    for m in models:
        params = "–"
        if m["total"]:
            trainable = m["trainable"] or m["total"]
            params = f"{trainable / 1e6:.2f}M / {m['total'] / 1e6:.2f}M ({trainable / m['total']:.1%})"
        time = "–" if m["seconds"] is None else f"{m['seconds'] / 60:.1f} min"
        steps = "–" if m["steps"] is None else f"{int(m['steps']):,}"
        lines.append(f"| {m['name']} | {pct(m['top1'])} | {pct(m['top5'])} | {pct(m['nsp'])} | {params} | {steps} | "
                     f"{time} |")
    for m in models:
        base = m["baseline"]
        if isinstance(base, dict) and {"top1", "top5"} <= set(base):
            lines.append(f"\n{m['name']}: always guessing the most frequent tokens would give top-1 "
                         f"{base['top1']:.1%}, "
                         f"top-5 {base['top5']:.1%} on the same held-out text.")
    return fm.cards_figure(models), "\n".join(lines), {"models": models}


# ---------------------------------------------------------------------------------------------
# Layout and events

INTRO_MD = r"""**Masked language modelling** (Devlin et al. 2019): hide a token and let the model guess it from *both*
sides. At each `[MASK]` the model gives $p(x_i \mid \text{the rest}) = \mathrm{softmax}(W h_i + b)$ over the whole
vocabulary; the bars are its top-$k$. Write `[MASK]` (any case, or `<mask>`) where a word is missing, glued to
punctuation or not, or click a word below to mask it. With several masks each is guessed **from the same input**,
where the other masks are still hidden: the bars are per-position guesses, not a joint filling-in (the `transformers`
fill-mask pipeline does the same; the JSON is in its format: `score`, `token`, `token_str`, `sequence`)."""

MASKING_MD = r"""**The pre-training task.** BERT selects 15% of the tokens ([CLS] and [SEP] never); of those, 80% become
`[MASK]`, 10% a random token and 10% stay unchanged, and the loss asks for the original token at every selected
position. Why not always `[MASK]`? Fine-tuning never shows `[MASK]`, and since a selected token may be left as it is,
the model has to keep a good representation of *every* token. **Whole-word masking** selects words, so every piece
of a selected word (`un ##believ ##able`) is hidden together. Change the seed to draw again."""

PAIR_MD = r"""**Input representation** (Devlin et al. 2019, Fig. 2): `[CLS] A [SEP] B [SEP]`, and each position's input
is the sum $E_\text{tok}[x_t] + E_\text{seg}[s_t] + E_\text{pos}[t]$ of three learned embeddings (then a LayerNorm): the
token, the segment (A = 0, B = 1) and the position. The heatmaps are those vectors from the chosen model's own tables.
**Next-sentence prediction**: a classifier on the final `[CLS]` state says whether B really followed A (IsNext) or was
drawn from elsewhere (NotNext); only a model pre-trained with NSP has that head."""

# The pair the panel starts with: one the shipped bert-english reads as IsNext (p = 0.82), from the kind of text it
# was pre-trained on; the BERT paper's own example ("The man went to the store." / "He bought a gallon of milk.")
# it reads as NotNext (p(IsNext) = 0.02), as NSP_NOTE says beside it.
PAIR = ("Mr. Darcy came to the house.", "He asked to see Miss Bennet.")


def nsp_note() -> str:
    """Why the default pair is Austen's: what the shipped NSP head was trained on, and its held-out accuracy."""
    if "bert-english" not in LISTED:
        return ""
    nsp = _card_numbers("bert-english")["nsp"]
    figure = f"right on {nsp:.1%} of the held-out pairs from those texts (its card), but it" if nsp else "It"
    return (f"*bert-english* is a 1.9M-parameter BERT pre-trained on Austen, the World English Bible, WordNet's "
            f"glosses and the Jargon File. Its NSP head is {figure} reads short modern sentences from elsewhere as "
            "NotNext: try the BERT paper's own pair, *The man went to the store.* / *He bought a gallon of milk.*")


def expectation_note() -> str:
    """What the shipped masked-LMs can be expected to get right, with their held-out figures (their cards)."""
    parts = []
    for name in LISTED:
        n = _card_numbers(name)
        if isinstance(n["top1"], (int, float)) and isinstance(n["top5"], (int, float)):
            parts.append(f"*{name}* {n['top1']:.0%} top-1, {n['top5']:.0%} top-5")
    if not parts:
        return ""
    outside = []
    for name in LISTED:
        measured = [f"{o['top1']:.0%} top-1, {o['top5']:.0%} top-5 on the last {o.get('fraction', 0):.0%} of "
                    f"{o.get('title') or o.get('text', 'another text')}"
                    for o in checkpoints.outside(models.card(name))
                    if isinstance(o, dict) and all(isinstance(o.get(k), (int, float)) for k in ("top1", "top5"))]
        if measured:
            outside.append(f"*{name}* {' and '.join(measured)}")
    beyond = f" Outside them, on text they never read: {'; '.join(outside)}." if outside else ""
    return ("**What to expect.** On held-out text from their own corpora (Austen's novels, the World English Bible, "
            f"WordNet's glosses, the Jargon File): {'; '.join(parts)} (their cards, every masked token of the split)."
            f"{beyond} Novels of two hundred years ago, a Bible, a dictionary and hacker slang are all they read: "
            f"everyday words come easily, facts of today's world less so.{_capitals_note()}")


def _capitals_note() -> str:
    """Where a model puts *capital* in '{Capital} is the [MASK] of {Country}.' for 14 countries (its card's
    `capitals`, measured by `python -m playground.tools.held_out NAME --capitals`)."""
    found = [(name, models.card(name).get("capitals")) for name in LISTED]
    found = [(name, c) for name, c in found if isinstance(c, dict) and isinstance(c.get("first"), int)
             and isinstance(c.get("top5"), int) and c.get("of")]
    if not found:
        return " Try *Paris is the [MASK] of France.* and see where *capital* lands."
    said = "; ".join(f"*{name}* puts *capital* first for {c['first']} of {c['of']} and among its first five for "
                     f"{c['top5']}" for name, c in found)
    whose = "its card" if len(found) == 1 else "their cards"
    return (f" Asked *{{Capital}} is the [MASK] of {{Country}}.* for {found[0][1]['of']} countries, {said} "
            f"({whose}): try *Paris is the [MASK] of France.*")


TRY = [("a place", ["Paris is the [MASK] of France."]), ("a drink", ["She poured a cup of [MASK] and sat down."]),
       ("two masks", ["The [MASK] barked at the [MASK] all night."]),
       ("a pronoun", ["The doctor said that [MASK] would call back tomorrow."]),
       ("no mask at all", ["The cat sat on the mat."])]


def _how_bert_was_trained(choices: list[tuple[str, str]]) -> dict:
    """The accordion "How BERT was trained": masking, the input representation and NSP, the models' cards.
    Returns its components by name."""
    with gr.Accordion("How BERT was trained", open=False):
        with gr.Tabs():
            with gr.Tab("Masking: 15% and 80 / 10 / 10") as masking_tab:
                gr.Markdown(MASKING_MD)
                with gr.Row():
                    m_text = gr.Textbox("The quick brown fox jumps over the unbelievably lazy dog near the riverbank.",
                                        label="Sentence", scale=3)
                    m_seed = gr.Number(0, label="Seed", precision=0, minimum=0, maximum=MAX_SEED, scale=1)
                    m_whole = gr.Checkbox(False, label="Whole-word masking", scale=1)
                    m_run = gr.Button("Mask again (next seed)", scale=0)
                m_view = gr.HTML(elem_id="fm-masking", elem_classes=FIGURE)
                with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                    m_json = gr.JSON(label="mlm_masking")
            with gr.Tab("Input representation and NSP") as pair_tab:
                gr.Markdown(f"{PAIR_MD}\n\n{nsp_note()}", latex_delimiters=LATEX)
                with gr.Row():
                    p_a = gr.Textbox(PAIR[0], label="Sentence A", scale=2)
                    p_b = gr.Textbox(PAIR[1], label="Sentence B (empty: one sentence)", scale=2)
                    p_model = gr.Dropdown(choices, value=NSP_MODEL, label="Model", scale=1)
                p_table = gr.HTML(elem_id="fm-pair-table", elem_classes=FIGURE)
                with gr.Row():
                    p_label = gr.Label(label="Next-sentence prediction", num_top_classes=2, scale=1)
                    p_summary = gr.Markdown(elem_id="fm-nsp")
                p_plot = gr.Plot(label="Embeddings", elem_id="fm-embeddings")
                with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                    p_file = gr.DownloadButton("Download JSON", size="sm")
                    p_json = gr.JSON(label="input_representation")
            with gr.Tab("The models") as cards_tab:
                c_table = gr.Markdown()
                c_plot = gr.Plot(label="From the models' cards")
                with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                    c_json = gr.JSON(label="mlm_cards")
    return dict(masking_tab=masking_tab, m_text=m_text, m_seed=m_seed, m_whole=m_whole, m_run=m_run, m_view=m_view,
                m_json=m_json, pair_tab=pair_tab, p_a=p_a, p_b=p_b, p_model=p_model, p_table=p_table,
                p_label=p_label, p_summary=p_summary, p_plot=p_plot, p_file=p_file, p_json=p_json,
                cards_tab=cards_tab, c_table=c_table, c_plot=c_plot, c_json=c_json)


def _how_bert_was_trained_events(c: dict, model: gr.Dropdown) -> None:
    """The accordion's events; masking uses the tokenizer of the tab's chosen `model`."""
    m_inputs, m_outputs = [c["m_text"], model, c["m_seed"], c["m_whole"]], [c["m_view"], c["m_json"]]
    gr.on([c["masking_tab"].select, c["m_seed"].submit, c["m_whole"].change, c["m_text"].submit], masking,
          inputs=m_inputs, outputs=m_outputs, api_name="mlm_masking", trigger_mode="always_last",
          show_progress="minimal")
    c["m_run"].click(lambda s: min(int(s or 0) + 1, MAX_SEED), inputs=c["m_seed"], outputs=c["m_seed"],
                     api_visibility="private", queue=False).then(
        masking, inputs=m_inputs, outputs=m_outputs, api_visibility="private", show_progress="minimal")
    gr.on([c["pair_tab"].select, c["p_a"].submit, c["p_b"].submit, c["p_model"].change], input_representation,
          inputs=[c["p_a"], c["p_b"], c["p_model"]],
          outputs=[c["p_table"], c["p_plot"], c["p_label"], c["p_summary"], c["p_file"], c["p_json"]],
          api_name="input_representation", trigger_mode="always_last", show_progress="minimal")
    gr.on([c["cards_tab"].select], model_cards, outputs=[c["c_plot"], c["c_table"], c["c_json"]],
          api_name="mlm_cards", show_progress="minimal")

def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events; `sentence` is the text shared by every tab."""
    sentence = shared.text  # the committed sentence (see Shared)
    choices = [(_label(n), n) for n in names()]
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    if not names():
        gr.Markdown("**No masked-LM checkpoint is shipped yet** (models/minilm-mlm, models/bert-english): "
                    "see docs/models.md, “Masked-LM fill-in”, to train one.")
    with gr.Row():
        with gr.Column(scale=3):
            text = gr.Textbox(DEFAULT_TEXT, label="Text with [MASK]s (Enter to predict)", lines=1, max_lines=8,
                              elem_id="fm-text")
            with gr.Row():
                run = gr.Button("Predict", variant="primary", elem_id="fm-run", scale=0)
                follow = gr.Checkbox(True, label="Follow the sentence above: the word selected there becomes [MASK]",
                                     elem_id="fm-follow")
        with gr.Column(scale=2):
            model = gr.Dropdown(choices, value=DEFAULT_MODEL, label="Model")
            top_k = gr.Slider(1, TOP_K_MAX, value=5, step=1, label="top_k")
    tries = things_to_try(TRY, [text])
    gr.Markdown(expectation_note(), elem_id="fm-expect")
    gr.Markdown("**Click a word to mask it:**")
    words = gr.HTML(fm.words_html(core.words(DEFAULT_TEXT)), elem_id="fm-words", js_on_load=fm.WORD_CLICK_JS)
    filled = gr.HTML(elem_id="fm-filled", elem_classes=FIGURE)
    plot = gr.Plot(label="Top-k per mask", elem_id="fm-plot")
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        fm_file = gr.DownloadButton("Download JSON", size="sm")
        fm_json = gr.JSON(label="fill_mask")

    panels = _how_bert_was_trained(choices)

    shared.remember("fm", text=text, model=model, top_k=top_k, follow=follow)
    inputs = [text, model, top_k]
    outputs = [filled, plot, fm_file, fm_json]
    on_load = [demo.load] if names() else []  # nothing to predict with before a checkpoint is shipped
    gr.on(on_load + [shared.changed("restored"), run.click, text.submit, model.change, top_k.release], fill_mask,
          inputs=inputs, outputs=outputs, api_name="fill_mask", trigger_mode="always_last",
          show_progress="minimal")
    text.change(show_words, inputs=text, outputs=words, api_visibility="private", queue=False, show_progress="hidden")
    words.select(click_word, inputs=text, outputs=text, api_visibility="private", queue=False).then(
        fill_mask, inputs=inputs, outputs=outputs, api_visibility="private", show_progress="minimal")
    for click in tries:
        click.then(fill_mask, inputs=inputs, outputs=outputs, api_visibility="private", show_progress="minimal")

    def follow_sentence(sentence_, focus_, on):
        """With the switch on and a word selected: the sentence with that word masked."""
        span = focus.parse(focus_, sentence_ or "")
        return focus.masked(sentence_, span) if on and span else gr.skip()

    gr.on([shared.changed("focus"), shared.changed("text"), follow.change], follow_sentence,
          inputs=[sentence, shared.focus, follow], outputs=text, api_visibility="private", queue=False,
          show_progress="hidden", trigger_mode=FOLLOW).then(fill_mask, inputs=inputs, outputs=outputs,
                                                            api_visibility="private",
                                       show_progress="minimal")

    _how_bert_was_trained_events(panels, model)
