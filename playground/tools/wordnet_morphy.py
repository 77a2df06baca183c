"""`python -m playground.tools.wordnet_morphy DICT_DIR OUT`: what WordNet's morphy needs, as one compact file.

Morphy (WordNet's morphological processor, morphy(7WN)) turns an inflected word into its base form with two things
per part of speech: the exception lists (`noun.exc`, `verb.exc`, `adj.exc`, `adv.exc`: irregular forms such as
"was be", "better good") and the index of lemmas (`index.noun`, ...), against which every candidate made by the
detachment rules is checked. This writes exactly those, plus each lemma's tagsense_cnt (how many of its senses were
tagged in the semantic concordance, SemCor), which the lemmatizer's part-of-speech guess reads:

    {"source": ..., "licence": ..., "lemmas": {"n": "lemma count\\n...", "v": ..., "a": ..., "r": ...},
     "exceptions": {"n": "form base [base ...]\\n...", ...}}

gzip-compressed with a zero timestamp, so the same input gives the same bytes (and the same sha256). The input is
Debian's `wordnet-base` (Princeton WordNet 3.0, under the WordNet 3.0 licence: assets/DATA_LICENSES.md):

    apt-get install -y wordnet-base
    python -m playground.tools.wordnet_morphy /usr/share/wordnet assets/wordnet/morphy.json.gz

It also writes `card.json` beside OUT: the source files with their sha256, the output's sha256 and this command.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}   # WordNet's pos letters and its file names
SOURCE = "Princeton WordNet 3.0, Debian package wordnet-base 1:3.0-37"
LICENCE = "WordNet 3.0 licence (assets/DATA_LICENSES.md); Copyright 2006 by Princeton University"


def index_lemmas(path: Path) -> str:
    """`index.<pos>` as "lemma tagsense_cnt" lines. An index line is: lemma pos synset_cnt p_cnt, then p_cnt pointer
    symbols, then sense_cnt and tagsense_cnt, then the synset offsets; the licence header lines start with spaces."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith(" "):
            continue
        fields = line.split()
        p_cnt = int(fields[3])
        rows.append(f"{fields[0]} {int(fields[4 + p_cnt + 1])}")
    return "\n".join(rows)


def exceptions(path: Path) -> str:
    """`<pos>.exc` as it is: "inflected base [base ...]" lines."""
    return "\n".join(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def build(dict_dir: Path, out: Path, command: str) -> dict:
    """Write the compressed file and its card; returns the card."""
    data = {"source": SOURCE, "licence": LICENCE,
            "lemmas": {p: index_lemmas(dict_dir / f"index.{name}") for p, name in POS_FILES.items()},
            "exceptions": {p: exceptions(dict_dir / f"{name}.exc") for p, name in POS_FILES.items()}}
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    files = [f"index.{n}" for n in POS_FILES.values()] + [f"{n}.exc" for n in POS_FILES.values()]
    card = {"file": out.name, "sha256": hashlib.sha256(out.read_bytes()).hexdigest(), "bytes": out.stat().st_size,
            "source": SOURCE, "licence": LICENCE, "command": command,
            "source_files": [{"file": f, "sha256": hashlib.sha256((dict_dir / f).read_bytes()).hexdigest()}
                             for f in files],
            "lemmas": {p: data["lemmas"][p].count("\n") + 1 for p in POS_FILES},
            "exceptions": {p: data["exceptions"][p].count("\n") + 1 for p in POS_FILES}}
    (out.parent / "card.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return card


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dict_dir", type=Path, help="WordNet 3.0's dict folder (Debian: /usr/share/wordnet)")
    parser.add_argument("out", type=Path, help="the .json.gz file to write")
    args = parser.parse_args(argv)
    command = "python -m playground.tools.wordnet_morphy " + " ".join(sys.argv[1:] if argv is None else argv)
    card = build(args.dict_dir, args.out, command)
    print(f"{args.out}: {card['bytes']:,} bytes, sha256 {card['sha256']}, lemmas {card['lemmas']}")


if __name__ == "__main__":
    main()
