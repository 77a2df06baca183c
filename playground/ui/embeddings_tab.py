"""The Embeddings tab: from one-hot and counts to learned dense vectors, to vectors that depend on context,
to sentence vectors you can search with.

Word space (our word2vec, MiniLM's input embeddings, our GPT's characters: PCA / t-SNE / UMAP in 2D or 3D,
neighbours, analogies, the same words in another embedding), contextual embeddings (one word in several
sentences at a chosen MiniLM layer), sentence space (SBERT pooling, similarity, semantic search), and the
classic representations (one-hot, bag of words, TF-IDF). Nothing is loaded at import: word2vec's
8 MB loads on first use, MiniLM is the encoder the Attention tab already loaded.
"""

from __future__ import annotations

import re

import gradio as gr
import numpy as np

from playground import checkpoints
from playground.analysis import focus
from playground.analysis import embeddings as emb
from playground.figures import embeddings as fe
from playground.ui.common import FIGURE, LATEX, Shared, as_int, json_file, text_input, warn

MAX_NEIGHBOUR_WORDS = 20   # the neighbours table covers the first 20 words (each is a scan of the vocabulary)
K_NEIGHBOURS = 8
SELECTED = "selected:"       # the set that holds the word selected in the shared sentence
MAX_SENTENCES = 200        # sentence space: more than this is cut with a notice
MAX_CONTEXT_SENTENCES = 20
SENTENCE_MODELS = {
    "minilm": "all-MiniLM-L6-v2 through our BERT encoder (shared with the Attention tab)",
    "sentence-transformers": "all-MiniLM-L6-v2 through the sentence-transformers library (first use loads it, ~5 s)",
    "bert": "our BERT (bert-english) wrapped as a SentenceTransformer: pre-trained here, never trained for sentence "
            "similarity (its first use imports sentence-transformers: seconds)",
}
METHOD_LABELS = {"pca": "PCA", "tsne": "t-SNE", "umap": "UMAP"}
DEFAULT_WORDS = "\n".join(f"{name}: {', '.join(words)}" for name, words in emb.PRESETS.items()
                          if name in ("animals", "countries", "numbers", "family"))


# ---------------------------------------------------------------------------------------------
# Parsing the inputs


def parse_words(text, notices: list[str]) -> tuple[list[str], list[str]]:
    """Lines of words, split on commas and spaces; a line `name: w1, w2` makes a set of that name (the
    colour), other words belong to a preset set when they are in one, else to "your words". At most
    MAX_WORDS words (cut with a notice)."""
    text = text_input(text, notices, max_chars=400_000)
    words, groups = [], []
    preset_of = {w: name for name, ws in emb.PRESETS.items() for w in ws}
    for line in text.splitlines():
        group = None
        head = re.match(r"\s*([^:,]{1,40}):(.*)$", line)
        if head:
            group, line = head.group(1).strip(), head.group(2)
        for w in re.split(r"[,\s]+", line):
            w = w.strip().strip(".;!?\"'()[]")
            if w:
                words.append(w)
                groups.append(group or preset_of.get(w.lower(), "your words"))
    if len(words) > emb.MAX_WORDS:
        notices.append(f"{len(words):,} words were given; the first {emb.MAX_WORDS:,} are shown "
                       f"(the scatter stays interactive up to that many).")
        words, groups = words[: emb.MAX_WORDS], groups[: emb.MAX_WORDS]
    return words, groups


SOURCE_LABELS = {"word2vec": "our word2vec", "minilm": "MiniLM input embeddings",
                 "bert": "our BERT's input embeddings", "gpt": "our GPT's characters"}


def _space(source) -> emb.WordSpace:
    loaders = {"word2vec": emb.word2vec_space, "minilm": emb.minilm_space, "bert": emb.bert_space,
               "gpt": emb.gpt_space}
    space = loaders[source]() if source in loaders else None
    if space is None:
        raise gr.Error(f"Unknown or unavailable embedding {source!r}; choose from {', '.join(emb.space_keys())}.")
    return space


def _method(method, notices: list[str]) -> str:
    if method not in emb.METHODS:
        raise gr.Error(f"Unknown method {method!r}; choose from {', '.join(emb.METHODS)}.")
    if method == "umap" and not emb.umap_available():
        notices.append("UMAP needs the umap-learn package, which is not installed here; showing t-SNE instead.")
        return "tsne"
    return method


def _dims(dims, notices: list[str]) -> int:
    if isinstance(dims, str) and dims.strip().lower() in ("2d", "3d"):
        dims = dims.strip()[0]
    return as_int(dims, "Dimensions", 2, 3, notices)


def _lookup_notices(found: emb.Lookup, space: emb.WordSpace, notices: list[str]) -> None:
    if found.duplicates:
        notices.append(f"Given more than once (shown once): {', '.join(sorted(set(found.duplicates))[:20])}.")
    if found.unknown:
        more = f" and {len(found.unknown) - 30:,} more" if len(found.unknown) > 30 else ""
        notices.append(f"Not in {space.key}'s vocabulary, left out: {', '.join(found.unknown[:30])}{more}"
                       + (" (word2vec has one vector per word it saw in training and nothing for the others)."
                          if space.key == "word2vec" else "."))
    if found.composed:
        shown = "; ".join(f"{w} = mean({' '.join(p)})" for w, p in list(found.composed.items())[:8])
        notices.append(f"Not single tokens of {space.key}, built from their pieces as FastText does: {shown}.")


# ---------------------------------------------------------------------------------------------
# Handlers


def embed_words(words, source="word2vec", method="pca", dims=3, progress=gr.Progress()):
    """The words' vectors in one embedding, projected to 2D or 3D; each word's nearest neighbours."""
    notices: list[str] = []
    space = _space(source)
    method = _method(method, notices)
    dims = _dims(dims, notices)
    given, groups = parse_words(words, notices)
    if not given:
        raise gr.Error("Type some words (or pick a preset set) to place them in the embedding space.")
    found = emb.lookup(space, given)
    _lookup_notices(found, space, notices)
    if len(found.words) < 3:
        raise gr.Error(f"A projection needs at least three different known words; {len(found.words)} of these "
                       f"({', '.join(found.words) or 'none'}) have a vector in {space.key}.")
    group_of = {}
    for w, g in zip(given, groups):
        group_of.setdefault(w.strip().lower() if space.lowercase else w.strip(), g)
    word_groups = [group_of.get(w, "your words") for w in found.words]

    def report(fraction, text):
        progress(fraction, desc=text)

    try:
        Y, info = emb.project(found.vectors, method, dims, cache_key=(space.key, tuple(found.words)),
                              progress=report if method != "pca" else None)
    except RuntimeError as err:
        raise gr.Error(str(err)) from None
    nb = [{"word": w, "neighbours": [[n, round(s, 4)] for n, s in emb.neighbours(space, v, K_NEIGHBOURS)]}
          for w, v in zip(found.words[:MAX_NEIGHBOUR_WORDS], found.vectors[:MAX_NEIGHBOUR_WORDS])]
    caption = f"Nearest neighbours by cosine in {space.key} (the word itself first, at 1.00)"
    if len(found.words) > MAX_NEIGHBOUR_WORDS:  # said in the caption: a pop-up on every page load would nag
        caption += f"; the first {MAX_NEIGHBOUR_WORDS} of {len(found.words):,} words (all are in the plot)"
    label = METHOD_LABELS[method]
    title = f"{len(found.words):,} words, {space.key}, {label} {dims}D"
    if method == "pca":
        title += f" ({100 * sum(info['explained_variance_ratio']):.0f}% of the variance)"
    notes = {w: f"from pieces {' '.join(p)}" for w, p in found.composed.items()}
    fig = fe.scatter_figure(found.words, Y, word_groups, title, found.vectors, notes)
    table = fe.neighbours_html(nb, caption)
    axes = ("x", "y", "z")[:dims]
    points = [{"word": w, "set": g, **{a: round(float(c), 5) for a, c in zip(axes, row)}}
              for w, g, row in zip(found.words, word_groups, Y)]
    data = {"source": space.key, "method": method, "dims": dims, "projection": info, "points": points,
            "neighbours": {r["word"]: r["neighbours"] for r in nb}, "unknown": found.unknown,
            "composed": found.composed, "duplicates": sorted(set(found.duplicates)), "notices": notices}
    warn(notices)
    return fig, table, json_file(data, "embed-words"), data


def analogy(a, b, c, source="word2vec"):
    """a − b + c: the nearest words to the arithmetic, inputs excluded."""
    notices: list[str] = []
    space = _space(source)
    words = [text_input(x, notices, 100).strip() for x in (a, b, c)]
    if not all(words):
        raise gr.Error("Fill in the three words of the analogy (a − b + c, e.g. king − man + woman).")
    result = emb.analogy(space, *words, k=5)
    if result["unknown"]:
        raise gr.Error(f"Not in {space.key}'s vocabulary: {', '.join(result['unknown'])}.")
    if not result["answers"]:
        raise gr.Error("The three words must be different.")
    if result.get("composed"):
        notices.append("Built from pieces: " + "; ".join(f"{w} = mean({' '.join(p)})"
                                                      for w, p in result["composed"].items()))
    warn(notices)
    q = result["query"]
    lines = "\n".join(f"| {i + 1} | **{r['word']}** | {r['score']:.3f} |" for i, r in enumerate(result["answers"]))
    md = (f"**{q[0]} − {q[1]} + {q[2]}** in {space.key} (cosine with the unit-length sum; the three inputs are "
          f"excluded, as in Mikolov et al. 2013):\n\n| rank | word | cosine |\n|---|---|---|\n{lines}")
    data = {"source": space.key, **result}
    return md, data


def _encoder(model) -> emb.Encoder:
    m = emb.encoder(model) if model in emb.ENCODERS else None
    if m is None:
        raise gr.Error(f"Unknown or unavailable encoder {model!r}; choose from {', '.join(emb.ENCODERS)}.")
    return m


def contextual(word, sentences, layer=4, model="minilm"):
    """One word in several sentences, through MiniLM (or our BERT) at the chosen layer: its vectors and
    their similarity."""
    notices: list[str] = []
    m = _encoder(model)
    word = text_input(word, notices, 60).strip()
    if not word or not re.fullmatch(r"[^\W\d_][\w'-]*", word):
        raise gr.Error("Type one word (letters) to follow through the sentences, e.g. bank.")
    lines = [s.strip() for s in text_input(sentences, notices, 20_000).splitlines() if s.strip()]
    if len(lines) > MAX_CONTEXT_SENTENCES:
        notices.append(f"The first {MAX_CONTEXT_SENTENCES} sentences are used.")
        lines = lines[:MAX_CONTEXT_SENTENCES]
    layer = as_int(layer, "Layer", 0, m.n_layer, notices)
    result = emb.contextual(word, lines, layer, m.key)
    if result["missing"]:
        notices.append(f"{word!r} does not occur in {len(result['missing'])} sentence(s), left out: "
                       + "; ".join(s[:50] for s in result["missing"][:5]))
    if len(result["sentences"]) < 2:
        raise gr.Error(f"Give at least two sentences that contain {word!r} (one per line).")
    labels = [f"{i + 1}. {s}" for i, s in enumerate(result["sentences"])]
    sim = result["similarity"]
    heat = fe.similarity_figure(labels, sim, f"{word!r} at {m.key} layer {layer}: cosine between its vectors")
    X = result["vectors"]
    Y = emb.pca(X, 2)[0] if len(X) >= 2 else np.zeros((len(X), 2), np.float32)
    scatter = fe.scatter_figure([str(i + 1) for i in range(len(X))], Y, ["sentences"] * len(X),
                                f"{word!r} in each sentence, layer {layer} (PCA)", X)
    w2v = emb.word2vec_space()
    single = (f"word2vec has one vector for **{word.lower()}** whatever the sentence: every cosine would be 1.00."
              if w2v is not None and word.lower() in w2v.vocab else
              f"word2vec has no vector for {word!r}." if w2v is not None else "")
    off = sim[~np.eye(len(sim), dtype=bool)]
    md = (f"{m.key}, layer {layer} ({'input embeddings + positions' if layer == 0 else f'after block {layer}'}): the "
          f"cosines between the {len(sim)} occurrences range from {off.min():.2f} to {off.max():.2f}. {single}")
    warn(notices)
    data = {"word": word, "model": m.key, "layer": layer, "sentences": result["sentences"],
            "similarity": np.round(sim, 4).tolist(),
            "points": [{"sentence": s, "x": float(y[0]), "y": float(y[1])} for s, y in zip(result["sentences"], Y)],
            "missing": result["missing"]}
    return md, scatter, heat, data


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


def _embed(lines: list[str], model: str, pooling: str, notices: list[str]) -> np.ndarray:
    if model not in SENTENCE_MODELS:
        raise gr.Error(f"Unknown model {model!r}; choose from {', '.join(SENTENCE_MODELS)}.")
    if pooling not in emb.POOLINGS:
        raise gr.Error(f"Unknown pooling {pooling!r}; choose from {', '.join(emb.POOLINGS)}.")
    if model == "sentence-transformers":
        try:
            return emb.sentence_transformers_embed(lines, pooling)
        except ImportError:
            raise gr.Error("The sentence-transformers package is not installed here (pip install "
                           "sentence-transformers); choose the minilm model: the same embeddings.") from None
    m = _encoder(model)
    try:
        X, cut = emb.sentence_embeddings(lines, pooling, model=m.key)
    except ImportError:  # our BERT goes through sentence-transformers
        raise gr.Error("The sentence-transformers package is not installed here (pip install "
                       "sentence-transformers); choose the minilm model.") from None
    if any(cut):
        notices.append(f"{sum(1 for c in cut if c)} sentence(s) longer than {m.max_tokens} tokens were cut.")
    return X


def embed_sentences(sentences, model="minilm", pooling="mean"):
    """Sentence embeddings (SBERT pooling), a 2D projection and the cosine similarity matrix."""
    notices: list[str] = []
    lines = _sentences(sentences, notices)
    if len(lines) < 2:
        raise gr.Error("Type at least two sentences, one per line, to compare them.")
    X = _embed(lines, model, pooling, notices)
    sim = X @ X.T                                                     # unit vectors: cosine
    labels = [f"{i + 1}. {s}" for i, s in enumerate(lines)]
    heat = fe.similarity_figure(labels, sim, f"Cosine similarity ({pooling} pooling)")
    if len(lines) >= 3:
        Y, _ = emb.pca(X, 2)
    else:
        notices.append("Two sentences: the plot needs three points; see the similarity instead.")
        Y = np.zeros((len(lines), 2), np.float32)
    scatter = fe.scatter_figure([str(i + 1) for i in range(len(lines))], Y, ["sentences"] * len(lines),
                                f"{len(lines)} sentences, {pooling} pooling (PCA of {X.shape[1]} dimensions)", X)
    warn(notices)
    data = {"model": model, "pooling": pooling, "sentences": lines,
            "points": [{"sentence": s, "x": round(float(y[0]), 5), "y": round(float(y[1]), 5)}
                       for s, y in zip(lines, Y)],
            "similarity": np.round(sim, 5).tolist(), "notices": notices}
    return scatter, heat, json_file(data, "embed-sentences"), data


def semantic_search(query, sentences, model="minilm", pooling="mean"):
    """The sentences ranked by cosine with the query."""
    notices: list[str] = []
    query = text_input(query, notices, 2_000).strip()
    if not query:
        raise gr.Error("Type a query to search the sentences with.")
    lines = _sentences(sentences, notices)
    if not lines:
        raise gr.Error("There are no sentences to search: type some, one per line.")
    X = _embed([query, *lines], model, pooling, notices)
    hits = [{"sentence": lines[i], "score": round(s, 4)} for i, s in emb.semantic_search(X[0], X[1:], k=len(lines))]
    warn(notices)
    return fe.search_html(query, hits[:5]), {"query": query, "model": model, "pooling": pooling, "results": hits}


def classic(sentences):
    """One-hot, bag of words and TF-IDF for the sentences, and what they miss."""
    notices: list[str] = []
    lines = _sentences(sentences, notices)[:20]
    if not lines:
        raise gr.Error("Type some sentences, one per line.")
    r = emb.classic(lines)
    vocab = r["vocabulary"]
    if not vocab:
        raise gr.Error("These sentences have no words (letters or digits) to count.")
    names = [f"{i + 1}" for i in range(len(lines))]
    first = r["tokens"][0]
    one_hot = fe.table_html(vocab, r["one_hot"][0][:30], first[:30],
                            "One-hot: sentence 1, one row per word, one column per vocabulary word")
    bow = fe.table_html(vocab, r["bag_of_words"].tolist(), names, "Bag of words: counts per sentence")
    tfidf = fe.table_html(vocab, r["tfidf"].tolist(), names, "TF-IDF, rows of length 1")
    same_bag = [(i + 1, j + 1) for i in range(len(lines)) for j in range(i + 1, len(lines))
                if r["bag_of_words"][i].any() and (r["bag_of_words"][i] == r["bag_of_words"][j]).all()]
    disjoint = [(i + 1, j + 1) for i in range(len(lines)) for j in range(i + 1, len(lines))
                if not (np.minimum(r["bag_of_words"][i], r["bag_of_words"][j])).any()]
    md = ["**What they miss.**"]
    if same_bag:
        md.append(f"Sentences {', '.join(f'{a} and {b}' for a, b in same_bag[:5])} have the same bag of words "
                  "(cosine 1.00): word order is gone.")
    else:
        md.append("Word order: reorder a sentence's words and its bag of words does not change.")
    if disjoint:
        md.append(f"Sentences {', '.join(f'{a} and {b}' for a, b in disjoint[:5])} share no word, so their count "
                  "vectors have cosine 0, however close their meaning (synonyms are different columns).")
    warn(notices)
    data = {"sentences": lines, "vocabulary": vocab, "tokens": r["tokens"],
            "bag_of_words": r["bag_of_words"].tolist(), "idf": np.round(r["idf"], 5).tolist(),
            "tfidf": np.round(r["tfidf"], 5).tolist(), "one_hot_sentence_1": r["one_hot"][0]}
    return " ".join(md), one_hot, bow, tfidf, data


# ---------------------------------------------------------------------------------------------
# Layout and events

INTRO_MD = r"""**From counts to learned vectors.** One-hot vectors make every word equally far from every other.
**word2vec** (Mikolov et al. 2013) learns a dense vector $v_w$ per word by predicting its neighbours: skip-gram with
negative sampling minimises $-\log\sigma(v'_{o}\cdot v_{w}) - \sum_{i=1}^{k}\log\sigma(-v'_{n_i}\cdot v_{w})$ over
(word, context) pairs, with $k$ noise words drawn from $U(w)^{3/4}$ and frequent words subsampled. Words used
alike end up close (cosine), and some relations become directions: *king − man + woman ≈ queen*. Our word2vec was
trained here on the English corpus (Austen, the Bible, WordNet glosses, the Jargon File, Shakespeare; see its card).
A BERT's input embeddings are a table of the same kind, over WordPiece tokens."""

CONTEXT_MD = r"""**Contextual embeddings.** word2vec gives *bank* one vector. A Transformer gives each occurrence
its own, mixed with the sentence by attention: follow one word through MiniLM's layers (0: the input embedding
plus position; 6: the last layer), or our small BERT's, and compare its vectors across sentences."""

SENTENCE_MD = r"""**Sentence embeddings** (SBERT, Reimers & Gurevych 2019): run the encoder, then pool its last layer's
token vectors into one: the **mean** over the real tokens (what all-MiniLM-L6-v2 was trained with), the **max** of
each dimension, or the **[CLS]** vector; then scale to length 1, so the dot product is the cosine. Similar
meanings land close even without shared words; the semantic search ranks your sentences by cosine with a query."""


def source_choices() -> list[tuple[str, str]]:
    return [(s.label, key) for key, s in emb.spaces().items()]


def method_choices() -> list[tuple[str, str]]:
    # umap-learn's first call in a process compiles its numba code: ~15 s of CPU (a minute on a busy machine)
    umap = "UMAP (the first call compiles: slow)" if emb.umap_available() else "UMAP (umap-learn not installed: t-SNE)"
    return [("PCA", "pca"), ("t-SNE", "tsne"), (umap, "umap")]


def fill_presets(names):
    names = [n for n in (names or []) if n in emb.PRESETS]
    return "\n".join(f"{n}: {', '.join(emb.PRESETS[n])}" for n in names)


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events; `sentence` is the text shared by every tab (added to the sentence
    list with a button)."""
    sentence = shared.text  # the committed sentence (see Shared)
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    with gr.Tabs():
        with gr.Tab("Word space") as word_tab:
            with gr.Row():
                with gr.Column(scale=2):
                    words = gr.Textbox(DEFAULT_WORDS, lines=5, max_lines=12, elem_id="emb-words",
                                       label="Words (a line 'name: w1, w2, ...' makes a coloured set)")
                    presets = gr.CheckboxGroup(list(emb.PRESETS), value=["animals", "countries", "numbers", "family"],
                                               label="Preset sets")
                    follow = gr.Checkbox(True, label="Add the word selected in the sentence above (as 'selected:')",
                                         elem_id="emb-follow")
                with gr.Column(scale=1):
                    keys = emb.space_keys()
                    source = gr.Dropdown([(SOURCE_LABELS[k], k) for k in keys], value=keys[0], label="Embedding",
                                         elem_id="emb-source")
                    method = gr.Radio(method_choices(), value="pca", label="Projection")
                    dims = gr.Radio([("2D", 2), ("3D", 3)], value=3, label="Dimensions")
                    run = gr.Button("Show", variant="primary")
            word_plot = gr.Plot(label="Word space", elem_id="emb-word-plot")
            neighbours = gr.HTML(elem_id="emb-neighbours", elem_classes=FIGURE)
            with gr.Accordion("Analogy: a − b + c", open=True):
                with gr.Row():
                    an_a = gr.Textbox("king", label="a")
                    an_b = gr.Textbox("man", label="− b")
                    an_c = gr.Textbox("woman", label="+ c")
                    an_run = gr.Button("Solve")
                an_md = gr.Markdown(elem_id="emb-analogy")
                an_json = gr.JSON(label="analogy", visible=False)
            with gr.Accordion("The same words in another embedding", open=False):
                other = gr.Dropdown([(SOURCE_LABELS[k], k) for k in keys], value="minilm", label="Compare with")
                other_plot = gr.Plot(label="Other embedding")
                other_json = gr.JSON(visible=False)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                word_file = gr.DownloadButton("Download JSON", size="sm")
                word_json = gr.JSON(label="embed_words")
        with gr.Tab("Contextual") as ctx_tab:
            gr.Markdown(CONTEXT_MD, latex_delimiters=LATEX)
            with gr.Row():
                ctx_word = gr.Textbox("bank", label="Word", scale=1)
                ctx_model = gr.Dropdown([(label, key) for key, label in emb.ENCODERS.items()
                                         if key == "minilm" or "bert-english" in checkpoints.available()],
                                        value="minilm", label="Encoder", scale=2)
                ctx_layer = gr.Slider(0, 6, value=4, step=1, label="Layer", scale=2)
            ctx_sentences = gr.Textbox("\n".join(emb.CONTEXT_SENTENCES), lines=5, label="Sentences (one per line)")
            ctx_md = gr.Markdown()
            with gr.Row():
                ctx_plot = gr.Plot(label="The word's vectors")
                ctx_heat = gr.Plot(label="Similarity")
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                ctx_json = gr.JSON(label="contextual")
        with gr.Tab("Sentence space") as sent_tab:
            gr.Markdown(SENTENCE_MD, latex_delimiters=LATEX)
            with gr.Row():
                sentences = gr.Textbox("\n".join(emb.SENTENCES), lines=8, max_lines=20, scale=3,
                                       label="Sentences (one per line)", elem_id="emb-sentences")
                with gr.Column(scale=1):
                    s_model = gr.Dropdown([(v, k) for k, v in SENTENCE_MODELS.items()
                                           if k != "bert" or "bert-english" in checkpoints.available()],
                                          value="minilm", label="Model")
                    pooling = gr.Radio([("mean", "mean"), ("max", "max"), ("[CLS]", "cls")], value="mean",
                                       label="Pooling")
                    add = gr.Button("Add the sentence typed above", size="sm")
                    s_run = gr.Button("Embed", variant="primary")
            with gr.Row():
                s_plot = gr.Plot(label="Sentence space")
                s_heat = gr.Plot(label="Similarity", elem_id="emb-sent-heat")
            with gr.Row():
                query = gr.Textbox("Where can I keep my savings?", label="Semantic search: query", scale=3)
                q_run = gr.Button("Search", scale=1)
            hits = gr.HTML(elem_classes=FIGURE)
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                s_file = gr.DownloadButton("Download JSON", size="sm")
                s_json = gr.JSON(label="embed_sentences")
                q_json = gr.JSON(label="semantic_search")
        with gr.Tab("One-hot, bag of words, TF-IDF") as classic_tab:
            gr.Markdown("The same sentences as the sentence space, counted the classic way: one column per word "
                        "of their vocabulary. $\\mathrm{tfidf}(s, w) = \\mathrm{tf}(s, w)\\,(\\ln\\frac{1+n}{1+df(w)} "
                        "+ 1)$, each row scaled to length 1.", latex_delimiters=LATEX)
            c_md = gr.Markdown()
            c_onehot, c_bow, c_tfidf = (gr.HTML(elem_classes=FIGURE) for _ in range(3))
            with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
                c_json = gr.JSON(label="classic")

    presets.input(fill_presets, inputs=presets, outputs=words, api_visibility="private", queue=False)
    word_events = dict(fn=embed_words, inputs=[words, source, method, dims],
                       outputs=[word_plot, neighbours, word_file, word_json], trigger_mode="always_last",
                       concurrency_limit=2, show_progress="minimal")
    shared.remember("emb", source=source, method=method, dims=dims, follow=follow)
    gr.on([demo.load, word_tab.select, run.click, words.submit, source.change, method.change, dims.change],
          api_name="embed_words", **word_events)

    def with_selected(words_, sentence_, focus_, on):
        """The selected word of the sentence as its own set ("selected: word") in the word list."""
        span = focus.parse(focus_, sentence_ or "")
        if span is None or not on:
            return gr.skip()
        kept = [line for line in (words_ or "").splitlines() if not line.startswith(SELECTED)]
        return "\n".join(kept + [f"{SELECTED} {sentence_[span[0]:span[1]].lower()}"])

    shared.focus.change(with_selected, inputs=[words, sentence, shared.focus, follow], outputs=words, queue=False,
                        api_visibility="private", show_progress="hidden").then(
        api_visibility="private", **word_events)
    gr.on([an_run.click, an_a.submit, an_b.submit, an_c.submit, source.change], analogy,
          inputs=[an_a, an_b, an_c, source], outputs=[an_md, an_json], api_name="analogy",
          trigger_mode="always_last")

    def compare(words_, other_, method_, dims_):
        fig, _, _, data = embed_words(words_, other_, method_, dims_)
        return fig, data

    gr.on([other.change, run.click], compare, inputs=[words, other, method, dims], outputs=[other_plot, other_json],
          api_visibility="private", trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    ctx_model.change(lambda key: gr.update(maximum=(emb.encoder(key) or emb.encoder("minilm")).n_layer),
                     inputs=ctx_model, outputs=ctx_layer, api_visibility="private", queue=False)
    gr.on([ctx_tab.select, ctx_word.submit, ctx_layer.release, ctx_sentences.blur, ctx_model.change], contextual,
          inputs=[ctx_word, ctx_sentences, ctx_layer, ctx_model], outputs=[ctx_md, ctx_plot, ctx_heat, ctx_json],
          api_name="contextual", trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    gr.on([sent_tab.select, s_run.click, s_model.change, pooling.change], embed_sentences,
          inputs=[sentences, s_model, pooling], outputs=[s_plot, s_heat, s_file, s_json], api_name="embed_sentences",
          trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    gr.on([sent_tab.select, q_run.click, query.submit], semantic_search, inputs=[query, sentences, s_model, pooling],
          outputs=[hits, q_json], api_name="semantic_search", trigger_mode="always_last", concurrency_limit=2,
          show_progress="minimal")
    add.click(lambda s, text: (text.rstrip("\n") + "\n" + (s or "").strip()).strip("\n") if (s or "").strip() else text,
              inputs=[sentence, sentences], outputs=sentences, api_visibility="private", queue=False)
    gr.on([classic_tab.select], classic, inputs=sentences, outputs=[c_md, c_onehot, c_bow, c_tfidf, c_json],
          api_name="classic", trigger_mode="always_last", show_progress="minimal")
