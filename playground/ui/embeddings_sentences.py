"""The Embeddings tab's sentence views: sentence space (SBERT pooling, similarity, semantic search) and the
classic representations of the same sentences (one-hot, bag of words, TF-IDF)."""

from __future__ import annotations

import gradio as gr

from playground.analysis import models
from playground.analysis.embeddings import EmbeddingError, classic as cl, encoders, sentences as sn
from playground.figures import embeddings as fe
from playground.ui.common import FIGURE, LATEX, Shared, json_file, text_input, warn
from playground.ui.embeddings_context import encoder

MAX_SENTENCES = 200        # sentence space: more than this is cut with a notice
MAX_CLASSIC_SENTENCES = 20   # the classic tables: one row per sentence
SENTENCE_MODELS = {
    "minilm": "all-MiniLM-L6-v2 through our BERT encoder (shared with the Attention tab)",
    "sentence-transformers": "all-MiniLM-L6-v2 through the sentence-transformers library (first use loads it, ~5 s)",
    "bert": "our BERT (bert-english) wrapped as a SentenceTransformer: pre-trained here, never trained for sentence "
            "similarity (its first use imports sentence-transformers: seconds)",
}


def _sentences(sentences, notices: list[str]) -> list[str]:
    if isinstance(sentences, (list, tuple)):
        sentences = "\n".join(str(s) for s in sentences)
    lines = [s.strip() for s in text_input(sentences, notices, 200_000).splitlines()]
    empty = sum(1 for s in lines if not s)
    lines = [s for s in lines if s]
    if empty and lines:
        notices.append(f"{empty} empty line(s) skipped.")
    if len(lines) > MAX_SENTENCES:
        notices.append(f"{len(lines):,} sentences; the first {MAX_SENTENCES} are used.")
        lines = lines[:MAX_SENTENCES]
    return lines


def _sentence_model(model, pooling) -> None:
    if model not in SENTENCE_MODELS:
        raise gr.Error(f"Unknown model {model!r}; choose from {', '.join(SENTENCE_MODELS)}.")
    if pooling not in encoders.POOLINGS:
        raise gr.Error(f"Unknown pooling {pooling!r}; choose from {', '.join(encoders.POOLINGS)}.")
    if model != "sentence-transformers":
        encoder(model)


def embed_sentences(sentences, model="minilm", pooling="mean"):
    """Sentence embeddings (SBERT pooling), a 2D projection and the cosine similarity matrix."""
    notices: list[str] = []
    lines = _sentences(sentences, notices)
    if len(lines) < 2:
        raise gr.Error("Type at least two sentences, one per line, to compare them.")
    _sentence_model(model, pooling)
    try:
        v = sn.view(lines, model, pooling, notices)
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    heat = fe.similarity_figure([f"{i + 1}. {s}" for i, s in enumerate(lines)], v.similarity,
                                f"Cosine similarity ({pooling} pooling)")
    scatter = fe.scatter_figure([str(i + 1) for i in range(len(lines))], v.coords, ["sentences"] * len(lines),
                                f"{len(lines)} sentences, {pooling} pooling (PCA of {v.vectors.shape[1]} dimensions)",
                                v.vectors)
    warn(notices)
    return scatter, heat, json_file(v.data, "embed-sentences"), v.data


def semantic_search(query, sentences, model="minilm", pooling="mean"):
    """The sentences ranked by cosine with the query."""
    notices: list[str] = []
    query = text_input(query, notices, 2_000).strip()
    if not query:
        raise gr.Error("Type a query to search the sentences with.")
    lines = _sentences(sentences, notices)
    if not lines:
        raise gr.Error("There are no sentences to search: type some, one per line.")
    _sentence_model(model, pooling)
    try:
        data = sn.search(query, lines, model, pooling, notices)
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    return fe.search_html(query, data["results"][:5]), data


def classic(sentences):
    """One-hot, bag of words and TF-IDF for the sentences, and what they miss."""
    notices: list[str] = []
    lines = _sentences(sentences, notices)[:MAX_CLASSIC_SENTENCES]
    if not lines:
        raise gr.Error("Type some sentences, one per line.")
    try:
        v = cl.view(lines)
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    r, vocab, names = v.arrays, v.data["vocabulary"], [f"{i + 1}" for i in range(len(lines))]
    one_hot = fe.table_html(vocab, r["one_hot"][0][:30], r["tokens"][0][:30],
                            "One-hot: sentence 1, one row per word, one column per vocabulary word")
    bow = fe.table_html(vocab, r["bag_of_words"].tolist(), names, "Bag of words: counts per sentence")
    tfidf = fe.table_html(vocab, r["tfidf"].tolist(), names, "TF-IDF, rows of length 1")
    warn(notices)
    return fe.classic_md(v.same_bag, v.disjoint), one_hot, bow, tfidf, v.data


SENTENCE_MD = r"""**Sentence embeddings** (SBERT, Reimers & Gurevych 2019): run the encoder, then pool its last layer's
token vectors into one: the **mean** over the real tokens (what all-MiniLM-L6-v2 was trained with), the **max** of
each dimension, or the **[CLS]** vector; then scale to length 1, so the dot product is the cosine. Similar
meanings land close even without shared words; the semantic search ranks your sentences by cosine with a query."""


def build(shared: Shared) -> gr.Textbox:
    """Sentence space: SBERT embeddings, their similarity and a semantic search; returns the sentences box
    (the classic sub-tab counts the same sentences)."""
    with gr.Tab("Sentence space") as tab:
        gr.Markdown(SENTENCE_MD, latex_delimiters=LATEX)
        with gr.Row():
            sentences = gr.Textbox("\n".join(sn.SENTENCES), lines=8, max_lines=20, scale=3,
                                   label="Sentences (one per line)", elem_id="emb-sentences")
            with gr.Column(scale=1):
                model = gr.Dropdown([(v, k) for k, v in SENTENCE_MODELS.items()
                                     if k != "bert" or models.resolve("bert-english")],
                                    value="minilm", label="Model")
                pooling = gr.Radio([("mean", "mean"), ("max", "max"), ("[CLS]", "cls")], value="mean",
                                   label="Pooling")
                add = gr.Button("Add the sentence typed above", size="sm")
                run = gr.Button("Embed", variant="primary")
        with gr.Row():
            plot = gr.Plot(label="Sentence space")
            heat = gr.Plot(label="Similarity", elem_id="emb-sent-heat")
        with gr.Row():
            query = gr.Textbox("Where can I keep my savings?", label="Semantic search: query", scale=3)
            search = gr.Button("Search", scale=1)
        hits = gr.HTML(elem_classes=FIGURE)
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            file = gr.DownloadButton("Download JSON", size="sm")
            data = gr.JSON(label="embed_sentences")
            search_data = gr.JSON(label="semantic_search")
    gr.on([tab.select, run.click, model.change, pooling.change], embed_sentences,
          inputs=[sentences, model, pooling], outputs=[plot, heat, file, data], api_name="embed_sentences",
          trigger_mode="always_last", show_progress="minimal")
    gr.on([tab.select, search.click, query.submit], semantic_search, inputs=[query, sentences, model, pooling],
          outputs=[hits, search_data], api_name="semantic_search", trigger_mode="always_last",
          show_progress="minimal")
    add.click(lambda s, text: (text.rstrip("\n") + "\n" + (s or "").strip()).strip("\n") if (s or "").strip() else text,
              inputs=[shared.text, sentences], outputs=sentences, api_visibility="private", queue=False)
    return sentences


def build_classic(sentences: gr.Textbox) -> None:
    """One-hot, bag of words, TF-IDF of the sentence space's sentences."""
    with gr.Tab("One-hot, bag of words, TF-IDF") as tab:
        gr.Markdown("The same sentences as the sentence space, counted the classic way: one column per word "
                    "of their vocabulary. $\\mathrm{tfidf}(s, w) = \\mathrm{tf}(s, w)\\,(\\ln\\frac{1+n}{1+df(w)} "
                    "+ 1)$, each row scaled to length 1.", latex_delimiters=LATEX)
        md = gr.Markdown()
        one_hot, bow, tfidf = (gr.HTML(elem_classes=FIGURE) for _ in range(3))
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            data = gr.JSON(label="classic")
    gr.on([tab.select], classic, inputs=sentences, outputs=[md, one_hot, bow, tfidf, data],
          api_name="classic", trigger_mode="always_last", show_progress="minimal")
