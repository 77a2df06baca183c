"""`python -m playground.tools.wordnet_entries DATA_NOUN OUT`: WordNet's noun entries as English sentences.

The shared corpus's `wordnet_glosses.txt` holds each gloss alone ("the capital and largest city of France"), so a
model reading it never sees which word a gloss defines. This writes one sentence per noun synset of WordNet's
`data.noun`, in the file's order, naming the word and its synonyms before the definition:

    Paris, also City of Light, French capital or capital of France, is the capital and largest city of France;
    and international center of culture and commerce.

A definition's domain label stays in front, "(Greek mythology) Paris is the prince of Troy who ...", and its usage
examples (the quoted parts after the definition) are left out: the glosses file has them. The input is Debian's
`wordnet-base` (Princeton WordNet 3.0, under the WordNet 3.0 licence, whose notice must accompany the file):

    apt-get download wordnet-base && dpkg-deb -x wordnet-base_*.deb wn
    python -m playground.tools.wordnet_entries wn/usr/share/wordnet/data.noun wordnet_entries.txt
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

_LABEL = re.compile(r"^(\([^()]*\))\s*")   # a leading domain label: "(Greek mythology) the prince of Troy"


def _words(fields: list[str]) -> list[str]:
    """A synset line's words: after offset, lex_filenum, ss_type, the hex count w_cnt, then (word, lex_id) pairs.
    A word may carry an adjective marker such as "(p)"; underscores stand for spaces."""
    count = int(fields[3], 16)
    words = fields[4:4 + 2 * count:2]
    return [re.sub(r"\([a-z]+\)$", "", w).replace("_", " ") for w in words]


def _definition(gloss: str) -> str:
    """The gloss up to its first usage example (`; "...`), without a trailing semicolon."""
    return re.split(r';?\s*"', gloss, maxsplit=1)[0].strip().rstrip(";").strip()


def entry(line: str) -> str | None:
    """One synset line of data.noun as a sentence, or None for the licence header and empty definitions."""
    if line.startswith(" ") or " | " not in line:
        return None
    head, gloss = line.rstrip("\n").split(" | ", 1)
    definition = _definition(gloss)
    if not definition:
        return None
    label = _LABEL.match(definition)
    prefix = f"{label.group(1)} " if label else ""
    definition = definition[label.end():] if label else definition
    word, *others = _words(head.split())
    if others:
        also = others[0] if len(others) == 1 else f"{', '.join(others[:-1])} or {others[-1]}"
        word = f"{word}, also {also},"
    return f"{prefix}{word} is {definition.rstrip('.')}."


def build(data_noun: Path, out: Path) -> int:
    """Write every noun entry of `data_noun` to `out`, one per line; returns how many."""
    with open(data_noun, encoding="utf-8") as f:
        entries = [e for e in map(entry, f) if e]
    out.write_text("\n".join(entries) + "\n", encoding="utf-8")
    return len(entries)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_noun", type=Path, help="WordNet 3.0's data.noun (Debian wordnet-base)")
    parser.add_argument("out", type=Path, help="the text file to write")
    args = parser.parse_args(argv)
    print(f"{build(args.data_noun, args.out):,} entries written to {args.out}")


if __name__ == "__main__":
    main()
