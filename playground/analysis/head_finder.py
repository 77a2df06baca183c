"""The head finder's data: every head's six statistics (analysis/heads.py) over a corpus sample, shipped as one JSON
file per model, or over the user's own text, live; and every head ranked by one of them.

The corpus statistics are computed by `python -m playground.tools.head_stats` (`corpus_stats` here) and shipped in
assets/head_stats/<model id>.json with their protocol: `windows` stretches of the corpus sample
assets/corpus_sample.txt (the start, middle and end of five public-domain corpora, assets/DATA_LICENSES.md), each
starting at a line drawn with a seeded numpy Generator and cut to `tokens` tokens of the model's own tokenizer
([CLS] … [SEP] for a BERT); each statistic is the mean over every query of every window that has it (`heads.Sums`).
The file also keeps the first window's statistics alone (`check`), so a test can recompute a slice of it quickly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from playground import checkpoints
from playground.analysis import attention as att
from playground.analysis import heads

STATS_DIR = checkpoints.ASSETS_DIR / "head_stats"
CORPUS = checkpoints.ASSETS_DIR / "corpus_sample.txt"
SOURCES = ("corpus", "text")
ORDERS = ("largest", "smallest")
TOP = 12               # heads in the finder's table
ROUND = 5              # decimals kept in the shipped file and the JSON
CHARS_PER_WINDOW = 4096  # text read from each window's start: more than `tokens` tokens of any tokenizer here
# the protocol of each shipped file: (windows, tokens per window); SmolLM2 has 270 heads and 135M parameters
PROTOCOL = {"smollm2-135m-instruct": (32, 128)}
DEFAULT_PROTOCOL = (64, 128)
SEED = 0
# the statistic the finder opens on, by the model's family: induction (Olsson et al. 2022) is a causal LM's way of
# continuing a text; a BERT reads both ways and is trained to fill a gap, and its clearest heads are previous-token
# heads (Clark et al. 2019; MiniLM's layer 0 head 2 puts 0.99 on the previous token), its induction 0.04 at most
FIRST_STAT = {"bert": "previous"}
# what each model saw of the corpus sample in training, said with its numbers (models/*/card.json)
OVERLAP = {"gpt-shakespeare": "trained on Tiny Shakespeare only: the Austen, Bible, WordNet and Jargon windows are "
                              "text it never saw; the Shakespeare windows are plays it may have read",
           "bert-english": "trained on the same five corpora; its held-out split is the last 2% of each file's "
                           "sentences, so only the sample's end-of-file windows are held out for it",
           "minilm": "trained by its authors on other corpora (web and sentence pairs); which of these public-domain "
                     "texts it saw is not known",
           "smollm2-135m-instruct": "trained by its authors on web, code and book corpora; which of these "
                                    "public-domain texts it saw is not known"}


def first_stat(family: str) -> str:
    """The statistic that fits a model's family, the one the finder ranks by until another is chosen."""
    return FIRST_STAT.get(family, "induction")


class HeadStatsError(ValueError):
    """Input the finder cannot use (too short, no shipped file): the message says what to do."""


def window_starts(text: str, windows: int, seed: int) -> list[int]:
    """`windows` distinct line starts (character offsets), drawn with numpy's Generator(seed), in text order."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 < len(text) and text[i + 1] != "\n"]
    rng = np.random.default_rng(seed)
    return sorted(int(s) for s in rng.choice(starts, size=min(windows, len(starts)), replace=False))


def window_ids(m: att.AttentionModel, text: str, start: int, tokens: int) -> list[int]:
    """The window's token ids: the model's own encoding of the text from `start`, cut to `tokens` (a BERT's
    [CLS] … [SEP] included), as the Attention tab encodes a sentence (attention.encode)."""
    return att.encode(replace(m, max_tokens=min(tokens, m.max_tokens)), text[start: start + CHARS_PER_WINDOW]).ids


def attention_of(m: att.AttentionModel, ids: list[int]) -> tuple[np.ndarray, ...]:
    """L arrays (H, T, T): the model's own attention on ids, through its `return_internals` (one segment)."""
    with torch.inference_mode():
        *_, internals = m.model(torch.tensor([ids], dtype=torch.long), return_internals=True)
    return tuple(layer["attn"][0].float().numpy() for layer in internals["layers"])


def _rounded(means: dict[str, np.ndarray | None]) -> dict[str, list | None]:
    return {k: None if v is None else np.round(v, ROUND).tolist() for k, v in means.items()}


def corpus_stats(m: att.AttentionModel, text: str, windows: int, tokens: int, seed: int = SEED,
                 progress=None) -> dict:
    """Every head's statistics over `windows` windows of `text` (the protocol above); `progress(i, n)` after each
    window. Returns the shipped file's content (the corpus's name and hash are added by the command)."""
    total, starts = heads.Sums(), window_starts(text, windows, seed)
    check = None
    for i, start in enumerate(starts):
        ids = window_ids(m, text, start, tokens)
        A = attention_of(m, ids)
        total.add(A, ids)
        if check is None:
            check = {"start": start, "n_tokens": len(ids), "stats": _rounded(heads.stats(A, ids))}
        if progress:
            progress(i + 1, len(starts))
    return {"model": m.key, "layers": m.n_layer, "heads": m.n_head, "stats": _rounded(total.means()),
            "queries": total.counts, "descriptions": heads.STATS,
            "protocol": {"windows": len(starts), "tokens": tokens, "seed": seed, "starts": starts,
                         "how": "each window: the model's own tokens of the corpus sample from a line start drawn "
                                "with numpy.random.default_rng(seed) (distinct, in text order), cut to `tokens`; "
                                "each statistic: its mean over every query (from the second token) of every window "
                                "that has it, `queries` of them (playground/analysis/heads.py)"},
            "overlap": OVERLAP.get(m.key, "not recorded"), "check": check}


def corpus_record(path: Path = CORPUS) -> dict:
    """The corpus sample's name, size and sha256, as the shipped file records them."""
    data = path.read_bytes()
    return {"file": f"assets/{path.name}", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "licence": "assets/DATA_LICENSES.md"}


def shipped(model_id: str, folder: Path = STATS_DIR) -> dict:
    """The shipped statistics of a model (its id), or a HeadStatsError naming the command that makes them."""
    path = folder / f"{model_id}.json"
    if not path.is_file():
        raise HeadStatsError(f"No corpus statistics are shipped for {model_id}: run "
                             f"`python -m playground.tools.head_stats --model {model_id}`, or rank its heads on your "
                             "own text.")
    return json.loads(path.read_text(encoding="utf-8"))


def text_stats(m: att.AttentionModel, text: str, notices: list[str]) -> tuple[dict, list[str]]:
    """The six statistics of every head on the user's text (the Attention tab's encoding and kept attention), and
    its tokens; a HeadStatsError for a text of one token."""
    enc = att.prepare(m, text, "", notices)
    if len(enc.ids) < 2:
        raise HeadStatsError(f"“{text[:40]}” is one token for {m.label.split(' (')[0]}: the statistics need a query "
                             "with something before it. Type a sentence.")
    means = heads.stats(att.attention(m, enc), enc.ids)
    for name in ("duplicate", "induction"):
        if means[name] is None:
            notices.append(f"No token of this text occurs twice: the {name} score is undefined here (try the "
                           "repeated words example, or the corpus).")
    return _rounded(means), enc.tokens


def find(m: att.AttentionModel, source: str, stat: str, order: str, text: str, notices: list[str]) -> dict:
    """Every head of the model ranked by `stat` over the corpus (the shipped file) or the text: the head finder's
    JSON, with every statistic of each head in the order of the ranking."""
    if source == "corpus":
        record = shipped(m.key)
        table, where = record["stats"], {"corpus": record["corpus"]["file"], "protocol": record["protocol"]}
    else:
        table, tokens = text_stats(m, text, notices)
        where = {"tokens": tokens}
    if table[stat] is None:
        raise HeadStatsError(f"The {stat} score is undefined on this text (no token occurs twice): rank by another "
                             "statistic, or over the corpus.")
    ranked = heads.ranking(np.array(table[stat]), descending=order == "largest")
    rows = [{"layer": l, "head": h, **{k: (None if v is None else v[l][h]) for k, v in table.items()}}
            for l, h, _ in ranked]
    return {"model": m.key, "source": source, "stat": stat, "order": order, "layers": m.n_layer, "heads": m.n_head,
            "ranking": rows, "stats": table, **where, "notices": notices}
