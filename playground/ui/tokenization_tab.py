"""The Tokenization tab: six tokenizers side by side, real LLM vocabularies side by side (and what a language pays for
its script), classic BPE step by step, why WordPiece and Unigram split a word as they do, and classic text
normalisation."""

from __future__ import annotations

import gradio as gr

from playground.analysis import lemmatize, normalize, subwords, tokenization
from playground.analysis import vocabularies as vocab
from playground.figures import tokenization as ft
from playground.figures import vocabularies as fv
from playground.ui.common import (FIGURE, LATEX, Shared, as_int, chosen, json_file, left_out,
                                  refuse_missing_smollm2, smollm2_said_missing, text_input, things_to_try, warn)

DEFAULT_BPE_TABLE = "low 5\nlower 2\nnewest 6\nwidest 3\nhighest 2"  # the lecture's worked example
VOCAB_MIN, VOCAB_MAX = 300, 30_000

TOKENIZERS = tokenization.load_all()  # the registry's tokenizers, each read on first use, read-only


# ---------------------------------------------------------------------------------------------
# Handlers


def tokenize(text, names, retrain=False, vocab_size=2_000):
    """Every chosen tokenizer on one text: coloured spans, counts, a table, and the data. With
    `retrain`, BPE, WordPiece and Unigram are retrained at `vocab_size` first; a Unigram that still
    has to train follows the others (see tokenization.compare)."""
    notices: list[str] = []
    text = text_input(text, notices)
    names = [names] if isinstance(names, str) else list(names or [])
    for name in names:
        refuse_missing_smollm2(name)
    keys = [tokenization.key(name) for name in names]  # a registry model's id names its tokenizer too
    names = chosen([k for i, k in enumerate(keys) if k not in keys[:i]], TOKENIZERS, "tokenizer")
    size = as_int(vocab_size, "Vocabulary size", VOCAB_MIN, VOCAB_MAX, notices) if retrain else None
    warn(notices)
    for data in tokenization.compare(TOKENIZERS, text, names, size, notices):
        yield (ft.tokens_html(data), ft.token_count_figure(data["tokenizers"]), ft.tokens_table(data),
               json_file(data, "tokenize"), data)


def vocabularies(text):
    """The text in each real LLM vocabulary side by side, and the premium each language of the multilingual sample
    pays in each (computed once per process): tokens, the table, the premium heatmap and its text alternative."""
    notices: list[str] = []
    text = text_input(text, notices)
    warn(notices)
    data = vocab.view(text, notices)
    return (ft.tokens_html(data), fv.text_markdown(data), fv.premium_figure(data["sample"]),
            fv.premium_markdown(data["sample"]), json_file(data, "vocabularies"), data)


def _bpe_inputs(table, num_merges, notices: list[str]) -> tuple[str | None, int]:
    if table is not None and not isinstance(table, str):
        raise gr.Error("The frequency table should be text: one 'word count' per line.")
    return table, as_int(num_merges, "Number of merges", 0, subwords.MAX_MERGES, notices)


def bpe_trace(table, num_merges):
    """Sennrich et al.'s BPE learning on the user's table, every step kept for the step slider."""
    notices: list[str] = []
    table, num_merges = _bpe_inputs(table, num_merges, notices)
    try:
        trace = subwords.trace(table, num_merges)
    except ValueError as err:
        raise gr.Error(str(err)) from None
    if trace["stopped"]:
        notices.append(trace["stopped"].capitalize() + ".")
    warn(notices)
    last = len(trace["merges"])
    step = gr.Slider(minimum=0, maximum=max(last, 1), value=last, step=1, label="Show step", interactive=last > 0)
    return (ft.merges_table(trace), step, ft.bpe_pairs_figure(trace, last), ft.bpe_step_html(trace, last), trace,
            json_file(trace, "bpe-trace"), trace)


def bpe_show_step(trace, step):
    """The step slider: pair counts and symbols after `step` merges of this user's trace."""
    if not trace:
        return ft.bpe_pairs_figure({"steps": []}, 0), ""
    step = as_int(step, "Step", 0, len(trace["steps"]), [])
    return ft.bpe_pairs_figure(trace, step), ft.bpe_step_html(trace, step)


def bpe_segment(table, num_merges, words):
    """Segment new words with the merges learned from the table: an unseen word is still covered."""
    notices: list[str] = []
    table, num_merges = _bpe_inputs(table, num_merges, notices)
    words = text_input(words, notices, max_chars=2_000)
    try:
        data = subwords.segment(table, num_merges, words)
    except ValueError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    return ft.bpe_segment_html(data["words"]), data


def explain_split(text, wordpiece="wordpiece"):
    """Why WordPiece and Unigram split each word as they do."""
    notices: list[str] = []
    text = text_input(text, notices, max_chars=1_000)
    if wordpiece not in ("wordpiece", "minilm"):
        raise gr.Error("WordPiece vocabulary should be 'wordpiece' (ours) or 'minilm' (pretrained).")
    if not text.strip():
        raise gr.Error("Type a word or two to explain, e.g. 'unaffable tokenization'.")
    for key in (wordpiece, "unigram"):
        if key not in TOKENIZERS:
            raise left_out(tokenization.SPECS[key].model, f"{tokenization.SPECS[key].label} tokenizer")
    warn(notices)
    data = subwords.explain(TOKENIZERS[wordpiece], TOKENIZERS["unigram"], text)
    return ft.wordpiece_html(data["wordpiece"]), ft.unigram_html(data["unigram"]), data


def normalize_text(text, steps):
    """Lowercasing, punctuation and stop-word removal, stemming: each stage's tokens."""
    notices: list[str] = []
    text = text_input(text, notices)
    steps = [steps] if isinstance(steps, str) else list(steps or [])
    try:
        data = normalize.apply(text, steps)
    except ValueError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    return ft.normalize_html(data["stages"]), data


def lemmatize_text(text, pos="auto"):
    """The lecture's stemmer row and lemmatizer row for the text, each word's part of speech chosen by `pos`."""
    notices: list[str] = []
    text = text_input(text, notices)
    if pos not in lemmatize.MODES:
        raise gr.Error(f"Part of speech should be one of {', '.join(lemmatize.MODES)} (auto: guessed per word).")
    data = normalize.stem_and_lemmatize(text, pos)
    if not data["words"]:
        notices.append("No words to lemmatize: type a sentence, e.g. 'Running was considered better than going "
                       "to gym.'")
    warn(notices)
    return ft.lemma_table_html(data), data


# ---------------------------------------------------------------------------------------------
# Layout and events


def by_key(preprocess):
    """The tokenizers' CheckboxGroup's preprocess, reading a tokenizer's registry model id (`tok-bpe`,
    `smollm2-135m-instruct`) from an API caller as an alias of its key first: gradio refuses any value not among the
    choices before the handler sees it. The page, the config and /gradio_api/info still show the keys alone. (An
    instance's method, not a subclass: gradio writes a .pyi file beside any module that defines a component class.)"""
    def aliased(payload):
        return preprocess([tokenization.key(name) for name in payload] if isinstance(payload, list) else payload)

    return aliased


TOKENIZERS_MD = """The first five were trained on the same 24.5 MB of English (Austen, the World English Bible, WordNet
glosses, the Jargon File, Shakespeare); then two real vocabularies: all-MiniLM-L6-v2's (bert-base-uncased) and
SmolLM2-135M's (a byte-level BPE of 49,152 tokens, which puts every digit in a token of its own).
**Character** and **word** tokenizers know a fixed list and map everything else to `[UNK]` (striped red).
**Byte-level BPE** works on UTF-8 bytes, so nothing is unknown: an emoji costs several byte tokens (underlined as one
character). **WordPiece** lowercases, strips accents and marks word-inner pieces with `##`; grey text is what its
pre-tokenizer drops. **Unigram** keeps the space as `▁` inside the next piece, so decoding gives the text back."""

VOCAB_MD = """Three vocabularies of LLMs in use: **SmolLM2**'s 49,152 byte-level BPE tokens, OpenAI's **cl100k_base**
(100,256 tokens: GPT-4, GPT-3.5-turbo) and **o200k_base** (199,998: GPT-4o, o1), the last two converted from their ranks
and checked id for id against OpenAI's own tokenizer, tiktoken. Your text first, in each; then the same text, the
Universal Declaration of Human Rights, in 15 languages: the **premium** is how many times English's token count a
language needs for the same content, so how much more of the context, the time and the price. *Bytes per token*: the
UTF-8 bytes each token covers (a Latin letter is 1 byte; Cyrillic, Greek, Arabic and Hebrew 2; Devanagari, Thai, Han,
kana and Hangul 3). *Tokens per word* counts space-separated words; Thai, Chinese and Japanese put no spaces between
words, so they get *tokens per character* instead (in the table below the figure)."""

BPE_MD = """**Byte-pair encoding** (Sennrich et al. 2016, Algorithm 1). Split each word into characters plus the
end-of-word marker `</w>`; then repeat: count every adjacent pair of symbols, weighted by the word's count, and merge
the most frequent pair everywhere into a new symbol. **Ties** go to the pair counted first, reading the table top to
bottom and each word left to right (what `max()` does over the insertion-ordered dictionary of the paper's reference
code). A new word is segmented by applying the learned merges in the order they were learned."""

SPLIT_MD = """**WordPiece** splits a word greedily: at each position it takes the *longest* vocabulary entry that
matches (`##` marks a piece inside a word) and moves on; if some position matches nothing, the whole word is `[UNK]`.
**Unigram** scores every way to cut the word into vocabulary pieces by $\\log P(\\mathbf{x}) = \\sum_i \\log p(x_i)$ and
outputs the best, $\\mathbf{x}^* = \\arg\\max_{\\mathbf{x} \\in S(w)} \\log P(\\mathbf{x})$ (Kudo 2018), found by
dynamic programming over the lattice of pieces. Below, the five most probable segmentations of each word."""

NORMALIZE_MD = """Classic preprocessing for bag-of-words models, applied in this order. It shrinks the vocabulary
(compare *distinct*), but it throws information away: stop-word lists drop *not*, stemming conflates words, lowercasing
merges *US* and *us*. Neural tokenizers keep the raw text instead (WordPiece uncased still lowercases).
**Stemming** (Porter 1980) chops suffixes by rule and may leave a non-word (*consid*); **lemmatization** (WordNet's
morphy: its lists of irregular forms, then its suffix rules, each candidate checked against WordNet's dictionary)
returns a dictionary form, but needs each word's part of speech: *better* is *good* as an adjective. The lemmatizer
row reads the stage before stemming, so the two stand side by side."""

LEMMA_MD = """**Part of speech.** *auto* guesses each word's part of speech without reading its context: the one under
which WordNet's lemma of the word was sense-tagged most often in its semantic concordance (a most-frequent-tag
baseline, not a tagger: *running* is always a verb; its accuracy on running text is not measured, for want of a
tagged corpus offline). Or read every word as one part of speech (NLTK's `WordNetLemmatizer` reads nouns by
default). Words WordNet does not know (*than*, *to*) stay as they are."""


TRY = [("a typo", ["I recieved teh pacakge yesterdya, thnaks!"]),
       ("numbers", ["In 2024, 1,234,567 people paid $3.50 each: 4,320,984.50 in all."]),
       ("a long German word", ["Der Donaudampfschifffahrtskapitän grüßt die Passagiere."]),
       ("strawberry", ["How many r's are in the word strawberry?"]),
       ("code", ["def square(x): return x ** 2  # 🐍"])]


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's four sub-tabs, each with its components and events."""
    things_to_try(TRY, [shared.text])
    with gr.Tabs():
        with gr.Tab("Compare tokenizers"):
            _compare_tokenizers(demo, shared)
        with gr.Tab("Real vocabularies, side by side"):
            _real_vocabularies(demo, shared)
        with gr.Tab("Classic BPE, step by step"):
            _classic_bpe(demo)
        with gr.Tab("Why this split? WordPiece and Unigram"):
            _why_this_split(demo)
        with gr.Tab("Normalisation"):
            _normalisation(demo, shared)


def _compare_tokenizers(demo: gr.Blocks, shared: Shared) -> None:
    sentence = shared.text  # the committed sentence, shared by every tab (see Shared)
    gr.Markdown(TOKENIZERS_MD)
    with gr.Row():
        names = gr.CheckboxGroup([(tokenization.SPECS[key].label, key) for key in TOKENIZERS],
                                 value=list(TOKENIZERS), label="Tokenizers", scale=3)
        names.preprocess = by_key(smollm2_said_missing(names.preprocess))
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
    shared.remember("tok", names=names, retrain=retrain, vocab=vocab)
    gr.on([demo.load, shared.changed("restored"), shared.changed("text"), names.change, retrain.change, vocab.release],
          tokenize,
          inputs=[sentence, names, retrain, vocab], outputs=[tokens_view, counts_plot, table, tokens_file, tokens_json],
          api_name="tokenize", trigger_mode="always_last", show_progress="minimal")


def _real_vocabularies(demo: gr.Blocks, shared: Shared) -> None:
    gr.Markdown(VOCAB_MD)
    tokens_view = gr.HTML(elem_id="voc-tokens", elem_classes=FIGURE, js_on_load=ft.TOKEN_HOVER_JS)
    counts = gr.Markdown(elem_id="voc-counts")
    premium = gr.Plot(label="The premium: tokens per language, relative to English", elem_id="voc-premium")
    with gr.Accordion("Text alternative: the numbers behind the figure", open=False):
        table = gr.Markdown(elem_id="voc-table")
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        file = gr.DownloadButton("Download JSON", size="sm")
        data = gr.JSON(label="vocabularies")
    gr.on([demo.load, shared.changed("restored"), shared.changed("text")], vocabularies, inputs=[shared.text],
          outputs=[tokens_view, counts, premium, table, file, data], api_name="vocabularies",
          trigger_mode="always_last", show_progress="minimal")


def _classic_bpe(demo: gr.Blocks) -> None:
    gr.Markdown(BPE_MD)
    with gr.Row():
        bpe_table = gr.Textbox(DEFAULT_BPE_TABLE, label="Word frequencies: 'word count' per line", lines=8,
                               max_lines=20)
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
    gr.on([demo.load, bpe_run.click, bpe_table.submit], bpe_trace, inputs=[bpe_table, bpe_merges],
          outputs=[merges_table, bpe_step, bpe_pairs, bpe_state_view, bpe_trace_state, bpe_file, bpe_json],
          api_name="bpe_trace")
    bpe_step.change(bpe_show_step, inputs=[bpe_trace_state, bpe_step], outputs=[bpe_pairs, bpe_state_view],
                    api_visibility="private", trigger_mode="always_last", show_progress="hidden")
    gr.on([demo.load, bpe_seg_run.click, bpe_words.submit], bpe_segment, inputs=[bpe_table, bpe_merges, bpe_words],
          outputs=[bpe_seg_view, bpe_seg_json], api_name="bpe_segment")


def _why_this_split(demo: gr.Blocks) -> None:
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
    gr.on([demo.load, split_run.click, split_text.submit, wp_source.change], explain_split,
          inputs=[split_text, wp_source], outputs=[wp_view, uni_view, split_json], api_name="explain_split")


def _normalisation(demo: gr.Blocks, shared: Shared) -> None:
    gr.Markdown(NORMALIZE_MD)
    norm_steps = gr.CheckboxGroup([(normalize.STEP_LABELS[s], s) for s in normalize.STEPS],
                                  value=list(normalize.STEPS), label="Steps (applied top to bottom)")
    norm_view = gr.HTML(elem_classes=FIGURE)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        norm_json = gr.JSON(label="normalize")
    gr.on([demo.load, shared.changed("text"), norm_steps.change], normalize_text, inputs=[shared.text, norm_steps],
          outputs=[norm_view, norm_json], api_name="normalize", trigger_mode="always_last", show_progress="hidden")
    gr.Markdown(LEMMA_MD)
    lemma_pos = gr.Radio([("auto (WordNet's tag counts)", "auto")]
                         + [(f"every word a {lemmatize.POS_LABELS[p]}", p) for p in lemmatize.POS],
                         value="auto", label="Part of speech for the lemmatizer")
    lemma_view = gr.HTML(elem_classes=FIGURE)
    with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
        lemma_json = gr.JSON(label="lemmatize")
    gr.on([demo.load, shared.changed("text"), lemma_pos.change], lemmatize_text, inputs=[shared.text, lemma_pos],
          outputs=[lemma_view, lemma_json], api_name="lemmatize", trigger_mode="always_last", show_progress="hidden")
