"""The Tokenization tab: six tokenizers side by side, classic BPE step by step, why WordPiece and
Unigram split a word as they do, and classic text normalisation."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from playground.figures import tokenization as ft
from playground.figures.common import token_label
from playground.analysis import normalize
from playground.analysis import tokenization
from playground.ui.common import FIGURE, LATEX, Shared, as_int, chosen, json_file, text_input, warn

DEFAULT_BPE_TABLE = "low 5\nlower 2\nnewest 6\nwidest 3\nhighest 2"  # the lecture's worked example
VOCAB_MIN, VOCAB_MAX = 300, 30_000

TOKENIZERS = tokenization.load_all()  # six tokenizers, loaded once, read-only
LABELS = {key: spec.label for key, spec in tokenization.SPECS.items()}


# ---------------------------------------------------------------------------------------------
# Handlers


def _view(text: str, results: dict, labels: dict, notices: list[str]):
    rows = [
        (labels[key], i, token_label(token), tid, start, end, token_label(text[start:end]), unk)
        for key, r in results.items()
        for i, (token, tid, (start, end), unk) in enumerate(zip(r["tokens"], r["ids"], r["offsets"], r["unknown"]))
    ]
    table = pd.DataFrame(rows, columns=["tokenizer", "#", "token", "id", "start", "end", "characters", "unknown"])
    data = {"text": text, "n_chars": len(text), "notices": notices, "tokenizers": results}
    return (ft.tokens_html(text, results, labels, notices), ft.token_count_figure(results, labels), table,
            json_file(data, "tokenize"), data)


def tokenize(text, names, retrain=False, vocab_size=2_000):
    """Every chosen tokenizer on one text: coloured spans, counts, a table, and the data.

    With `retrain`, BPE, WordPiece and Unigram are first trained on the corpus sample at
    `vocab_size` (cached). Unigram's trainer is several times slower than the other two, so when
    it has to run, the others are shown first and Unigram follows.
    """
    notices: list[str] = []
    text = text_input(text, notices)
    names = chosen(names, TOKENIZERS, "tokenizer")
    size = as_int(vocab_size, "Vocabulary size", VOCAB_MIN, VOCAB_MAX, notices) if retrain else None
    warn(notices)

    results, labels, slow = {}, {}, []
    for key in names:
        if size is None or key not in tokenization.RETRAINABLE:
            tok, labels[key] = TOKENIZERS[key], LABELS[key]
        elif key == "unigram" and not tokenization.is_retrained(key, size):
            slow.append(key)  # train it after showing the rest
            continue
        else:
            tok = tokenization.retrained(key, size)
            labels[key] = f"{LABELS[key]}, retrained on the corpus sample at {size:,}"
        results[key] = {"label": labels[key], **tokenization.encode(tok, text)}
    if slow:
        yield _view(text, results, labels, notices + [f"Retraining {LABELS['unigram']} at {size:,} (a few seconds)…"])
    for key in slow:
        labels[key] = f"{LABELS[key]}, retrained on the corpus sample at {size:,}"
        results[key] = {"label": labels[key], **tokenization.encode(tokenization.retrained(key, size), text)}
    results = {key: results[key] for key in names}  # the order the user chose
    yield _view(text, results, labels, notices)


def _trace(table, num_merges, notices: list[str]) -> dict:
    if table is not None and not isinstance(table, str):
        raise gr.Error("The frequency table should be text: one 'word count' per line.")
    merges = as_int(num_merges, "Number of merges", 0, tokenization.MAX_MERGES, notices)
    try:
        word_counts = tokenization.parse_word_counts(table)
    except ValueError as err:
        raise gr.Error(f"Frequency table: {err}.") from None
    return tokenization.bpe_trace(word_counts, merges)


def bpe_trace(table, num_merges):
    """Sennrich et al.'s BPE learning on the user's table, every step kept for the step slider."""
    notices: list[str] = []
    trace = _trace(table, num_merges, notices)
    if trace["stopped"]:
        notices.append(trace["stopped"].capitalize() + ".")
    warn(notices)
    merges = pd.DataFrame(
        [(m["step"], f"{m['pair'][0]} + {m['pair'][1]}", m["new_symbol"], m["count"]) for m in trace["merges"]],
        columns=["step", "pair", "new symbol", "count"],
    )
    last = len(trace["merges"])
    step = gr.Slider(minimum=0, maximum=max(last, 1), value=last, step=1, label="Show step", interactive=last > 0)
    return (merges, step, ft.bpe_pairs_figure(trace, last), ft.bpe_step_html(trace, last), trace,
            json_file(trace, "bpe-trace"), trace)


def bpe_show_step(trace, step):
    if not trace:
        return ft.bpe_pairs_figure({"steps": []}, 0), ""
    step = as_int(step, "Step", 0, len(trace["steps"]), [])
    return ft.bpe_pairs_figure(trace, step), ft.bpe_step_html(trace, step)


def bpe_segment(table, num_merges, words):
    """Segment new words with the merges learned from the table: an unseen word is still covered."""
    notices: list[str] = []
    trace = _trace(table, num_merges, notices)
    words = tokenization.words_of(text_input(words, notices, max_chars=2_000))[:50]
    if not words:
        raise gr.Error("Type one or more words to segment, e.g. 'lowest newer'.")
    warn(notices)
    segmented = [tokenization.bpe_segment(w, trace["merges"], trace["alphabet"]) for w in words]
    return ft.bpe_segment_html(segmented), {"merges": trace["merges"], "words": segmented}


def explain_split(text, wordpiece="wordpiece"):
    """Why WordPiece and Unigram split each word as they do."""
    notices: list[str] = []
    text = text_input(text, notices, max_chars=1_000)
    if wordpiece not in ("wordpiece", "minilm"):
        raise gr.Error("WordPiece vocabulary should be 'wordpiece' (ours) or 'minilm' (pretrained).")
    if not text.strip():
        raise gr.Error("Type a word or two to explain, e.g. 'unaffable tokenization'.")
    warn(notices)
    wp = tokenization.wordpiece_explain(TOKENIZERS[wordpiece], text)
    uni = tokenization.unigram_explain(TOKENIZERS["unigram"], text)
    return ft.wordpiece_html(wp), ft.unigram_html(uni), {"wordpiece": wp, "unigram": uni}


def normalize_text(text, steps):
    """Lowercasing, punctuation and stop-word removal, stemming: each stage's tokens."""
    notices: list[str] = []
    text = text_input(text, notices)
    steps = [steps] if isinstance(steps, str) else list(steps or [])
    try:
        stages = normalize.normalize_steps(text, steps)
    except ValueError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    return ft.normalize_html(stages), {"stages": stages}


# ---------------------------------------------------------------------------------------------
# Layout and events

TOKENIZERS_MD = """Each tokenizer was trained on the same 24.5 MB of English (Austen, the World English Bible, WordNet
glosses, the Jargon File, Shakespeare); the last is the real vocabulary of all-MiniLM-L6-v2 (bert-base-uncased).
**Character** and **word** tokenizers know a fixed list and map everything else to `[UNK]` (striped red).
**Byte-level BPE** works on UTF-8 bytes, so nothing is unknown: an emoji costs several byte tokens (underlined as one
character). **WordPiece** lowercases, strips accents and marks word-inner pieces with `##`; grey text is what its
pre-tokenizer drops. **Unigram** keeps the space as `▁` inside the next piece, so decoding gives the text back."""

BPE_MD = """**Byte-pair encoding** (Sennrich et al. 2016, Algorithm 1). Split each word into characters plus the
end-of-word marker `</w>`; then repeat: count every adjacent pair of symbols, weighted by the word's count, and merge the
most frequent pair everywhere into a new symbol. **Ties** go to the pair counted first, reading the table top to bottom
and each word left to right (what `max()` does over the insertion-ordered dictionary of the paper's reference code).
A new word is segmented by applying the learned merges in the order they were learned."""

SPLIT_MD = """**WordPiece** splits a word greedily: at each position it takes the *longest* vocabulary entry that matches
(`##` marks a piece inside a word) and moves on; if some position matches nothing, the whole word is `[UNK]`.
**Unigram** scores every way to cut the word into vocabulary pieces by $\\log P(\\mathbf{x}) = \\sum_i \\log p(x_i)$ and
outputs the best, $\\mathbf{x}^* = \\arg\\max_{\\mathbf{x} \\in S(w)} \\log P(\\mathbf{x})$ (Kudo 2018), found by dynamic
programming over the lattice of pieces. Below, the five most probable segmentations of each word."""

NORMALIZE_MD = """Classic preprocessing for bag-of-words models, applied in this order. It shrinks the vocabulary (compare
*distinct*), but it throws information away: stop-word lists drop *not*, stemming conflates words, lowercasing merges
*US* and *us*. Neural tokenizers keep the raw text instead (WordPiece uncased still lowercases)."""


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events; `sentence` is the text shared by every tab."""
    sentence = shared.text  # the committed sentence (see Shared)
    with gr.Tabs():
        with gr.Tab("Compare tokenizers"):
            gr.Markdown(TOKENIZERS_MD)
            with gr.Row():
                names = gr.CheckboxGroup([(spec.label, key) for key, spec in tokenization.SPECS.items()],
                                         value=list(tokenization.SPECS), label="Tokenizers", scale=3)
                with gr.Column(scale=2):
                    retrain = gr.Checkbox(False, label="Retrain BPE, WordPiece and Unigram on a 430 kB corpus "
                                          "sample at this vocabulary size")
                    vocab = gr.Slider(VOCAB_MIN, VOCAB_MAX, value=2_000, step=100, label="Vocabulary size")
            tokens_view = gr.HTML(elem_id="tokens-view", elem_classes=FIGURE, js_on_load=ft.TOKEN_HOVER_JS)
            counts_plot = gr.Plot(label="Sequence length")
            with gr.Accordion("Table view", open=False, elem_classes=["advanced"]):
                table = gr.Dataframe(label="Every token", wrap=True, max_height=500)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                tokens_file = gr.DownloadButton("Download JSON", size="sm")
                tokens_json = gr.JSON(label="tokenize")
        with gr.Tab("Classic BPE, step by step"):
            gr.Markdown(BPE_MD)
            with gr.Row():
                bpe_table = gr.Textbox(DEFAULT_BPE_TABLE, label="Word frequencies: 'word count' per line",
                                       lines=8, max_lines=20)
                with gr.Column():
                    bpe_merges = gr.Slider(0, 100, value=10, step=1, label="Number of merges")
                    bpe_run = gr.Button("Learn merges", variant="primary")
                    merges_table = gr.Dataframe(label="Merges, in order", max_height=300)
            bpe_step = gr.Slider(0, 10, value=10, step=1, label="Show step")
            bpe_trace_state = gr.State(None)  # this user's trace, for the step slider
            with gr.Row():
                bpe_pairs = gr.Plot(label="Pair counts")
                bpe_state_view = gr.HTML(elem_classes=FIGURE)
            with gr.Row():
                bpe_words = gr.Textbox("lowest newer wider", label="Segment new words with these merges")
                bpe_seg_run = gr.Button("Segment")
            bpe_seg_view = gr.HTML(elem_classes=FIGURE)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                bpe_seg_json = gr.JSON(label="bpe_segment")
                bpe_file = gr.DownloadButton("Download the trace (JSON)", size="sm")
                bpe_json = gr.JSON(label="bpe_trace")
        with gr.Tab("Why this split? WordPiece and Unigram"):
            gr.Markdown(SPLIT_MD, latex_delimiters=LATEX)
            with gr.Row():
                split_text = gr.Textbox("unaffable tokenization of hyperparameters", label="Words to explain", scale=3)
                wp_source = gr.Radio([("ours", "wordpiece"), ("MiniLM (bert-base-uncased)", "minilm")],
                                     value="wordpiece", label="WordPiece vocabulary", scale=1)
                split_run = gr.Button("Explain", scale=0)
            with gr.Row():
                with gr.Column():
                    gr.Markdown("#### WordPiece: greedy longest match first")
                    wp_view = gr.HTML(elem_classes=FIGURE)
                with gr.Column():
                    gr.Markdown("#### Unigram: the most probable segmentation")
                    uni_view = gr.HTML(elem_classes=FIGURE)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                split_json = gr.JSON(label="explain_split")
        with gr.Tab("Normalisation"):
            gr.Markdown(NORMALIZE_MD)
            norm_steps = gr.CheckboxGroup([(normalize.STEP_LABELS[s], s) for s in normalize.STEPS],
                                          value=list(normalize.STEPS), label="Steps (applied top to bottom)")
            norm_view = gr.HTML(elem_classes=FIGURE)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                norm_json = gr.JSON(label="normalize")

    shared.remember("tok", names=names, retrain=retrain, vocab=vocab)
    gr.on([demo.load, shared.restored.change, sentence.change, names.change, retrain.change, vocab.release], tokenize,
          inputs=[sentence, names, retrain, vocab], outputs=[tokens_view, counts_plot, table, tokens_file, tokens_json],
          api_name="tokenize", trigger_mode="always_last", concurrency_limit=4, show_progress="minimal")
    gr.on([demo.load, bpe_run.click, bpe_table.submit], bpe_trace, inputs=[bpe_table, bpe_merges],
          outputs=[merges_table, bpe_step, bpe_pairs, bpe_state_view, bpe_trace_state, bpe_file, bpe_json],
          api_name="bpe_trace")
    bpe_step.change(bpe_show_step, inputs=[bpe_trace_state, bpe_step], outputs=[bpe_pairs, bpe_state_view],
                    api_visibility="private", trigger_mode="always_last", show_progress="hidden")
    gr.on([demo.load, bpe_seg_run.click, bpe_words.submit], bpe_segment, inputs=[bpe_table, bpe_merges, bpe_words],
          outputs=[bpe_seg_view, bpe_seg_json], api_name="bpe_segment")
    gr.on([demo.load, split_run.click, split_text.submit, wp_source.change], explain_split,
          inputs=[split_text, wp_source], outputs=[wp_view, uni_view, split_json], api_name="explain_split")
    gr.on([demo.load, sentence.change, norm_steps.change], normalize_text, inputs=[sentence, norm_steps],
          outputs=[norm_view, norm_json], api_name="normalize", trigger_mode="always_last", show_progress="hidden")
