"""The Inference tab: how a model is served, measured on SmolLM2 in front of the student: a sub-tab per section.

SECTIONS lists them in the lecture's order, each a module with `build(demo, shared)` that lays out its sub-tab's
contents and wires its events (each with its api_name). A new section is one more module and one more entry here.
Every section reads SmolLM2; where it is not offered, the tab says why and how to add it.
"""

from __future__ import annotations

import gradio as gr

from playground.analysis import models
from playground.ui import inference_batching, inference_kv, inference_quant, inference_speculative
from playground.ui.common import LATEX, Shared

# (the sub-tab's title, its module): in the order they are taught
SECTIONS = [("KV cache", inference_kv), ("Batching", inference_batching), ("Quantization", inference_quant),
            ("Speculative decoding", inference_speculative)]

INTRO_MD = """**Inference, inside out.** The other tabs show how a model computes a token; this one shows what serving
it costs and how that cost is cut, measured live on SmolLM2-135M-Instruct (and our GPT) in our own code: the keys and
values a generation keeps instead of computing them again, many students' generations advanced in one batch, the same
weights stored in fewer bits, and more than one token per pass of the model. A generation step on a CPU is bound by
memory: it reads every weight once per step, so the bytes of the weights set its time, the rows of a batch share that
read, and a pass that checks several tokens costs about what a pass for one does."""


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The intro and a sub-tab per section; without SmolLM2, why not and how to add it."""
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    if models.resolve(models.SMOLLM2) is None:
        gr.Markdown(f"**Every view of this tab measures SmolLM2.** {models.missing()}", elem_id="inference-missing")
        return
    with gr.Tabs(elem_id="inference-tabs"):
        for title, module in SECTIONS:
            with gr.Tab(title):
                module.build(demo, shared)
