"""The Causal lab tab: from looking at a model to experimenting on it.

1. Patch: a clean prompt, a corrupted one, two answers; the grid of layers × positions showing how much of the
   clean answer each activation brings back into the corrupted run (exact), the first-order estimate of the same
   from one backward pass (attribution) beside it, their agreement, and the sanity checks.
2. Ablate: knock out a head, a layer's attention or an MLP (zero, mean, resample) and see the prediction before and
   after; "which heads matter here?" ranks every head.
3. Steer: a direction from contrast prompts added to the residual stream; the text with and without, same seed.

Every view computes live on the model chosen (analysis/interventions.py, patching.py, steering.py); a figure comes
with its text alternative from the same data. The events run only when asked: a button, or a link (or the
lecturer's view followed) that sets a view's controls to other than their defaults. Nothing here is computed when
the page opens as it is.
"""

from __future__ import annotations

import inspect

import gradio as gr

from playground.analysis import models, patching, steering
from playground.analysis import interventions as iv
from playground.figures import causal as fc
from playground.ui.common import (LATEX, Shared, as_int, checked, model_ids, refuse_missing_smollm2, text_input,
                                  warn)

ALL = iv.offered()                                    # every model the lab runs on (tests/test_interventions.py
CAUSAL = iv.offered(masked=False)                     # checks each against transformers): our GPT, SmolLM2 when
MASKED = [name for name in ALL if name not in CAUSAL]  # installed; the masked LMs with an MLM head
DEMOS = {name: demo for name, demo in patching.DEMOS.items() if demo[0] in ALL}
# the view opens on our GPT's first pair (instant); SmolLM2's pairs are one click away in the demo list
FIRST_DEMO = next((name for name, d in DEMOS.items() if d[0] == "gpt-shakespeare"), next(iter(DEMOS), None))
FIRST = DEMOS.get(FIRST_DEMO, ("gpt-shakespeare", "", "", "", ""))
GPT_DEMO = FIRST
MAX_CHARS = 500
ALIASED = {"allow_custom_value": True}  # a model dropdown also takes an alias (`gpt`, `smollm2`): _model checks it


def _model(name, allowed: list[str], what: str):
    refuse_missing_smollm2(name)
    key = models.resolve(name)
    if key not in allowed:
        raise gr.Error(f"Unknown {what} {str(name)[:40]!r}; choose from {', '.join(allowed)}.")
    return models.get(key)


def _texts(notices: list[str], *texts) -> list[str]:
    return [text_input(t, notices, MAX_CHARS) for t in texts]


def _run(fn, *args, **kwargs) -> dict:
    """The analysis call; its refusal (InterventionError) as a message for the user, never a traceback."""
    try:
        return fn(*args, **kwargs)
    except iv.InterventionError as err:
        raise gr.Error(str(err)) from None


def patch(model_name=FIRST[0], clean=FIRST[1], corrupted=FIRST[2], answer=FIRST[3], other=FIRST[4],
          site="resid", attribution=True, sanity=True, progress=gr.Progress()):
    """The patching grid (exact and attribution), its text alternative, and the data."""
    notices: list[str] = []
    clean, corrupted, answer, other = _texts(notices, clean, corrupted, answer, other)
    m = _model(model_name, ALL, "model")
    data = _run(patching.patch, m, clean, corrupted, answer, other, site, bool(attribution), bool(sanity),
                progress=lambda fraction, text: progress(fraction, desc=text))
    warn(notices + data["notices"])
    return fc.patch_figure(data), fc.patch_markdown(data), data


def ablate(model_name=GPT_DEMO[0], text=GPT_DEMO[1], target="head", layer=0, head=0, how="zero", reference="",
           sanity=True):
    """One head, a layer's attention or an MLP knocked out: the prediction before and after, and the data."""
    notices: list[str] = []
    text, reference = _texts(notices, text, reference)
    m = _model(model_name, ALL, "model")
    data = _run(iv.ablate, m, text, target, layer, head, how, reference, bool(sanity))
    warn(notices + data["notices"])
    return fc.ablate_figure(data), fc.ablate_markdown(data), data


def sweep(model_name=GPT_DEMO[0], text=GPT_DEMO[1], how="zero", reference="", sanity=True, progress=gr.Progress()):
    """Every head knocked out in turn, ranked by how much it moves the prediction."""
    notices: list[str] = []
    text, reference = _texts(notices, text, reference)
    m = _model(model_name, ALL, "model")
    data = _run(iv.sweep, m, text, how, reference, bool(sanity),
                progress=lambda fraction, desc: progress(fraction, desc=desc))
    warn(notices + data["notices"])
    return fc.sweep_figure(data), fc.sweep_markdown(data), data


def steer(model_name=CAUSAL[0] if CAUSAL else "gpt-shakespeare", prompt="ROMEO:\nI", positive="Love\nI love thee",
          negative="Hate\nI hate thee", layer=2, strength=2.0, words="l, h", max_new_tokens=30, seed=0):
    """The prompt continued with and without the direction added; the logit shift on the chosen words."""
    notices: list[str] = []
    prompt, positive, negative, words = _texts(notices, prompt, positive, negative, words)
    m = _model(model_name, CAUSAL, "causal LM")
    n = as_int(max_new_tokens, "New tokens", 1, steering.MAX_NEW, notices)
    seed = as_int(seed, "Seed", 0, 2**31 - 1, notices)
    data = _run(steering.steer, m, prompt, positive, negative, layer, strength, words, n, seed)
    warn(notices + data["notices"])
    return fc.steer_figure(data), fc.steer_markdown(data), data


STEER_PRESETS = {name: p for name, p in steering.PRESETS.items() if p[0] in CAUSAL}


def steer_link(preset: str) -> str:
    """A link (relative: this page's address) that opens the Causal lab's steering on a shipped preset and runs it."""
    from urllib.parse import urlencode

    keys = ("model", "prompt", "positive", "negative", "layer", "strength", "words")
    values = {f"causal_steer.{key}": value for key, value in zip(keys, STEER_PRESETS[preset])}
    return "?" + urlencode({"tab": "causal-lab", **values})


def pick_steer_preset(name):
    """A shipped contrast into the steering inputs (in the page: no model runs)."""
    preset = STEER_PRESETS.get(name)
    if preset is None:
        raise gr.Error(f"Unknown preset {str(name)[:40]!r}; choose from {', '.join(STEER_PRESETS)}.")
    return preset


def pick_demo(name):
    """A shipped pair into the patch inputs (in the page: no model runs)."""
    demo = DEMOS.get(name)
    if demo is None:
        raise gr.Error(f"Unknown demo {str(name)[:40]!r}; choose from {', '.join(DEMOS)}.")
    return demo


# ---------------------------------------------------------------------------------------------
# Layout and events

INTRO_MD = r"""**From looking to experimenting.** Change one activation and watch what follows. **Patching**: run a
corrupted prompt, but take one activation $h_{\ell,t}$ from the clean prompt; the cell shows
$\frac{m(\text{patched}) - m(\text{corrupted})}{m(\text{clean}) - m(\text{corrupted})}$ for the metric
$m = \text{logit}(a) - \text{logit}(b)$: 0 nothing restored, 1 all of it. **Attribution patching** estimates every cell
at once from one backward pass, $\nabla_h m \cdot (h^{\text{clean}} - h^{\text{corrupted}})$: a first-order guess that
is good where the model is near-linear between the prompts, and wrong elsewhere. **Sanity checks** sit beside each
effect: the same experiment on the model with re-initialised weights (its "effects" mean nothing) and on two clean
prompts (nothing to restore). An effect is evidence that the activation *matters here*, for this pair; it is not a
description of what the model "knows"."""

ABLATE_MD = r"""**Ablate.** Knock out one head (its output before $W^O$), a layer's whole attention or its MLP: by
**zero**, by its **mean** over a reference text, or by **resampling** its values from the reference text. For a causal
LM the prediction is the next token after the text; for a masked LM, the token at its `[MASK]`. The sweep knocks out
every head in turn and ranks them by $\mathrm{KL}(p_{\text{before}} \,\|\, p_{\text{after}})$."""

STEER_MD = r"""**Steer** (activation addition): the mean residual stream entering a layer over the positive prompts,
minus the same over the negative ones (one prompt per line), times a strength, is added at every position while the
model writes. Both texts are sampled with the same seed: what differs is the direction's doing."""


def _same(a, b) -> bool:
    """A control's value as its default (a link's numbers come back as floats: 2 and 2.0 are the same)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


def redraw_when_linked(shared: Shared, handler, inputs: list, remembered: list, outputs: list) -> None:
    """Run `handler` when a link (or the lecturer's view, followed) has set the view: only when it left one of the
    view's `remembered` controls at other than its default, so that a link to another tab computes nothing here, and
    a link to this experiment draws it as its author saw it."""
    where = [inputs.index(component) for component in remembered]
    defaults = [component.value for component in remembered]
    takes_progress = "progress" in inspect.signature(handler).parameters
    handler = checked(handler, inputs)

    def redraw(*values, progress=gr.Progress()):
        if all(_same(values[i], default) for i, default in zip(where, defaults)):
            return [gr.skip()] * len(outputs)
        return handler(*values, progress=progress) if takes_progress else handler(*values)

    gr.on([shared.changed("restored")], redraw, inputs, outputs, api_visibility="private", show_progress="minimal",
          trigger_mode="always_last")


def _outputs(label: str, elem: str):
    with gr.Row():
        with gr.Column(scale=3):
            plot = gr.Plot(label=label, elem_id=f"causal-{elem}")
        with gr.Column(scale=2):
            text = gr.Markdown(elem_id=f"causal-{elem}-text", elem_classes=["figure-text"])
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        data = gr.JSON(label=elem)
    return [plot, text, data]


def _patch_view(shared: Shared) -> None:
    with gr.Row():
        demo = gr.Dropdown(list(DEMOS), value=FIRST_DEMO, label="Demo pair", scale=2)
        model = gr.Dropdown(ALL, value=FIRST[0], label="Model", scale=1, **ALIASED)
        site = gr.Radio([("residual stream", "resid"), ("attention output", "attn"), ("MLP output", "mlp")],
                        value="resid", label="Site", scale=2)
    with gr.Row():
        clean = gr.Textbox(FIRST[1], label="Clean prompt", scale=3)
        corrupted = gr.Textbox(FIRST[2], label="Corrupted prompt (as many tokens)", scale=3)
        answer = gr.Textbox(FIRST[3], label="Answer a (clean)", scale=1)
        other = gr.Textbox(FIRST[4], label="Answer b (corrupted)", scale=1)
    with gr.Row():
        attribution = gr.Checkbox(True, label="Attribution patching beside it")
        sanity = gr.Checkbox(True, label="Sanity checks (re-initialised model, two clean prompts)")
        go_button = gr.Button("Patch", variant="primary", scale=0)
    outputs = _outputs("Patching grids", "patch")
    inputs = [model, clean, corrupted, answer, other, site, attribution, sanity]
    shared.remember("causal", model=model, clean=clean, corrupted=corrupted, answer=answer, other=other, site=site)
    shared.limit("causal.model", model_ids(ALL))
    demo.input(pick_demo, demo, [model, clean, corrupted, answer, other], api_visibility="private", queue=False)
    go_button.click(checked(patch, inputs), inputs, outputs, api_name="patch", show_progress="full")
    redraw_when_linked(shared, patch, inputs, [model, clean, corrupted, answer, other, site], outputs)


def _ablate_view(shared: Shared) -> None:
    gr.Markdown(ABLATE_MD, latex_delimiters=LATEX)
    with gr.Row():
        model = gr.Dropdown(ALL, value=GPT_DEMO[0], label="Model", scale=1, **ALIASED)
        text = gr.Textbox(GPT_DEMO[1], label="Text (a masked LM: with [MASK])", scale=3)
        reference = gr.Textbox("", label="Reference text (mean / resample)", scale=2)
    with gr.Row():
        target = gr.Radio([("one head", "head"), ("layer's attention", "attn"), ("layer's MLP", "mlp")], value="head",
                          label="Knock out")
        layer = gr.Number(0, label="Layer (from 0)", precision=0, minimum=0)
        head = gr.Number(0, label="Head (from 0)", precision=0, minimum=0)
        how = gr.Radio(list(iv.HOWS), value="zero", label="By")
        sanity = gr.Checkbox(True, label="Sanity check (re-initialised model)")
    with gr.Row():
        ablate_button = gr.Button("Ablate", variant="primary", scale=0)
        sweep_button = gr.Button("Which heads matter here? (sweep)", scale=0)
    ablate_outputs = _outputs("Before and after", "ablate")
    sweep_outputs = _outputs("Every head knocked out", "sweep")
    shared.remember("causal_ablate", model=model, text=text, target=target, layer=layer, head=head, how=how)
    shared.limit("causal_ablate.model", model_ids(ALL))
    ablate_inputs = [model, text, target, layer, head, how, reference, sanity]
    ablate_button.click(checked(ablate, ablate_inputs), ablate_inputs, ablate_outputs, api_name="ablate",
                        show_progress="minimal")
    redraw_when_linked(shared, ablate, ablate_inputs, [model, text, target, layer, head, how], ablate_outputs)
    sweep_inputs = [model, text, how, reference, sanity]
    sweep_button.click(checked(sweep, sweep_inputs), sweep_inputs, sweep_outputs, api_name="head_sweep",
                       show_progress="full")


def _steer_view(shared: Shared) -> None:
    gr.Markdown(STEER_MD, latex_delimiters=LATEX)
    preset = gr.Dropdown(list(STEER_PRESETS), value=next(iter(STEER_PRESETS), None), label="Preset")
    with gr.Row():
        model = gr.Dropdown(CAUSAL, value=CAUSAL[0] if CAUSAL else None, label="Causal LM", scale=1, **ALIASED)
        prompt = gr.Textbox("ROMEO:\nI", label="Prompt", scale=2)
        positive = gr.Textbox("Love\nI love thee", label="Positive prompts (one per line)", lines=2, scale=2)
        negative = gr.Textbox("Hate\nI hate thee", label="Negative prompts (one per line)", lines=2, scale=2)
    with gr.Row():
        layer = gr.Number(2, label="Layer (from 0)", precision=0, minimum=0)
        strength = gr.Slider(-steering.MAX_STRENGTH, steering.MAX_STRENGTH, value=2, step=0.5, label="Strength")
        words = gr.Textbox("l, h", label="Words whose logit to follow (comma-separated)")
        n = gr.Slider(1, steering.MAX_NEW, value=30, step=1, label="New tokens")
        seed = gr.Number(0, label="Seed", precision=0)
        steer_button = gr.Button("Steer", variant="primary", scale=0)
    outputs = _outputs("What each word gains or loses", "steer")
    shared.remember("causal_steer", model=model, prompt=prompt, positive=positive, negative=negative, layer=layer,
                    strength=strength, words=words)
    shared.limit("causal_steer.model", model_ids(CAUSAL))
    inputs = [model, prompt, positive, negative, layer, strength, words, n, seed]
    preset.input(pick_steer_preset, preset, inputs[:7], api_visibility="private", queue=False)
    steer_button.click(checked(steer, inputs), inputs, outputs, api_name="steer", show_progress="minimal")
    redraw_when_linked(shared, steer, inputs, inputs[:7], outputs)


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The three views; each runs on its button only."""
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    _patch_view(shared)
    _ablate_view(shared)
    _steer_view(shared)
