"""The Embeddings tab's word space: the words (presets, chips, the selected word of the shared sentence), an
embedding (our word2vec, GloVe and FastText, MiniLM's, our BERT's, our GPT's characters) and its projection
(PCA / t-SNE / UMAP in 2D or 3D), neighbours, analogies, the same words in another embedding. word2vec's
8 MB load on first use."""

from __future__ import annotations

import re
from types import SimpleNamespace

import gradio as gr

from playground.analysis import focus, models
from playground.analysis.embeddings import EmbeddingError, projection, words as ws
from playground.figures import embeddings as fe
from playground.ui.common import (FIGURE, FOLLOW, Shared, as_float, as_int, json_file, text_input, things_to_try,
                                  warn)

SELECTED = "selected:"       # the set that holds the word selected in the shared sentence
SOURCE_LABELS = {"word2vec": "our word2vec", "glove": "our GloVe",
                 "fasttext": "our FastText (character n-grams)", "minilm": "MiniLM input embeddings",
                 "bert": "our BERT's input embeddings", "gpt": "our GPT's characters"}
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


# The typos chip, for FastText (it switches to it): a letter slipped at a word's end keeps most of its character
# n-grams and the word is found; two letters swapped in the middle break every n-gram across them and it is not.
# Measured on the shipped model (tests/test_embeddings_presets.py): each slip's nearest word is the word, no
# swap's five nearest hold it. Neighbour lists reviewed by hand (freind's hold a drug, so it is not here).
TYPOS = {"slip at the end": {"kingdome": "kingdom", "princesse": "princess", "gentlemann": "gentleman",
                             "daughtr": "daughter", "everlastingg": "everlasting"},
         "swap in the middle": {"recieve": "receive", "beleive": "believe", "acheive": "achieve", "wierd": "weird"}}
TYPO_EXAMPLES = (("kingdome", "kingdom"), ("recieve", "receive"))  # the note counts their shared n-grams

TRY = [("animals and vehicles",
        ["animals: cat, dog, horse, cow, sheep, pig\nvehicles: car, truck, bus, train, boat, plane"]),
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
                # the page opens flat: 63 labels in a turning 3D cloud could not be read on a projector (the
                # API's default stays 3D: its answers are the same)
                dims = gr.Radio([("2D", 2), ("3D", 3)], value=2, label="Dimensions")
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
                       outputs=[plot, neighbours, file, data], trigger_mode="always_last",
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
          api_visibility="private", trigger_mode="always_last", show_progress="minimal")


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
