"""The Inference tab's Quantization sub-tab: SmolLM2's weights in fp32, fp16, bf16, int8 and the file's Q4_1, measured
on the student's text (analysis/quantization.py), and one real Q4_1 block of the file drawn weight by weight.

Both views run on their button (the measurement takes seconds and builds every format in turn), or when a link sets
their controls; the text follows the sentence above without measuring it.
"""

from __future__ import annotations

import gradio as gr

from playground.analysis import models
from playground.analysis import quant_formats as qf
from playground.analysis import quantization as quant
from playground.figures import quantization as fq
from playground.ui.common import (FOLLOW, LATEX, Shared, as_int, json_file, refuse_missing_smollm2, text_input,
                                  things_to_try, warn)

MAX_CHARS = 2_000     # characters of the text (its first MAX_TOKENS tokens are read)
MATRIX_LABELS = {"self_attn.q_proj": "W^Q (attn_q)", "self_attn.k_proj": "W^K (attn_k)",
                 "self_attn.v_proj": "W^V (attn_v)", "self_attn.o_proj": "W^O (attn_output)",
                 "mlp.gate_proj": "W_gate (ffn_gate)", "mlp.up_proj": "W_up (ffn_up)",
                 "mlp.down_proj": "W_down (ffn_down)"}
TRY = [("plain English", ["The bank raised its interest rates again this spring, and savers were pleased."]),
       ("code", ["def mean(xs):\n    return sum(xs) / len(xs)\n"]),
       ("other scripts", ["Ελληνικά, العربية, 日本語 and हिन्दी in one sentence."])]


def quantization(text):
    """Every format against fp32 on the text: what each costs (bytes, step), its weight error per layer, its KL per
    token, the table, and the data."""
    notices: list[str] = []
    text = text_input(text, notices, MAX_CHARS)
    if not text.strip():
        raise gr.Error("Type a text for SmolLM2 to read: each format's next-token distribution is compared with "
                       "fp32's at every token of it.")
    refuse_missing_smollm2(models.SMOLLM2)
    try:
        data = quant.measure(text)
    except quant.QuantizationError as err:
        raise gr.Error(str(err)) from None
    warn(notices + data["notices"])
    return (fq.cost_figure(data), fq.error_figure(data), fq.kl_figure(data), fq.summary_markdown(data),
            json_file(data, "quantization"), data)


def q4_block(layer=0, matrix="self_attn.q_proj", row=0, block=0):
    """One Q4_1 block of the file: its bytes, d, m, the 32 q and weights, drawn at their 16 levels."""
    notices: list[str] = []
    refuse_missing_smollm2(models.SMOLLM2)
    if matrix not in qf.MATRICES:
        raise gr.Error(f"Unknown matrix {str(matrix)[:40]!r}; choose from {', '.join(qf.MATRICES)}.")
    layer = as_int(layer, "Layer", 0, models.shape(models.SMOLLM2).layers - 1, notices)
    rows, blocks = quant.matrix_shape(matrix)
    row, block = as_int(row, "Row", 0, rows - 1, notices), as_int(block, "Block", 0, blocks - 1, notices)
    try:
        data = quant.q4_block(layer, matrix, row, block)
    except quant.QuantizationError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    return fq.block_figure(data), fq.block_markdown(data), data


QUANT_MD = r"""**Quantization**: the same weights in fewer bits. Each format is made from SmolLM2's fp32 weights (the
GGUF file's Q4_1 values, exactly: its original bf16 weights are not in the package; where the app reads SmolLM2 from
the Hub, the original's), run over your text, and compared with fp32: the next-token distribution's
$\mathrm{KL}(p_{\text{fp32}} \,\|\, p_{\text{format}})$ and how often the most likely token is the same, the
perplexity on a shipped text, each layer's weight error $\lVert \hat W - W \rVert_F / \lVert W \rVert_F$, the weights'
bytes and one generation step's time. **fp16** and **bf16** round each weight to 11 or 8 significant bits;
**int8** stores one byte per weight and one scale per output channel, $\hat w = s \cdot \mathrm{round}(w / s)$,
$s = \max_k |W_{nk}| / 127$; **Q4_1** is the file as shipped: blocks of 32 weights, each $w = d\,q + m$ with a 4-bit
$q$. No format is ever held whole: the layers are built five at a time, measured and freed. The first run in a
process also measures the bytes, errors, step times and perplexity (seconds more); each new text then measures its
own KL."""

BLOCK_MD = r"""**One Q4_1 block of the file**, byte by byte: 2 bytes of scale $d$ and 2 of minimum $m$ (fp16 each), then
16 bytes holding 32 four-bit integers $q_j \in \{0, \dots, 15\}$. Each weight is $w_j = d\,q_j + m$: one of 16 evenly
spaced levels from the block's smallest weight to its largest (llama.cpp's rule: $d = (\max - \min)/15$, $m = \min$).
That is 20 bytes for 32 weights: 5 bits a weight."""


def _measure_view(shared: Shared) -> None:
    gr.Markdown(QUANT_MD, latex_delimiters=LATEX, elem_id="quant-intro")
    with gr.Row():
        text = gr.Textbox(shared.text.value, label="Text (follows the sentence above)", lines=2, max_lines=6,
                          scale=4, elem_id="quant-text")
        run = gr.Button("Measure every format", variant="primary", scale=0, elem_id="quant-run")
    things_to_try(TRY, [text])
    with gr.Row():
        with gr.Column(scale=3):
            cost = gr.Plot(label="Bytes and step time", elem_id="quant-cost")
            errors = gr.Plot(label="Weight error per layer", elem_id="quant-errors")
            kl = gr.Plot(label="KL per token", elem_id="quant-kl")
        with gr.Column(scale=2):
            table = gr.Markdown(elem_id="quant-table", elem_classes=["figure-text"], latex_delimiters=LATEX)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        file = gr.DownloadButton("Download JSON", size="sm")
        data = gr.JSON(label="quantization")
    shared.changed("text")(lambda s: s or gr.skip(), inputs=shared.text, outputs=text, api_visibility="private",
                           queue=False, show_progress="hidden", trigger_mode=FOLLOW)
    outputs = [cost, errors, kl, table, file, data]
    gr.on([run.click], quantization, inputs=[text], outputs=outputs, api_name="quantization",
          show_progress="full")


def _block_view(shared: Shared) -> None:
    gr.Markdown(BLOCK_MD, latex_delimiters=LATEX)
    layers = models.shape(models.SMOLLM2).layers
    with gr.Row():
        layer = gr.Slider(0, layers - 1, value=0, step=1, label="Layer")
        matrix = gr.Dropdown([(label, key) for key, label in MATRIX_LABELS.items()], value="self_attn.q_proj",
                             label="Matrix")
        row = gr.Number(0, label="Row (as the file stores it)", precision=0, minimum=0)
        block = gr.Number(0, label="Block in the row (from 0)", precision=0, minimum=0)
        show = gr.Button("Draw the block", scale=0, elem_id="quant-block-run")
    with gr.Row():
        with gr.Column(scale=3):
            plot = gr.Plot(label="One Q4_1 block", elem_id="quant-block")
        with gr.Column(scale=2):
            table = gr.Markdown(elem_id="quant-block-text", elem_classes=["figure-text"])
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        data = gr.JSON(label="q4_block")
    inputs, outputs = [layer, matrix, row, block], [plot, table, data]
    shared.remember("quant_block", layer=layer, matrix=matrix, row=row, block=block)
    # a tenth of a second: drawn as the controls change too (a link's, the tour's), not on the page's opening
    gr.on([show.click, layer.release, matrix.change, row.submit, block.submit], q4_block, inputs=inputs,
          outputs=outputs, api_name="q4_block", show_progress="minimal", trigger_mode="always_last")


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The measurement of every format, then the block drawing; each runs on its button."""
    _measure_view(shared)
    with gr.Accordion("Inside the GGUF file: one Q4_1 block", open=True):
        _block_view(shared)
