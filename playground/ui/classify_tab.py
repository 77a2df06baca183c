"""The Fine-tuning tab's Classify sub-tab: sentence classification from scratch and by transfer learning.

A typed sentence goes to every shipped classifier (python -m playground.train classifier; the data: which of five
corpora a sentence comes from, assets/classify); the view shows each class's probability per method, per-token
attributions of one transfer classifier beside the attention from [CLS], and the LSTM's prediction after each
word.
The data comes from analysis/classify.py, the figures from figures/classify.py."""

from __future__ import annotations

import gradio as gr

from playground.analysis import classify as analysis
from playground.figures import classify as fc
from playground.ui.common import as_int, json_file, text_input, things_to_try, warn

MAX_CHARS = 2_000     # characters read (a longer text is cut, with a notice; the models read 64 tokens at most)
DEFAULT = "Thou art more lovely and more temperate than the summer's day."
EXAMPLES = [("Austen?", ["She was not handsome, but her manners were pleasing and her fortune was large."]),
            ("the Bible?", ["And the Lord said unto his people, Go forth and multiply."]),
            ("the Jargon File?", ["The hacker rebooted the server after a kernel panic."]),
            ("WordNet?", ["a small domesticated carnivorous mammal with soft fur"])]

INTRO_MD = """**Sentence classification and transfer learning.** The task: *which of five corpora does a sentence
come from* (Austen, Shakespeare, the World English Bible, the Jargon File, WordNet's glosses): no sentiment data
with a licence that lets it ship could be found offline, so the labels are facts, not anyone's judgement. From
scratch, an **LSTM read many-to-one** (its last hidden state h_T → a linear layer) and a **bidirectional** one;
by **transfer**, a pre-trained encoder, **frozen** with a linear probe on [CLS] or on the mean of its last layer,
adapted with **LoRA**, or with its **top block fine-tuned** in full: all-MiniLM-L6-v2, trained elsewhere on about a
billion sentence pairs (its model card), and our own small BERT, pre-trained by this project on four of the five
corpora (the Models tab). Each
model's held-out accuracy (1,000 sentences no model trained on) is in the legend; the bars' colour says how a model
learnt, hatching marks our BERT."""

ATTR_MD = """**Why this label?** Gradient × input and integrated gradients (Sundararajan et al. 2017) attribute the
predicted class's logit to each token: red for, blue against. Integrated gradients start from a stated baseline
(every token embedding 0) and add up to f(x) − f(baseline) (the JSON reports both). The grey row is the last layer's
attention *from* [CLS]: where [CLS] reads from, which is not an explanation of the label."""


def classify(text=DEFAULT, model="", ig_steps=analysis.IG_STEPS):
    """Every shipped classifier on the text; the attributions of `model` (a transfer classifier's id; "" for
    MiniLM's LoRA one), integrated gradients with `ig_steps` points (0: gradient × input alone)."""
    notices: list[str] = []
    ig_steps = as_int(ig_steps, "Integrated-gradient steps", 0, 64, notices)
    text = text_input(text, notices, max_chars=MAX_CHARS).strip()
    if not text:
        raise gr.Error(f"Type a sentence to classify, e.g. '{DEFAULT}'")
    if model is not None and not isinstance(model, str):
        raise gr.Error("Model should be a classifier's id, e.g. classify-lora.")
    try:
        data = analysis.classify(text, model or None, ig_steps)
    except (LookupError, ValueError) as err:
        raise gr.Error(str(err)) from None
    warn(notices + data["notices"])
    steps = fc.steps_figure(data)
    return (fc.probabilities_figure(data), fc.attributions_figure(data) if data["attribution"] else None,
            steps, fc.classify_md(data), json_file(data, "classify"), data)


CURVE_MD = """**Transfer learning saves labelled data.** Held-out accuracy (the same 1,000 sentences for every point)
against the number of labelled training examples, measured by `python -m playground.tools.classify_curve`. A frozen
MiniLM with a linear probe needs a handful of examples per class; networks from scratch must learn words and
sentences from the labels alone. *Re-run a probe live* trains one point of a probe's curve now, in front of you;
*Train it live* does the same for any other method on 16 or 64 examples (seconds to a minute)."""


def _curve_views(live: dict | None):
    curve = analysis.curve()
    if curve is None:
        return None, "The curve is not measured yet: `python -m playground.tools.classify_curve`."
    return fc.curve_figure(curve, live), fc.curve_md(curve, live)


def classify_probe(n=64, pooling="mean", seed=0, progress=gr.Progress()):
    """A linear probe on MiniLM's features trained now on n labelled examples and measured on the held-out split."""
    notices: list[str] = []
    n = as_int(n, "Labelled examples", 1, 10_000, notices)
    if n not in analysis.LIVE_SIZES:
        raise gr.Error(f"Labelled examples should be one of {', '.join(map(str, analysis.LIVE_SIZES))}.")
    if pooling not in ("cls", "mean"):
        raise gr.Error("Pooling should be cls ([CLS]) or mean.")
    seed = as_int(seed, "Seed", 0, 2**31 - 1, notices)
    warn(notices)
    live = analysis.probe_live(n, pooling, seed, lambda done, total, what: progress(done / total, desc=what))
    figure, md = _curve_views(live)
    return figure, md, json_file(live, "classify-probe"), live


def classify_train(method="lstm", n=16, seed=0, progress=gr.Progress()):
    """One small-label point of any other method's curve (n = 16 or 64 labelled examples), trained now from its start
    and measured on the held-out split."""
    notices: list[str] = []
    if method not in analysis.live_methods():
        raise gr.Error(f"Method should be one of {', '.join(analysis.live_methods())} (MiniLM's probes: the probe "
                       "button above).")
    n = as_int(n, "Labelled examples", 1, 10_000, notices)
    if n not in analysis.TRAIN_LIVE:
        raise gr.Error(f"Labelled examples should be one of {', '.join(map(str, analysis.TRAIN_LIVE))} for a live "
                       "run that trains a model (the larger points take minutes: the curve has them).")
    seed = as_int(seed, "Seed", 0, 2**31 - 1, notices)
    warn(notices)
    live = analysis.train_live(method, n, seed, lambda done, total, what: progress(done / total, desc=what))
    figure, md = _curve_views(live)
    return figure, md, json_file(live, "classify-train"), live


def _curve_panel() -> None:
    with gr.Accordion("Accuracy against labelled examples: from scratch and by transfer", open=True):
        gr.Markdown(CURVE_MD)
        figure, md = _curve_views(None)
        plot = gr.Plot(figure, label="Held-out accuracy against labelled examples", elem_id="classify-curve")
        with gr.Row():
            n = gr.Dropdown(list(analysis.LIVE_SIZES), value=64, label="Labelled examples")
            pooling = gr.Radio([("[CLS]", "cls"), ("mean", "mean")], value="mean", label="Probe on")
            seed = gr.Number(0, label="Seed", precision=0, minimum=0)
            run = gr.Button("Re-run a probe live", variant="primary", scale=0)
        with gr.Row():
            method = gr.Dropdown([(fc.method_name(m), m) for m in analysis.live_methods()], value="lstm",
                                 label="Or another method", elem_id="classify-train-method")
            few = gr.Dropdown(list(analysis.TRAIN_LIVE), value=16, label="Labelled examples (few)")
            train_seed = gr.Number(0, label="Seed", precision=0, minimum=0)
            train = gr.Button("Train it live", scale=0, elem_id="classify-train")
        described = gr.Markdown(md)
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            file = gr.DownloadButton("Download JSON", size="sm")
            data = gr.JSON(label="classify_probe")
    run.click(classify_probe, inputs=[n, pooling, seed], outputs=[plot, described, file, data],
              api_name="classify_probe", show_progress="full")
    train.click(classify_train, inputs=[method, few, train_seed], outputs=[plot, described, file, data],
                api_name="classify_train", show_progress="full")


def build(demo: gr.Blocks) -> None:
    """The Classify sub-tab: a sentence, a transfer classifier for the attributions, three figures and their text."""
    gr.Markdown(INTRO_MD)
    choices = [(analysis.NAMES[i[len(analysis.PREFIX):]], i) for i in analysis.attributable()]
    with gr.Row():
        text = gr.Textbox(DEFAULT, label="Sentence", lines=2, scale=3, elem_id="classify-text")
        model = gr.Dropdown(choices, value=analysis.default_attributed(), scale=2,
                            label="Attributions of (a transfer classifier)")
        ig_steps = gr.Slider(0, 64, value=analysis.IG_STEPS, step=1, scale=1,
                             label="Integrated gradients: steps (0 = gradient × input only)")
        run = gr.Button("Classify", variant="primary", scale=0, elem_id="classify-run")
    things_to_try(EXAMPLES, [text])
    probs = gr.Plot(label="Probability of each class, per method", elem_id="classify-probs")
    gr.Markdown(ATTR_MD)
    attributions = gr.Plot(label="Per-token attributions", elem_id="classify-attributions")
    steps = gr.Plot(label="The LSTM after each word", elem_id="classify-steps")
    with gr.Accordion("Text alternative: the numbers behind the figures", open=False):
        described = gr.Markdown()
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        file = gr.DownloadButton("Download JSON", size="sm")
        data = gr.JSON(label="classify")
    # the page opens on the example sentence's answer (painted at start: ui/cache.prewarm), as every other view does
    gr.on([demo.load, run.click, text.submit], classify, inputs=[text, model, ig_steps],
          outputs=[probs, attributions, steps, described, file, data], api_name="classify")
    _curve_panel()
