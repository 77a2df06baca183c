"""The Embeddings tab: from one-hot and counts to learned dense vectors, to vectors that depend on context,
to sentence vectors you can search with.

Word space (our word2vec, GloVe and FastText, MiniLM's input embeddings, our BERT's, our GPT's characters:
PCA / t-SNE / UMAP in 2D or 3D, neighbours, analogies, the same words in another embedding), contextual
embeddings (one word in several sentences at a chosen MiniLM layer, or ELMo's mix of its biLM's layers),
sentence space (SBERT pooling, similarity, semantic search), and the classic representations (one-hot,
bag of words, TF-IDF). Nothing is loaded at import: word2vec's
8 MB loads on first use, MiniLM is the encoder the Attention tab already loaded.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import gradio as gr

from playground.analysis import focus, models
from playground.analysis.embeddings import EmbeddingError, classic as cl, contextual as ctx, encoders
from playground.analysis.embeddings import projection, sentences as sn, words as ws
from playground.figures import embeddings as fe
from playground.ui import embeddings_bias
from playground.ui.common import (FIGURE, FOLLOW, LATEX, Shared, as_float, as_int, json_file, text_input, things_to_try,
                                  warn)

SELECTED = "selected:"       # the set that holds the word selected in the shared sentence
MAX_SENTENCES = 200        # sentence space: more than this is cut with a notice
MAX_CONTEXT_SENTENCES = 20
MAX_CLASSIC_SENTENCES = 20   # the classic tables: one row per sentence
ELMO_WEIGHTS = 3             # s_0 .. s_2: ELMo's token layer and its L = 2 biLSTM layers (the shipped biLM's L)
S_RANGE = 5.0                # |s_j| ≤ 5: softmax weights from ~0 to ~1 already
GAMMA_RANGE = (0.1, 10.0)    # γ > 0: it scales the ELMo vector (cosines do not change)
SOURCE_LABELS = {"word2vec": "our word2vec", "glove": "our GloVe",
                 "fasttext": "our FastText (character n-grams)", "minilm": "MiniLM input embeddings",
                 "bert": "our BERT's input embeddings", "gpt": "our GPT's characters"}
CONTEXT_NAMES = {"minilm": "MiniLM", "bert": "our BERT", "elmo": "our ELMo"}
SENTENCE_MODELS = {
    "minilm": "all-MiniLM-L6-v2 through our BERT encoder (shared with the Attention tab)",
    "sentence-transformers": "all-MiniLM-L6-v2 through the sentence-transformers library (first use loads it, ~5 s)",
    "bert": "our BERT (bert-english) wrapped as a SentenceTransformer: pre-trained here, never trained for sentence "
            "similarity (its first use imports sentence-transformers: seconds)",
}
DEFAULT_SETS = ["animals", "countries", "numbers", "family"]
DEFAULT_WORDS = "\n".join(f"{name}: {', '.join(ws.PRESETS[name])}" for name in DEFAULT_SETS)


# ---------------------------------------------------------------------------------------------
# Parsing and checking the inputs


def parse_words(text, notices: list[str]) -> tuple[list[str], list[str]]:
    """Lines of words, split on commas and spaces; a line `name: w1, w2` makes a set of that name (the
    colour), other words belong to a preset set when they are in one, else to "your words". At most
    MAX_WORDS words (cut with a notice)."""
    text = text_input(text, notices, max_chars=400_000)
    words, groups = [], []
    preset_of = {w: name for name, group in ws.PRESETS.items() for w in group}
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
    if len(words) > ws.MAX_WORDS:
        notices.append(f"{len(words):,} words were given; the first {ws.MAX_WORDS:,} are shown "
                       f"(the scatter stays interactive up to that many).")
        words, groups = words[: ws.MAX_WORDS], groups[: ws.MAX_WORDS]
    return words, groups


def _space(source) -> ws.WordSpace:
    space = ws.space(source)
    if space is None:
        raise gr.Error(f"Unknown or unavailable embedding {source!r}; choose from {', '.join(ws.space_keys())}.")
    return space


def _method(method, notices: list[str]) -> str:
    if method not in projection.METHODS:
        raise gr.Error(f"Unknown method {method!r}; choose from {', '.join(projection.METHODS)}.")
    return method


def _dims(dims, notices: list[str]) -> int:
    if isinstance(dims, str) and dims.strip().lower() in ("2d", "3d"):
        dims = dims.strip()[0]
    return as_int(dims, "Dimensions", 2, 3, notices)


def _encoder(model) -> encoders.Encoder:
    m = encoders.encoder(model) if model in encoders.ENCODERS else None
    if m is None:
        raise gr.Error(f"Unknown or unavailable encoder {model!r}; choose from {', '.join(encoders.ENCODERS)}.")
    return m


def _elmo() -> encoders.ELMoEncoder:
    m = encoders.elmo_encoder()
    if m is None:
        raise gr.Error(f"Our ELMo ({encoders.ELMO_CHECKPOINT}) is not shipped here; choose "
                       f"{' or '.join(encoders.ENCODERS)}.")
    if m.n_layer + 1 != ELMO_WEIGHTS:
        raise gr.Error(f"This ELMo has {m.n_layer + 1} layers; the tab offers {ELMO_WEIGHTS} weights s_j.")
    return m


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
        _encoder(model)


# ---------------------------------------------------------------------------------------------
# Handlers


def _settings(seed, perplexity, n_neighbors, min_dist, notices: list[str]) -> projection.Settings:
    return projection.Settings(seed=as_int(seed, "Seed", 0, 2**31 - 1, notices),
                               perplexity=float(as_int(perplexity, "Perplexity", 2, 100, notices)),
                               n_neighbors=as_int(n_neighbors, "Neighbours k", 2, 100, notices),
                               min_dist=as_float(min_dist, "min_dist", 0.0, 0.99, notices))


def embed_words(words, source="word2vec", method="pca", dims=3, seed=0, perplexity=30, n_neighbors=15, min_dist=0.1,
                progress=gr.Progress()):
    """The words' vectors in one embedding, projected to 2D or 3D; each word's nearest neighbours. t-SNE and UMAP
    take a seed and their parameters, so the same inputs give everyone the same picture."""
    notices: list[str] = []
    space = _space(source)
    method = _method(method, notices)
    dims = _dims(dims, notices)
    settings = _settings(seed, perplexity, n_neighbors, min_dist, notices)
    given, groups = parse_words(words, notices)
    if not given:
        raise gr.Error("Type some words (or pick a preset set) to place them in the embedding space.")
    try:
        v = ws.view(space, given, groups, method, dims, notices,
                    progress=lambda fraction, text: progress(fraction, desc=text), settings=settings,
                    shipped=shipped_words(), first=(SELECTED.rstrip(":"),))
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    fig = fe.scatter_figure(v.words, v.coords, v.groups, fe.word_space_title(v.data), v.vectors, v.notes)
    table = fe.neighbours_html(v.neighbours, fe.neighbours_caption(v.data))
    warn(notices)
    return fig, table, json_file(v.data, "embed-words"), v.data


def analogy(a, b, c, source="word2vec"):
    """a − b + c: the nearest words to the arithmetic, inputs excluded."""
    notices: list[str] = []
    space = _space(source)
    words = [text_input(x, notices, 100).strip() for x in (a, b, c)]
    if not all(words):
        raise gr.Error("Fill in the three words of the analogy (a − b + c, e.g. king − man + woman).")
    try:
        data = ws.analogy(space, *words, notices, k=5)
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    warn(notices)
    return fe.analogy_md(data), data


def word_neighbours(word, words="", source="word2vec"):
    """One word's nearest neighbours in an embedding: a word of the plot (the table lists only some), or any
    other. `words` is the word list shown: a listed slur or vulgar word typed there may appear (words.unshown)."""
    notices: list[str] = []
    space = _space(source)
    word = text_input(word, notices, 100).strip()
    if not word:
        raise gr.Error("Pick a word of the plot, or type one, to list its neighbours.")
    found = ws.lookup(space, [word])
    if not found.words:
        raise gr.Error(f"{word!r} is not in {space.key}'s vocabulary and cannot be built from its pieces.")
    given = ws.lookup(space, parse_words(words, [])[0]).words if words else []
    rows = ws.neighbour_rows(space, found.words, found.vectors, [*given, *found.words], shipped_words())
    data = {"source": space.key, "word": found.words[0], "neighbours": rows[0]["neighbours"],
            "composed": found.composed}
    warn(notices)
    return fe.neighbours_html(rows, f"Nearest neighbours of {found.words[0]} in {space.key}"), data


def contextual(word, sentences, layer=ctx.DEFAULT_LAYER, model="minilm", mix=True, gamma=1.0, s_0=0.0, s_1=0.0,
               s_2=0.0):
    """One word in several sentences, through MiniLM (or our BERT) at the chosen layer, or through our ELMo (a
    layer of its biLM, or with `mix` eq. 1's γ Σ_j softmax(s)_j h_j with s = (s_0, s_1, s_2)): its vectors and
    their similarity. mix, gamma and s_j are ELMo's only; their defaults are its card's (the plain average)."""
    notices: list[str] = []
    m = _elmo() if model == "elmo" else _encoder(model)
    word = text_input(word, notices, 60).strip()
    if not word or not re.fullmatch(r"[^\W\d_][\w'-]*", word):
        raise gr.Error("Type one word (letters) to follow through the sentences, e.g. bank.")
    lines = [s.strip() for s in text_input(sentences, notices, 20_000).splitlines() if s.strip()]
    if len(lines) > MAX_CONTEXT_SENTENCES:
        notices.append(f"The first {MAX_CONTEXT_SENTENCES} sentences are used.")
        lines = lines[:MAX_CONTEXT_SENTENCES]
    mixing = model == "elmo" and bool(mix)
    layer = "mix" if mixing else as_int(layer, "Layer", 0, m.n_layer, notices)
    try:
        if model == "elmo":
            weights = [as_float(w, f"s_{j}", -S_RANGE, S_RANGE, notices) for j, w in enumerate((s_0, s_1, s_2))]
            gamma = as_float(gamma, "γ", *GAMMA_RANGE, notices)
            v = ctx.elmo_view(word, lines, layer, m, notices, weights, gamma)
            sweep = ctx.sense_sweep(word, m, tuple(weights), gamma)
        else:
            v = ctx.view(word, lines, layer, m, notices)
            sweep = ctx.sense_sweep(word, m)
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    v.data["senses"] = sweep
    kept, where = v.data["sentences"], "mix (eq. 1)" if mixing else f"layer {layer}"
    heat = fe.similarity_figure([f"{i + 1}. {s}" for i, s in enumerate(kept)], v.similarity,
                                f"{word!r} at {m.key} {where}: cosine between its vectors")
    scatter = fe.scatter_figure([str(i + 1) for i in range(len(kept))], v.coords, ["sentences"] * len(kept),
                                f"{word!r} in each sentence, {where} (PCA)", v.vectors)
    warn(notices)
    md = fe.contextual_md(v.data, v.similarity, v.in_word2vec)
    return md + ("\n\n" + senses_md(sweep, layer) if sweep else ""), scatter, heat, v.data


def senses_md(sweep: dict, shown) -> str:
    """Whether the encoder tells the word's senses apart, layer by layer, from ctx.sense_sweep's measurement (the
    labelled sentences, not the typed ones); the layer shown in bold, the verdict in words."""
    rows, word, model = sweep["layers"], sweep["word"], CONTEXT_NAMES.get(sweep["model"], sweep["model"])
    n, senses = rows[0]["sentences"], ", ".join(f"{v} {k}" for k, v in sweep["senses"].items())
    chance = sum(c * (c - 1) for c in sweep["senses"].values()) / (n - 1)  # a random nearest is of the same sense
    name = lambda j: f"**{j}**" if j == shown else str(j)  # noqa: E731
    gaps = " | ".join(f"{r['gap']:+.3f}" for r in rows)
    nearest = " | ".join(f"{r['nearest_same']}/{n}" for r in rows)
    table = "\n".join([f"| layer | {' | '.join(name(r['layer']) for r in rows)} |", f"|:--|{'--:|' * len(rows)}",
                        f"| same sense − across (mean cosine) | {gaps} |",
                        f"| nearest is of its own sense | {nearest} |"])
    best = ctx.best_layer(sweep)
    if best is not None:
        full = [str(r["layer"]) for r in rows if r["nearest_same"] == n]
        b = next(r for r in rows if r["layer"] == best)
        verdict = (f"At layer{'s' if len(full) > 1 else ''} {', '.join(full)} every occurrence's nearest is of its own "
                   f"sense; the gap is largest at layer {best}. Cosines stay high across senses there too "
                   f"({b['across']:.2f} on average, {b['within']:.2f} within one): the senses show in which "
                   "occurrences are nearest, not in low cosines.")
    else:
        top = max(rows, key=lambda r: (r["nearest_same"], r["gap"]))
        verdict = (f"**{model[0].upper() + model[1:]} does not separate them**: at no layer is every occurrence's "
                   f"nearest of its own sense (at best {top['nearest_same']} of {n}, layer {top['layer']}; a random "
                   f"nearest would be about {chance:.0f}), and there cosines within a sense ({top['within']:.2f}) are "
                   f"barely above those across ({top['across']:.2f}).")
    return (f"**Does {model} tell *{word}*'s senses apart?** Measured now on {n} labelled sentences ({senses}; the "
            f"default ones among them), at every layer:\n\n{table}\n\n{verdict}")


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


# ---------------------------------------------------------------------------------------------
# Layout and events

INTRO_MD = r"""**From counts to learned vectors.** One-hot vectors make every word equally far from every other.
**word2vec** (Mikolov et al. 2013) learns a dense vector $v_w$ per word by predicting its neighbours: skip-gram with
negative sampling minimises $-\log\sigma(v'_{o}\cdot v_{w}) - \sum_{i=1}^{k}\log\sigma(-v'_{n_i}\cdot v_{w})$ over
(word, context) pairs, with $k$ noise words drawn from $U(w)^{3/4}$ and frequent words subsampled. Words used
alike end up close (cosine), and some relations become directions: *king − man + woman ≈ queen*. Our word2vec was
trained here on the English corpus (Austen, the Bible, WordNet glosses, the Jargon File, Shakespeare; see its card).
**GloVe** (Pennington et al. 2014) learns the same kind of table from the corpus's co-occurrence counts $X_{ij}$
instead: it fits $w_i\cdot\tilde w_j + b_i + \tilde b_j \approx \log X_{ij}$ by weighted least squares,
$J=\sum_{ij} f(X_{ij})\,(w_i\cdot\tilde w_j + b_i + \tilde b_j - \log X_{ij})^2$ with $f(x)=\min(1,(x/x_{max})^{3/4})$,
and shows $W+\tilde W$. Ours has word2vec's vocabulary and corpus.
**FastText** (Bojanowski et al. 2017) trains the same objective with $v_w$ replaced by the mean of the vectors
of the word's character n-grams (`<wh, whe, her, ere, re>` ... for *where*, n = 3 to 6, hashed into buckets),
so any string, a misspelling included, gets a vector. A BERT's input embeddings are a table of the same kind as
word2vec's, over WordPiece tokens."""

CONTEXT_MD = r"""**Contextual embeddings.** word2vec gives *bank* one vector. A Transformer gives each occurrence
its own, mixed with the sentence by attention: follow one word through MiniLM's layers (0: the input embedding
plus position; 6: the last layer), or our small BERT's, and compare its vectors across sentences. ELMo (our
biLM) does it with two LSTM language models, one reading forward and one backward. For *bank*, the text under
the sentences measures whether the model tells its two senses apart at each layer, on 16 sentences labelled by
sense; the layer shown first is the one where MiniLM does so best."""

ELMO_MD = r"""**ELMo** (Peters et al. 2018) reads words with a forward and a backward LSTM language model; the word's
layer $j$ is $h_{k,j} = [\overrightarrow{h}_{k,j}; \overleftarrow{h}_{k,j}]$, layer 0 (the token layer) is
$[x_k; x_k]$, the same in every sentence, and layers 1–2 are the biLSTM's. Eq. 1 mixes them:
$\mathrm{ELMo}_k = \gamma \sum_{j=0}^{L} \mathrm{softmax}(s)_j\, h_{k,j}$. The paper **learns $s$ and $\gamma$
for each downstream task**, with that task's model; there is no task here, so you set them: $s = 0$, $\gamma = 1$
(the card's defaults) is the plain average of the layers. $\gamma$ only scales the vector, so the cosines do not
move with it. Unticking the mix shows the layer chosen above. Words outside ELMo's vocabulary are read as [UNK]."""

SENTENCE_MD = r"""**Sentence embeddings** (SBERT, Reimers & Gurevych 2019): run the encoder, then pool its last layer's
token vectors into one: the **mean** over the real tokens (what all-MiniLM-L6-v2 was trained with), the **max** of
each dimension, or the **[CLS]** vector; then scale to length 1, so the dot product is the cosine. Similar
meanings land close even without shared words; the semantic search ranks your sentences by cosine with a query."""



# The typos chip, for FastText (it switches to it): a letter slipped at a word's end keeps most of its character
# n-grams and the word is found; two letters swapped in the middle break every n-gram across them and it is not.
# Measured on the shipped model (tests/test_embeddings_presets.py): each slip's nearest word is the word, no
# swap's five nearest hold it. Neighbour lists reviewed by hand (freind's hold a drug, so it is not here).
TYPOS = {"slip at the end": {"kingdome": "kingdom", "princesse": "princess", "gentlemann": "gentleman",
                             "daughtr": "daughter", "everlastingg": "everlasting"},
         "swap in the middle": {"recieve": "receive", "beleive": "believe", "acheive": "achieve", "wierd": "weird"}}
TYPO_EXAMPLES = (("kingdome", "kingdom"), ("recieve", "receive"))  # the note counts their shared n-grams

TRY = [("animals and vehicles", ["animals: cat, dog, horse, cow, sheep, pig\nvehicles: car, truck, bus, train, boat, plane"]),
       ("countries and capitals", ["countries: france, italy, spain, germany, japan\n"
                                   "capitals: paris, rome, madrid, berlin, tokyo"]),
       ("typos", ["\n".join([*(f"{name}: {', '.join(pairs)}" for name, pairs in TYPOS.items()),
                              f"spelt right: {', '.join(w for pairs in TYPOS.values() for w in pairs.values())}"])]),
       ("numbers", ["numbers: one, two, three, four, five, ten, hundred, thousand, million"])]


def shipped_words() -> frozenset[str]:
    """The app's own words (presets, the default list, the chips): their neighbour lists leave out the
    reviewed slurs and vulgar words (words.unshown); the words a user brings are never filtered."""
    chips = {w.lower() for _, (text,) in TRY for w in re.split(r"[,\s]+", re.sub(r"^[^:\n]*:", "", text, flags=re.M))}
    return ws.preset_words() | {w for w in chips if w}


def chip_presets(text: str) -> list[str]:
    """The preset sets a chip's word list holds whole (its line `name: w1, ...` as the preset writes it): the
    boxes a chip leaves ticked, so that the ticks always say what the list holds."""
    lines = set(text.splitlines())
    return [name for name in ws.PRESETS if fill_presets([name]) in lines]


def method_choices() -> list[tuple[str, str]]:
    return [("PCA", "pca"), ("t-SNE", "tsne"), ("UMAP", "umap")]


def _card(name: str) -> dict:
    """A shipped model's card, read without loading it ({} when it is not shipped)."""
    return models.card(name) if models.resolve(name) else {}


def _card_analogy(name: str) -> tuple[dict, dict]:
    """A shipped word model's card and its overall analogy result ({} when it is not shipped)."""
    card = _card(name)
    return card, ((card.get("evaluation") or {}).get("analogy") or {}).get("all") or {}


def word2vec_note() -> str:
    """What our word2vec (and GloVe, when shipped) can be expected to show, with their own evaluations (their
    cards: the same analogy questions)."""
    card, analogy = _card_analogy(ws.WORD2VEC)
    if not analogy:
        return ""
    _, glove = _card_analogy(ws.GLOVE)
    beside = (f"; our GloVe, on the same words and corpus, {glove['accuracy']:.0%} of its {glove['questions']}"
              if glove else "")
    return (f"**What to expect from our word2vec.** {card.get('tokens', 0) / 1e6:.1f} M words of Austen, Shakespeare, "
            f"the Bible, WordNet's glosses and the Jargon File, {card.get('dim')} dimensions: "
            f"{analogy['accuracy']:.0%} of its {analogy['questions']} analogy questions right{beside} "
            f"({'their cards' if glove else 'its card'}). "
            "Its neighbours are how words are used in those books: *dog* sits with hound and mongrel, but *king*'s "
            "nearest come from Shakespeare's histories and the Bible (Pomfret, Bathsheba, Fortinbras); with 4 million "
            "words, capitals are almost never answered.")


def fasttext_note() -> str:
    """What our FastText can be expected to show, from its card: the same analogy questions as word2vec, and
    the misspellings check."""
    card = _card(ws.FASTTEXT)
    analogy = ((card.get("evaluation") or {}).get("analogy") or {}).get("all") or {}
    typos = (card.get("oov") or {}).get("misspellings") or {}
    if not analogy or not typos.get("words"):
        return ""
    return (f"\n\n**And from our FastText** ({card.get('dim')} dimensions, {card.get('buckets', 0):,} n-gram buckets, "
            f"the same books): {analogy['accuracy']:.0%} of the same {analogy['questions']} analogy questions; for "
            f"{typos['words']} misspelt words (their middle two letters swapped) the right word is the nearest "
            f"neighbour {typos['top1']:.0%} of the time and among the five nearest {typos['top5']:.0%}, where word2vec "
            f"has no vector at all. {typos_note(card)}")


def typos_note(card: dict) -> str:
    """Why the typos chip finds some words and not others, with the n-grams the examples share (counted here)."""
    minn, maxn = card.get("ngrams") or (3, 6)
    (slip, word), (swap, right) = TYPO_EXAMPLES
    kept, swapped = ws.shared_ngrams(slip, word, minn, maxn), ws.shared_ngrams(swap, right, minn, maxn)
    return ("The *typos* chip shows why: an unseen word's vector is the mean of its n-gram rows, so a typo lands "
            f"near its word only if it keeps most of them. A letter slipped at the end keeps most: *{slip}* shares "
            f"{kept[0]} of its {kept[1]} n-grams with *{word}*. Two letters swapped in the middle break every n-gram "
            f"across them: *{swap}* shares {swapped[0]} of {swapped[1]} with *{right}*, and its nearest words are "
            "ones that share some of its other n-grams. The card's typos are of that kind (the two middle letters "
            "swapped), hence its few hits. Compare their rows in the table.")


def fill_presets(names):
    names = [n for n in (names or []) if n in ws.PRESETS]
    return "\n".join(f"{n}: {', '.join(ws.PRESETS[n])}" for n in names)


def build(demo: gr.Blocks, shared: Shared) -> None:
    """The tab's components and events, one sub-tab after the other; `shared.text` (the sentence every tab
    shares) can be added to the sentence list with a button."""
    gr.Markdown(INTRO_MD, latex_delimiters=LATEX)
    with gr.Tabs():
        _word_space(demo, shared)
        _contextual()
        sentences = _sentence_space(shared)
        _classic(sentences)
        embeddings_bias.build(demo)


def _word_space(demo: gr.Blocks, shared: Shared) -> None:
    """Word space: the words, the embedding and its projection; neighbours, analogy, another embedding."""
    keys = ws.space_keys()
    with gr.Tab("Word space") as tab:
        with gr.Row():
            with gr.Column(scale=2):
                words = gr.Textbox(DEFAULT_WORDS, lines=5, max_lines=12, elem_id="emb-words",
                                   label="Words (a line 'name: w1, w2, ...' makes a coloured set)")
                presets = gr.CheckboxGroup(list(ws.PRESETS), value=DEFAULT_SETS, label="Preset sets",
                                           elem_id="emb-presets")
                follow = gr.Checkbox(True, label="Add the word selected in the sentence above (as 'selected:')",
                                     elem_id="emb-follow")
            with gr.Column(scale=1):
                source = gr.Dropdown([(SOURCE_LABELS[k], k) for k in keys], value=keys[0], label="Embedding",
                                     elem_id="emb-source")
                method = gr.Radio(method_choices(), value="pca", label="Projection")
                dims = gr.Radio([("2D", 2), ("3D", 3)], value=3, label="Dimensions")
                with gr.Accordion("t-SNE and UMAP settings", open=False):
                    knobs = SimpleNamespace(
                        seed=gr.Number(0, label="Seed (the same seed, the same picture)", precision=0, minimum=0),
                        perplexity=gr.Slider(2, 100, 30, step=1, label="t-SNE perplexity"),
                        n_neighbors=gr.Slider(2, 100, 15, step=1, label="UMAP neighbours k"),
                        min_dist=gr.Slider(0.0, 0.99, 0.1, step=0.01, label="UMAP min_dist"))
                run = gr.Button("Show", variant="primary")
        # a chip sets the preset boxes too: the ticks must say what the list holds
        tries = things_to_try([(label, [text, chip_presets(text)]) for label, (text,) in TRY], [words, presets])
        plot = gr.Plot(label="Word space", elem_id="emb-word-plot")
        neighbours = gr.HTML(elem_id="emb-neighbours", elem_classes=FIGURE)
        pick = _neighbours_of(demo, words, source)
        gr.Markdown(word2vec_note() + fasttext_note(), elem_id="emb-expect")
        _analogy(demo, source)
        with gr.Accordion("The same words in another embedding", open=False):
            other = gr.Dropdown([(SOURCE_LABELS[k], k) for k in keys], value="minilm", label="Compare with")
            other_plot = gr.Plot(label="Other embedding")
            other_json = gr.JSON(visible=False)
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            file = gr.DownloadButton("Download JSON", size="sm")
            data = gr.JSON(label="embed_words")

    presets.input(fill_presets, inputs=presets, outputs=words, api_visibility="private", queue=False)
    settings = [knobs.seed, knobs.perplexity, knobs.n_neighbors, knobs.min_dist]
    word_events = dict(fn=embed_words, inputs=[words, source, method, dims, *settings],
                       outputs=[plot, neighbours, file, data], trigger_mode="always_last", concurrency_limit=2,
                       show_progress="minimal")
    shared.remember("emb", source=source, method=method, dims=dims, follow=follow, seed=knobs.seed,
                    perplexity=knobs.perplexity, neighbors=knobs.n_neighbors, min_dist=knobs.min_dist)
    gr.on([demo.load, tab.select, run.click, words.submit, source.change, method.change, dims.change,
           knobs.seed.submit, knobs.perplexity.release, knobs.n_neighbors.release, knobs.min_dist.release],
          api_name="embed_words", **word_events)
    for (label, _), click in zip(TRY, tries):
        if label == "typos" and "fasttext" in keys:   # the typos are FastText's lesson: word2vec has no vector for them
            click = click.then(None, None, source, js="() => 'fasttext'", queue=False, api_visibility="private")
        click.then(api_visibility="private", **word_events)

    def with_selected(words_, sentence_, focus_, on):
        """The selected word of the sentence as its own set ("selected: word") in the word list."""
        span = focus.parse(focus_, sentence_ or "")
        if span is None or not on:
            return gr.skip()
        kept = [line for line in (words_ or "").splitlines() if not line.startswith(SELECTED)]
        return "\n".join(kept + [f"{SELECTED} {sentence_[span[0]:span[1]].lower()}"])

    shared.changed("focus")(with_selected, inputs=[words, shared.text, shared.focus, follow], outputs=words,
                        queue=False, api_visibility="private", show_progress="hidden", trigger_mode=FOLLOW).then(
        api_visibility="private", **word_events)
    # the choice of words whose neighbours can be listed follows the plot's words
    data.change(lambda d: gr.update(choices=[p["word"] for p in (d or {}).get("points", [])]), inputs=data,
                outputs=pick, api_visibility="private", queue=False, show_progress="hidden")

    def compare(words_, other_, method_, dims_, *settings_):
        fig, _, _, data_ = embed_words(words_, other_, method_, dims_, *settings_)
        return fig, data_

    gr.on([other.change, run.click], compare, inputs=[words, other, method, dims, *settings],
          outputs=[other_plot, other_json],
          api_visibility="private", trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")


def _neighbours_of(demo: gr.Blocks, words: gr.Textbox, source: gr.Dropdown) -> gr.Dropdown:
    """Any one word's neighbours (the table lists 20 words): the picker, its table and its event; returns the
    picker, whose choices follow the plot's words."""
    with gr.Row():
        shown = [w for name in DEFAULT_SETS for w in ws.PRESETS[name]]
        # at first the first default word the table leaves out: the picker's point, on the page from the start
        pick = gr.Dropdown(shown, value=shown[min(ws.MAX_NEIGHBOUR_WORDS, len(shown) - 1)], scale=1,
                           allow_custom_value=True, elem_id="emb-neighbours-of",
                           label="Neighbours of (a word of the plot, or type one)")
        picked = gr.HTML(elem_id="emb-picked-neighbours", elem_classes=FIGURE)
        picked_json = gr.JSON(visible=False)
    gr.on([demo.load, pick.input, pick.select, source.change], word_neighbours, inputs=[pick, words, source],
          outputs=[picked, picked_json], api_name="word_neighbours", trigger_mode="always_last",
          show_progress="minimal")
    return pick


def _analogy(demo: gr.Blocks, source: gr.Dropdown) -> None:
    """The analogy panel, a − b + c in the word space's embedding, and its event."""
    with gr.Accordion("Analogy: a − b + c", open=True):
        with gr.Row():
            an = SimpleNamespace(a=gr.Textbox("king", label="a"), b=gr.Textbox("man", label="− b"),
                                 c=gr.Textbox("woman", label="+ c"), run=gr.Button("Solve"))
        an.md = gr.Markdown(elem_id="emb-analogy")
        an.json = gr.JSON(label="analogy", visible=False)
    # on load too: the default analogy's answer is on screen before anyone clicks Solve
    gr.on([demo.load, an.run.click, an.a.submit, an.b.submit, an.c.submit, source.change], analogy,
          inputs=[an.a, an.b, an.c, source], outputs=[an.md, an.json], api_name="analogy", trigger_mode="always_last")


def _contextual() -> None:
    """Contextual: one word through an encoder's layers, in several sentences."""
    with gr.Tab("Contextual") as tab:
        gr.Markdown(CONTEXT_MD, latex_delimiters=LATEX)
        with gr.Row():
            word = gr.Textbox("bank", label="Word", scale=1)
            model = gr.Dropdown([(label, key) for key, label in encoders.CONTEXTUAL.items()
                                 if models.resolve(key if key == "minilm" else f"{key}-english")],
                                value="minilm", label="Encoder", scale=2)
            layer = gr.Slider(0, 6, value=ctx.DEFAULT_LAYER, step=1, label="Layer", scale=2)
        mix, gamma, weights, elmo_box = _elmo_controls()
        sentences = gr.Textbox("\n".join(ctx.CONTEXT_SENTENCES), lines=5, label="Sentences (one per line)")
        md = gr.Markdown()
        with gr.Row():
            plot = gr.Plot(label="The word's vectors")
            heat = gr.Plot(label="Similarity")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            data = gr.JSON(label="contextual")

    def model_changed(key, value):
        """The layer slider narrowed to the encoder's layers, its value first (a value above the new maximum
        would be refused by the slider when the view is computed next)."""
        top = encoders.contextual_layers(key) or encoders.contextual_layers("minilm")
        held = value if isinstance(value, (int, float)) and 0 <= value else top
        return gr.update(maximum=top, value=min(int(held), top)), gr.update(visible=key == "elmo")

    inputs, outputs = [word, sentences, layer, model, mix, gamma, *weights], [md, plot, heat, data]
    gr.on([tab.select, word.submit, layer.release, sentences.blur, mix.change, gamma.release,
           *[w.release for w in weights]], contextual, inputs=inputs, outputs=outputs,
          api_name="contextual", trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    model.change(model_changed, inputs=[model, layer], outputs=[layer, elmo_box], api_visibility="private",
                 queue=False).then(contextual, inputs=inputs, outputs=outputs, api_name="contextual_new_encoder",
                                   api_visibility="private", concurrency_limit=2, show_progress="minimal")


def _elmo_controls():
    """ELMo's mix (eq. 1): the switch, γ and one weight s_j per layer, defaults from its card; shown for ELMo."""
    mix = _card(encoders.ELMO_CHECKPOINT).get("mix") or {}   # the card, not the weights
    s = mix.get("s") if len(mix.get("s") or []) == ELMO_WEIGHTS else (0.0,) * ELMO_WEIGHTS
    g = float(mix.get("gamma", 1.0))
    names = ["token layer", *(f"biLSTM {j}" for j in range(1, ELMO_WEIGHTS))]
    with gr.Column(visible=False) as box:
        gr.Markdown(ELMO_MD, latex_delimiters=LATEX)
        with gr.Row():
            mix = gr.Checkbox(True, label="Mix the layers (eq. 1)", scale=1)
            gamma = gr.Slider(GAMMA_RANGE[0], GAMMA_RANGE[1], value=g, step=0.1, label="γ", scale=1)
            weights = [gr.Slider(-S_RANGE, S_RANGE, value=w, step=0.1, label=f"s_{j} ({name})", scale=1)
                       for j, (w, name) in enumerate(zip(s, names))]
    return mix, gamma, weights, box


def _sentence_space(shared: Shared) -> gr.Textbox:
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
          trigger_mode="always_last", concurrency_limit=2, show_progress="minimal")
    gr.on([tab.select, search.click, query.submit], semantic_search, inputs=[query, sentences, model, pooling],
          outputs=[hits, search_data], api_name="semantic_search", trigger_mode="always_last", concurrency_limit=2,
          show_progress="minimal")
    add.click(lambda s, text: (text.rstrip("\n") + "\n" + (s or "").strip()).strip("\n") if (s or "").strip() else text,
              inputs=[shared.text, sentences], outputs=sentences, api_visibility="private", queue=False)
    return sentences


def _classic(sentences: gr.Textbox) -> None:
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
