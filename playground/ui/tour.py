"""The guided tour: the lecture's path through the tabs, from tokens to GPT and BERT, then how a model is served.

Each step says what to look at in two or three sentences, gives the equation the view computes (as the
code in playground/ writes it), opens its tab and sets the controls that make the point, through the
same view keys a link uses (playground/ui/view.py). The step number is per user (gr.State).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from playground.ui.common import LATEX, Shared
from playground.ui.view import coerce


@dataclass(frozen=True)
class Step:
    title: str
    text: str                      # two or three sentences: what to look at
    equation: str                  # LaTeX, displayed
    tab: str                       # a top-level tab id (ui.demo.tab_id)
    shows: str                     # the elem_id of the view the step talks about: in lecture mode the page scrolls
    #                                it to just under the step (assets/view.js walk)
    controls: dict = field(default_factory=dict)  # view key -> value
    sub: str = ""                  # the sub-tab inside `tab` that holds `shows` (view.sub_id of its label), if any

    @property
    def path(self) -> str:
        """The step's view as a link names it: "tab" or "tab/sub" (the page opens the sub-tab: assets/view.js)."""
        return f"{self.tab}/{self.sub}" if self.sub else self.tab


STEPS = [
    Step("Tokens", "A model never reads characters or words, only ids from its vocabulary. Byte-level BPE starts "
         "from bytes and merges the most frequent adjacent pair, again and again; compare how many tokens each "
         "tokenizer needs for the sentence, and what becomes `[UNK]`.",
         r"(a, b) = \arg\max_{(x, y)} \operatorname{count}(x\,y), \qquad x\,y \to xy", "tokenization", "tokens-view",
         sub="compare-tokenizers"),
    Step("Real vocabularies and languages", "The same declaration costs far more tokens in some languages: the "
         "premium. A vocabulary learned mostly from English keeps long English pieces, while other scripts fall "
         "apart into a few UTF-8 bytes per token. Compare SmolLM2's 49k, GPT-4's 100k and GPT-4o's 200k rows.",
         r"\text{premium}(\ell) = \frac{\lvert \operatorname{tok}(x_\ell) \rvert}{\lvert \operatorname{tok}"
         r"(x_{\text{en}}) \rvert}, \qquad \text{bytes per token} = \frac{\lvert \operatorname{utf8}(x) \rvert}"
         r"{\lvert \operatorname{tok}(x) \rvert}", "tokenization", "voc-premium",
         sub="real-vocabularies-side-by-side"),
    Step("Embeddings", "Each id picks a row of an embedding matrix. word2vec trains those rows so that a word "
         "predicts its neighbours; words used alike end up close, and some directions carry meaning "
         "(king − man + woman ≈ queen).",
         r"\log \sigma({v'_c}^{\top} v_w) + \sum_{k=1}^{K} \log \sigma(-{v'_{n_k}}^{\top} v_w)", "embeddings",
         "emb-word-plot"),
    Step("RNN and vanishing gradients", "An Elman RNN reads one character per step into one state. The loss at the "
         "last step reaches step t only through a product of Jacobians: watch the gradient norm fall as it goes "
         "back in time.",
         r"h_t = \tanh(W_{ih} x_t + W_{hh} h_{t-1} + b), \qquad "
         r"\frac{\partial L_T}{\partial h_{t-1}} = W_{hh}^{\top} \operatorname{diag}\big(\phi'(a_t)\big) "
         r"\frac{\partial L_T}{\partial h_t}",
         "rnn-gradient-flow", "gf-plot", {"rnn.cells": ["rnn"]}),
    Step("LSTM and GRU gates", "The LSTM adds a cell state updated by addition, gated by f, i, o: with f near 1 the "
         "gradient passes back almost unchanged (the constant error carousel). The GRU does the same with one update "
         "gate z. Compare the three curves.",
         r"c_t = f_t \odot c_{t-1} + i_t \odot \tilde c_t, \quad h_t = o_t \odot \tanh(c_t); \qquad "
         r"h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}",
         "rnn-gradient-flow", "gf-plot", {"rnn.cells": ["rnn", "lstm", "gru"]}),
    Step("Seq2seq attention", "An encoder-decoder squeezes the source into one vector, and long inputs suffer. "
         "Bahdanau's attention lets each output step look back at every source position: the alignment shows "
         "which source words each digit came from.",
         r"e_{ij} = v_a^{\top} \tanh(W_a s_{i-1} + U_a h_j), \quad \alpha_{ij} = "
         r"\frac{\exp e_{ij}}{\sum_k \exp e_{ik}}, \quad c_i = \sum_j \alpha_{ij} h_j",
         "seq2seq-attention", "s2s-alignment", {"s2s.model": "bahdanau"}),
    Step("Self-attention", "Drop the recurrence: every token attends to every token of the same sentence. Each "
         "head compares queries with keys and mixes the values; hover a token in the head view to see where it "
         "looks, in a real pretrained BERT (MiniLM).",
         r"\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^{\top}}{\sqrt{d_k}}\right) V",
         "attention", "attn-head-view", {"att.model": "minilm", "att.layer": 2, "att.head": "mean"}),
    Step("The Transformer", "Several heads run side by side and their outputs are concatenated; stacked layers "
         "of attention and feed-forward blocks, with residual connections, make the Transformer. Order enters "
         "only through position embeddings (the sinusoids of the paper, or learned ones in BERT and GPT).",
         r"\operatorname{MultiHead} = \operatorname{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O, \quad "
         r"PE_{(pos, 2i)} = \sin\!\big(pos / 10000^{2i/d}\big)",
         "attention", "attn-head-view", {"att.layer": 5, "att.head": "0"}),
    Step("GPT: predict the next token", "A decoder-only Transformer with a causal mask predicts each token from "
         "the ones before it. Generation samples from that distribution step by step: click a generated token to "
         "see its distribution with the top-k and top-p cut-offs.",
         r"p(x_t \mid x_{<t}) = \operatorname{softmax}\big(\mathrm{LN}(h_L)_t\, W_e^{\top}\big)",
         "generation", "gen-text", {"gen.strategy": "top-k"}),
    Step("BERT: fill in the blank", "BERT reads the whole sentence in both directions and is trained to restore "
         "masked tokens: 15% of positions are chosen, 80% of those become [MASK], 10% a random token, 10% stay. "
         "Select a word above: it becomes [MASK] here.",
         r"\mathcal{L}_{\text{MLM}} = -\sum_{i \in \mathcal{M}} \log p\big(x_i \mid \tilde{x}\big)",
         "masked-lm-fill-in", "fm-filled"),
    Step("Serving: the KV cache", "A generation keeps every layer's keys and values, so a new token costs a pass "
         "over one position instead of the whole text. Press Measure: the cache grows by the same bytes each token, "
         "SmolLM2's 9 query heads share 3 key/value heads (a third of the bytes), and a second chat turn reuses the "
         "first.",
         r"\text{bytes per token} = n_{\text{layer}} \times 2 \times n_{kv} \times d_{\text{head}} \times 4 = "
         r"30 \times 2 \times 3 \times 64 \times 4 = 46{,}080", "inference", "kv-about", sub="kv-cache"),
    Step("Serving: batching", "Every student's generation runs in one batch, and a step reads each weight once "
         "whatever the number of rows. Run the experiment: up to a turn another row is nearly free, past it the "
         "arithmetic dominates. Row 0 gives the same bits alone and in every batch.",
         r"t(B) \approx a + b\,B, \qquad \text{tokens/s} = \frac{B}{a + b\,B}, \qquad "
         r"\frac{\text{FLOPs}}{\text{byte}} \approx 2B", "inference", "batch-about", sub="batching"),
    Step("Quantization: fewer bits a weight", "Serving a model is mostly reading its weights: a generation step reads "
         "every one of them, so their bytes set its time. SmolLM2's weights in fp16, bf16, int8 and the file's own "
         "4-bit blocks: press Measure to see what each saves and what it changes (the weight error, the next-token "
         "KL on your sentence, perplexity). Below, one real block of the file: 32 weights on 16 levels.",
         r"w_j = d\,q_j + m,\ q_j \in \{0, \dots, 15\}; \qquad \hat w = s \operatorname{round}(w / s),\ "
         r"s = \max_k |W_{nk}| / 127",
         "inference", "quant-block", sub="quantization"),
    Step("Speculative decoding: several tokens a pass", "Checking five tokens costs a CPU about what one does: "
         "both read every weight once. A cheap draft guesses γ tokens; SmolLM2 reads them in one pass and keeps "
         "those that match its own greedy choice, then adds its own. Press Decode: the text is plain greedy's, token "
         "for token, in fewer passes when the draft is good.",
         r"\hat x_{t+i} \text{ kept while } \hat x_{t+i} = \arg\max_x p(x \mid x_{<t+i}), \quad "
         r"\text{then } x_{t+a+1} = \arg\max_x p(x \mid x_{\le t+a})",
         "inference", "spec-intro", sub="speculative-decoding"),
]


INTRO = (f"{len(STEPS)} steps in the order of the lecture. Each opens its tab, sets the controls that make the "
         "point and gives the equation the view computes. Type your own sentence first: every step uses it. "
         "Press **Next →** to start.")


def step_markdown(i: int) -> str:
    step = STEPS[i]
    return f"**Step {i + 1} of {len(STEPS)}: {step.title}.** {step.text}\n\n$${step.equation}$$"


def layout() -> tuple[gr.Markdown, gr.Button, gr.Button, gr.State, gr.Textbox]:
    """The tour's panel (placed above the tabs; `wire` connects it once the tabs exist), its step (per user) and
    the selector of the step's view (mounted but not shown, as ui.demo.HIDDEN says: the page reads it)."""
    with gr.Accordion(f"Guided tour: from tokens to GPT, BERT and serving in {len(STEPS)} steps", open=False,
                      elem_id="tour"):
        text = gr.Markdown(INTRO, latex_delimiters=LATEX, elem_id="tour-text")
        with gr.Row():
            previous = gr.Button("← Previous", size="sm", elem_id="tour-prev")
            following = gr.Button("Next →", size="sm", variant="primary", elem_id="tour-next")
        shows = gr.Textbox("", visible="hidden", elem_id="tour-shows")
    return text, previous, following, gr.State(-1), shows


def check_controls(view: dict) -> None:
    """Every control a step sets is registered, and its value is one the component takes as it is."""
    for step in STEPS:
        for key, value in step.controls.items():
            assert key in view, f"tour step {step.title!r} sets {key!r}, which no tab registered"
            raw = ",".join(value) if isinstance(value, list) else str(value)
            notices: list[str] = []
            assert coerce(view[key], raw, notices, key) == value and not notices, (
                f"tour step {step.title!r}: {key}={value!r} is not a value of that control")


# the step's sub-tab opened (as a link's is), then the view walked to: `shows` is "tab[/sub] #elem-id"
WALK_JS = """(view) => {
  const [path, target] = view.split(" ");
  window.playgroundView.open(path);
  window.playgroundView.walk("#tour-text", target);
}"""


def wire(shared: Shared, text: gr.Markdown, previous: gr.Button, following: gr.Button, state: gr.State,
         shows: gr.Textbox) -> None:
    check_controls(shared.view)
    keys = sorted({key for step in STEPS for key in step.controls})
    controls = [shared.view[key] for key in keys]

    def go(current: int, delta: int):
        i = min(max(current + delta, 0), len(STEPS) - 1)
        step = STEPS[i]
        values = [step.controls[key] if key in step.controls else gr.skip() for key in keys]
        return i, step_markdown(i), f"{step.path} #{step.shows}", gr.Tabs(selected=step.tab), *values

    outputs = [state, text, shows, shared.tabs, *controls]
    for button, delta in ((previous, -1), (following, +1)):   # in lecture mode, the view then under the step
        button.click(lambda s, delta=delta: go(max(s, 0) if delta < 0 else s, delta), inputs=state, outputs=outputs,
                     api_visibility="private", queue=False).then(
            None, inputs=shows, js=WALK_JS)
