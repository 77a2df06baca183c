"""The Embeddings tab's *Bias in embeddings* sub-tab: a gender direction and the projection of occupations on it
(Bolukbasi et al. 2016), and the Word Embedding Association Test (Caliskan et al. 2017) on our word2vec, GloVe and
FastText, with word lists the user may edit. Thin handlers over playground/analysis/embeddings/bias.py; built from
embeddings_tab.build.
"""

from __future__ import annotations

import re

import gradio as gr

from playground.analysis.embeddings import EmbeddingError, bias
from playground.analysis.embeddings import words as ws
from playground.figures import bias as fb
from playground.ui.common import LATEX, as_int, json_file, text_input, warn

SPACES = ("word2vec", "glove", "fasttext")    # the word models trained here, each a table of whole-word vectors
MAX_SET = 200                                 # words per list; more are cut with a notice
DEFAULT_TEST = next(iter(bias.WEAT_TESTS))    # the sanity check first: if it fails, the others mean little


def _spaces() -> list[str]:
    return [k for k in ws.space_keys() if k in SPACES]


def _space(key) -> ws.WordSpace:
    space = ws.space(key) if key in SPACES else None
    if space is None:
        raise gr.Error(f"Unknown or unavailable word model {key!r}; choose from {', '.join(_spaces())}.")
    return space


def _words(text: str) -> list[str]:
    return [w for w in (w.strip().strip(".;!?\"'()[]") for w in re.split(r"[,\s]+", text)) if w]


def parse_set(text, default_label: str, notices: list[str]) -> tuple[str, list[str]]:
    """`label: w1, w2, ...` (or just the words) as (label, words), at most MAX_SET words."""
    text = text_input(text, notices, 20_000).strip()
    head = re.match(r"\s*([^:,\n]{1,40}):(.*)$", text, flags=re.S)
    label, body = (head.group(1).strip(), head.group(2)) if head else (default_label, text)
    words = _words(body)
    if len(words) > MAX_SET:
        notices.append(f"{label}: {len(words)} words; the first {MAX_SET} are used.")
        words = words[:MAX_SET]
    return label, words


def parse_pairs(text, notices: list[str]) -> list[tuple[str, str]]:
    """One pair a line, `he she` or `he - she` or `he, she`; a line without exactly two words is refused."""
    pairs = []
    for line in text_input(text, notices, 20_000).splitlines():
        words = [w for w in re.split(r"[,\s/–-]+", line.strip()) if w]
        if not words:
            continue
        if len(words) != 2:
            raise gr.Error(f"Each line of the pairs is two words (he she); not {line.strip()[:40]!r}.")
        pairs.append((words[0], words[1]))
    if not pairs:
        raise gr.Error("Give at least one pair of words (he she) to make the direction from.")
    return pairs[:MAX_SET]


def set_text(label: str, words: str) -> str:
    return f"{label}: {', '.join(words.split())}"


def weat_lists(name) -> tuple[str, str, str, str]:
    """A preset test's four lists, as the boxes show them."""
    if name not in bias.WEAT_TESTS:
        raise gr.Error(f"Unknown test {name!r}; choose from {', '.join(bias.WEAT_TESTS)}.")
    return tuple(set_text(label, words) for label, words in bias.WEAT_TESTS[name])


def embedding_bias(source="word2vec", pairs="", occupations="", x="", y="", a="", b="", seed=0):
    """The gender direction and the projections on it in one word model, and the WEAT of X, Y against A, B on
    every word model trained here (word2vec, GloVe, FastText)."""
    notices: list[str] = []
    space = _space(source)
    pair_list = parse_pairs(pairs, notices)
    _, jobs = parse_set(occupations, "words", notices)
    sets = bias.WeatSets(*(parse_set(t, name, notices) for t, name in ((x, "X"), (y, "Y"), (a, "A"), (b, "B"))))
    seed = as_int(seed, "Seed", 0, 2**31 - 1, notices)
    try:
        data = bias.view(space, [_space(k) for k in _spaces()], pair_list, jobs, sets, seed)
    except EmbeddingError as err:
        raise gr.Error(str(err)) from None
    data["notices"] = notices
    bars = fb.projection_figure(data["projections"], f"Projection on the gender direction g in {space.key}")
    mine = next(r for r in data["weat"]["models"] if r["source"] == space.key)
    labels = (sets.X[0], sets.Y[0])
    words = (fb.association_figure(mine, labels, f"s(w, A, B) in {space.key}: {sets.A[0]} (> 0) or {sets.B[0]} (< 0)")
             if "association" in mine else None)
    warn(notices)
    return (bars, fb.projection_md(data), fb.weat_md(data["weat"]), words, json_file(data, "embedding-bias"), data)


BIAS_MD = r"""**What a word space learned about gender, from its books.** Vectors trained on text take in its
associations along with its meanings. Two ways to look, on our three word models (all trained on the same
Austen, Shakespeare, Bible, WordNet glosses and Jargon File):

- **A direction** (Bolukbasi et al. 2016): $g$ = the unit-length mean of the differences $\hat m_i - \hat f_i$ of
  definitional pairs (he − she, man − woman, ...; the paper takes their first principal component instead, which
  the mean approximates when the pairs agree; the JSON gives each pair's cosine with $g$). Each word's bar is
  $\cos(w, g)$: positive leans to *he*, negative to *she*.
- **WEAT** (Caliskan, Bryson & Narayanan 2017): for target sets $X, Y$ and attribute sets $A, B$,
  $s(w,A,B)=\mathrm{mean}_{a\in A}\cos(w,a)-\mathrm{mean}_{b\in B}\cos(w,b)$,
  $s(X,Y,A,B)=\sum_{x\in X}s(x,A,B)-\sum_{y\in Y}s(y,A,B)$, the effect size
  $d=\frac{\mathrm{mean}_{x}s(x,A,B)-\mathrm{mean}_{y}s(y,A,B)}{\mathrm{std}_{w\in X\cup Y}\,s(w,A,B)}$ (sample std),
  and the one-sided $p$ = the share of equal-size re-splits of $X\cup Y$ whose statistic is larger: all of them
  when there are at most EXACT_MAX, else SAMPLES drawn with the seed (the table says which).

**What the numbers show, and what they do not.** They measure *association in this corpus's co-occurrence
statistics*, as one model learned them: which words appear in similar contexts in 19th-century novels, a
16th-century stage, a Bible translation and hacker slang. They are not a measure of any person's beliefs, nor
of today's language. The lists are small (LIST_SIZES words, fewer when the corpus lacks some: those are listed), so
one word can move $d$; change a list and watch it move; the $p$-value speaks to the shuffling of these words, not
to other lists of the same idea. Start with the sanity check (flowers vs insects, pleasant vs unpleasant): a model
that cannot find that association gives little weight to its other answers. The direction's bars mix gender with
everything else the pairs share in these books (*john* and *mary* are also Bible names)."""
# the p-value's budget and the lists' sizes as the code has them (the LaTeX braces rule out str.format)
_SIZES = [len(words.split()) for test in bias.WEAT_TESTS.values() for _, words in test]
BIAS_MD = (BIAS_MD.replace("EXACT_MAX", f"{bias.EXACT_MAX:,}").replace("SAMPLES", f"{bias.SAMPLES:,}")
           .replace("LIST_SIZES", f"{min(_SIZES)} to {max(_SIZES)}"))


def build(demo: gr.Blocks) -> None:
    """The sub-tab's layout and its one event, `embedding_bias`."""
    keys = _spaces()
    if not keys:
        return
    with gr.Tab("Bias in embeddings") as tab:
        gr.Markdown(BIAS_MD, latex_delimiters=LATEX)
        with gr.Row():
            source = gr.Dropdown(keys, value=keys[0], label="Word model (the direction's; the WEAT runs on all)",
                                 scale=1)
            seed = gr.Number(0, label="Seed (sampled p-values)", precision=0, minimum=0, scale=1)
            run = gr.Button("Compute", variant="primary", scale=0)
        with gr.Row():
            pairs = gr.Textbox("\n".join(f"{m} {f}" for m, f in bias.PAIRS), lines=4, max_lines=12, scale=1,
                               label="Definitional pairs (one a line: he she)")
            jobs = gr.Textbox(", ".join(bias.OCCUPATIONS), lines=4, max_lines=12, scale=2,
                              label="Words to project (occupations)")
        bars = gr.Plot(label="Projection on the direction", elem_id="bias-projection")
        alt = gr.Markdown(elem_id="bias-projection-text")
        gr.Markdown("**WEAT.** Pick a test from the paper or edit the lists (`label: word, word, ...`).")
        test = gr.Dropdown(list(bias.WEAT_TESTS), value=DEFAULT_TEST, label="Test")
        first = weat_lists(DEFAULT_TEST)
        with gr.Row():
            x, y = (gr.Textbox(v, lines=3, max_lines=8, label=f"Targets {n}") for v, n in zip(first[:2], "XY"))
        with gr.Row():
            a, b = (gr.Textbox(v, lines=3, max_lines=8, label=f"Attributes {n}") for v, n in zip(first[2:], "AB"))
        table = gr.Markdown(elem_id="bias-weat")
        words = gr.Plot(label="Each target word's association", elem_id="bias-words")
        with gr.Accordion("Data (JSON)", open=False, elem_classes=["advanced"]):
            file = gr.DownloadButton("Download JSON", size="sm")
            data = gr.JSON(label="embedding_bias")
    event = dict(fn=embedding_bias, inputs=[source, pairs, jobs, x, y, a, b, seed],
                 outputs=[bars, alt, table, words, file, data], trigger_mode="always_last",
                 show_progress="minimal")
    gr.on([tab.select, run.click, source.change, seed.submit], api_name="embedding_bias", **event)
    test.input(weat_lists, inputs=test, outputs=[x, y, a, b], api_visibility="private", queue=False).then(
        api_visibility="private", **event)
