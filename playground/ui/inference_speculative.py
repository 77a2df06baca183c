"""The Inference tab's Speculative decoding sub-tab: greedy decoding with a draft (prompt lookup, or SmolLM2's own
first k layers), each verification pass's accepted and rejected tokens, and the speed-up against plain greedy,
measured live (analysis/speculative.py). It runs on its button, or when a link sets its controls; the prompt follows
the sentence above without decoding it."""

from __future__ import annotations

import gradio as gr

from playground.analysis import models
from playground.analysis import speculative as spec
from playground.figures import speculative as fs
from playground.ui.causal_tab import redraw_when_linked
from playground.ui.common import (FIGURE, FOLLOW, LATEX, Shared, as_int, json_file, refuse_missing_smollm2,
                                  text_input, things_to_try, warn)

ASK = "Repeat this sentence exactly: "     # the prompt made of the sentence above: an answer that copies its prompt
MAX_CHARS = 2_000
DEFAULT_K = 24        # of 30 layers: fewer are rarely right (the early layers' guesses are not yet the model's)
DEFAULT_NEW = 16      # new tokens: plain greedy and the speculative run take about 3 s together on one core
TRY = [("a copy: prompt lookup", [ASK + "The bank raised its interest rates again this spring.", "lookup", True]),
       ("a free answer", ["What is the capital of France? Answer in one sentence.", "lookup", True]),
       ("the self-draft", ["What is the capital of France? Answer in one sentence.", "self", True]),
       ("a list", ["1, 2, 3, 4, 5, 6, 7, 8,", "lookup", False])]


def speculative(prompt, chat=True, draft="lookup", k=DEFAULT_K, gamma=4, max_new=DEFAULT_NEW):
    """Plain greedy and speculative decoding of the prompt: every verification pass, the speed-up, the table, the
    data."""
    notices: list[str] = []
    prompt = text_input(prompt, notices, MAX_CHARS)
    if not prompt.strip():
        raise gr.Error("Type a prompt for SmolLM2, e.g. 'Repeat this sentence exactly: ...'.")
    if draft not in spec.DRAFTS:
        raise gr.Error(f"Unknown draft {str(draft)[:40]!r}; choose from {', '.join(spec.DRAFTS)}.")
    if not isinstance(chat, bool):
        raise gr.Error("Chat should be true or false.")
    refuse_missing_smollm2(models.SMOLLM2)
    layers = models.shape(models.SMOLLM2).layers
    k = as_int(k, "Draft layers k", 1, layers - 1, notices)
    gamma = as_int(gamma, "Draft tokens γ", 1, spec.MAX_GAMMA, notices)
    max_new = as_int(max_new, "New tokens", 1, spec.MAX_NEW, notices)
    m = models.get(models.SMOLLM2)
    try:
        data = spec.compare(m, prompt, chat, draft, k, gamma, max_new)
    except spec.SpeculativeError as err:
        raise gr.Error(str(err)) from None
    warn(notices + data["notices"])
    return (fs.steps_html(data), fs.speed_figure(data), fs.speed_markdown(data), json_file(data, "speculative"),
            data)


SPEC_MD = r"""**Speculative decoding** (Leviathan et al. 2023; Chen et al. 2023), greedy: a cheap draft guesses the next
$\gamma$ tokens; the model reads them all in **one** pass with its KV cache and keeps the longest run that matches its
own greedy choices, plus its own token after it, so every pass gives 1 to $\gamma + 1$ tokens and the text is
exactly the model's greedy text. The drafts: **prompt lookup** (Saxena 2023) copies what followed the text's last
few tokens where they occurred before (free, and right when the answer copies the prompt); the **self-draft** runs
only SmolLM2's first $k$ of its 30 layers, then its own final norm and output layer (early exit), reusing the model's
cache of those layers. The same prompt is also decoded plainly, one pass per token, and the two texts are compared
token for token. Both run every product in fp32, so a pass of several tokens computes what a pass of one does."""


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The view's controls, its outputs and its events (its button; a link that sets its controls)."""
    gr.Markdown(SPEC_MD, latex_delimiters=LATEX, elem_id="spec-intro")
    layers = models.shape(models.SMOLLM2).layers
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(ASK + str(shared.text.value), label="Prompt", lines=2, max_lines=6,
                                elem_id="spec-prompt")
            follow = gr.Checkbox(True, label=f"Follow the sentence above (as “{ASK.strip()} …”)",
                                 elem_id="spec-follow")
        with gr.Column(scale=2):
            draft = gr.Radio([(label, key) for key, label in spec.DRAFTS.items()], value="lookup", label="Draft")
            chat = gr.Checkbox(True, label="Chat: the prompt is the user's turn (SmolLM2's template)")
    with gr.Row():
        k = gr.Slider(1, max(2, layers - 1), value=min(DEFAULT_K, max(1, layers - 1)), step=1,   # a 2-layer model
                      label="Self-draft: its first k layers")                                   # has one k: 1
        gamma = gr.Slider(1, spec.MAX_GAMMA, value=4, step=1, label="Draft tokens per pass γ")
        max_new = gr.Slider(1, spec.MAX_NEW, value=DEFAULT_NEW, step=1, label="New tokens")
        run = gr.Button("Decode both ways", variant="primary", scale=0, elem_id="spec-run")
    things_to_try(TRY, [prompt, draft, chat])
    with gr.Row():
        with gr.Column(scale=3):
            steps = gr.HTML(elem_id="spec-steps", elem_classes=FIGURE)
            speed = gr.Plot(label="Plain greedy against speculative", elem_id="spec-speed")
        with gr.Column(scale=2):
            table = gr.Markdown(elem_id="spec-table", elem_classes=["figure-text"])
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        file = gr.DownloadButton("Download JSON", size="sm")
        data = gr.JSON(label="speculative")
    gr.on([shared.changed("text"), follow.change], lambda s, on: ASK + s if on and s else gr.skip(),
          inputs=[shared.text, follow], outputs=prompt, api_visibility="private", queue=False,
          show_progress="hidden", trigger_mode=FOLLOW)
    inputs, outputs = [prompt, chat, draft, k, gamma, max_new], [steps, speed, table, file, data]
    shared.remember("spec", prompt=prompt, follow=follow, draft=draft, chat=chat, k=k, gamma=gamma, max_new=max_new)
    run.click(speculative, inputs=inputs, outputs=outputs, api_name="speculative", show_progress="full")
    redraw_when_linked(shared, speculative, inputs, [draft, chat, k, gamma, max_new], outputs)
