"""Text through every tokenizer the Generation and Tokenization tabs use, and back: emoji (a ZWJ sequence too),
accents (é as one code point and as two), CJK. Each character is shown once: the Generation tab's prompt is the
text the model reads, its steps' tokens concatenate to its text, and the Tokenization tab's text and its table of
tokens spell the text once. (Issue #32: SmolLM2 splits 👋 into three byte tokens that each carry the emoji's
offsets, and the Generation tab showed "Hi 👋👋👋 there".)"""

from __future__ import annotations

import html
import re
from types import SimpleNamespace

import pytest
import torch

from playground import checkpoints
from playground.analysis import tokenization
from playground.figures import generation as fgen
from playground.figures import tokenization as ft

TEXTS = ["Hi 👋 there", "👩‍💻 codes.", "naïve café", "e\u0301 is \u00e9", "日本語のテキスト"]
LOSSLESS = ("bpe", "smollm2")  # byte-level BPE: every text comes back as it was typed


@pytest.fixture(scope="module")
def generation_tab():
    from playground.ui import generation_tab

    return generation_tab


@pytest.fixture(scope="module")
def tokenizers(generation_tab):
    """The Tokenization tab's tokenizers by key, and each Generation model's by its name (SmolLM2's is the
    Tokenization tab's `smollm2`)."""
    found = dict(tokenization.load_all())
    found.update({name: generation_tab.models.get(name).tokenizer for name in generation_tab.LISTED
                  if name != generation_tab.SMOLLM2})
    return found


TAB_KEYS = list(tokenization.SPECS)
MODEL_NAMES = [name for kind in ("gpt", "lstm", "gru", "rnn", "ngram") for name in checkpoints.available(kind)]


def get(tokenizers, key):
    if key not in tokenizers:
        pytest.skip(f"{key} is not installed here")
    return tokenizers[key]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("key", TAB_KEYS + MODEL_NAMES)
def test_pieces_concatenate_to_the_decoded_text(tokenizers, key, text):
    tok = get(tokenizers, key)
    ids = tok.encode(text, add_special_tokens=False).ids
    pieces = tokenization.Detokenizer(tok).pieces(ids)
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=False)
    if key in LOSSLESS:
        assert "".join(pieces) == text


def test_a_byte_token_that_completes_a_character_adds_it_once(tokenizers):
    tok = get(tokenizers, "smollm2")
    ids = tok.encode("Hi 👋 there", add_special_tokens=False).ids
    assert len(ids) == 5  # 'Hi', ' ' + two bytes of 👋, its third byte, its fourth byte, ' there'
    assert tokenization.Detokenizer(tok).pieces(ids) == ["Hi", " ", "", "👋", " there"]
    # a stream cut inside a character ends with U+FFFD, as decode shows it
    assert tokenization.Detokenizer(tok).pieces(ids[:3]) == ["Hi", " ", "\ufffd"] and tok.decode(ids[:3]) == "Hi \ufffd"


class Scripted(torch.nn.Module):
    """A causal LM that continues any prefix of `sequence` with its next token: position t's logits put all the
    mass on sequence[t + 1]. Through the tab's handler it 'generates' whatever the test scripts."""

    def __init__(self, vocab_size: int, sequence: list[int]):
        super().__init__()
        self.vocab_size, self.sequence = vocab_size, sequence

    def step(self, idx, cache=None):
        start, (B, T) = cache or 0, idx.shape
        logits = torch.full((B, T, self.vocab_size), -1e4)
        for t in range(T):
            logits[:, t, self.sequence[min(start + t + 1, len(self.sequence) - 1)]] = 0.0
        return logits, start + T

    def forward(self, idx, targets=None):
        return self.step(idx)[0], None


def scripted(monkeypatch, generation_tab, tok, prompt_ids, script) -> str:
    """A model named 'scripted' in the Generation tab that answers `script` after `prompt_ids`."""
    model = Scripted(tok.get_vocab_size(), prompt_ids + script)
    from playground.analysis import models

    shape = models.Shape(1, 1)
    record = models.Model("scripted", "scripted", "gpt", "gpt", model, tok,
                          SimpleNamespace(vocab_size=tok.get_vocab_size()), {}, None, shape)
    monkeypatch.setitem(models._loaded, "scripted", record)  # as the registry holds a loaded model
    return "scripted"


def shown_text(view: str) -> str:
    """The text a generated view shows on the page: its .gen-text, tags stripped."""
    body = re.search(r'<div class="gen-text"[^>]*>(.*)</div>$', view, re.S).group(1)
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def kept_ids(tok, text):
    unk = tokenization.unk_id(tok)
    return [i for i in tok.encode(text, add_special_tokens=False).ids if i != unk]


GENERATION_KEYS = ["smollm2", "bpe", "wordpiece", "unigram", "minilm", *MODEL_NAMES]


def test_the_api_docs_say_what_generates_text_is():
    """docs/api.md's /generate row says what the test below checks: `text` is `prompt` followed by the steps' tokens
    (it once said the steps alone concatenate to `text`)."""
    row = next(line for line in (checkpoints.ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `generate` |"))
    assert "`prompt` and the steps' tokens concatenate to `text`" in row
    assert "the steps' tokens concatenate to `text`" not in row.replace("`prompt` and the steps'", "")


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("key", GENERATION_KEYS)
def test_the_generation_tab_shows_each_character_once(monkeypatch, generation_tab, tokenizers, key, text):
    """The prompt typed, then the model 'saying' it again: the shown prompt is the text the model reads, the steps'
    tokens concatenate to what follows it, and the page shows that text."""
    tok = get(tokenizers, key)
    prompt_ids = kept_ids(tok, text) or tok.encode("\n", add_special_tokens=False).ids  # nothing known: a new line
    if not prompt_ids:  # WordPiece reads a new line as nothing (the tab's models are character and byte models)
        pytest.skip(f"{key} knows no character of {text!r}, nor a new line")
    name = scripted(monkeypatch, generation_tab, tok, prompt_ids, prompt_ids)
    view, _, _, _, data = list(generation_tab.generate(text, name, len(prompt_ids), "greedy", 1, 10, 0.9, 0))[-1]
    assert [s["id"] for s in data["steps"]] == prompt_ids  # the script was followed
    assert data["prompt"] == tok.decode(prompt_ids, skip_special_tokens=False)
    assert data["text"] == tok.decode(prompt_ids + prompt_ids, skip_special_tokens=False)
    assert data["text"] == data["prompt"] + "".join(s["token"] for s in data["steps"])
    assert shown_text(view) == data["text"]
    if key in LOSSLESS:
        assert data["prompt"] == text and data["text"] == text + text
    elif key in MODEL_NAMES:  # a character model: the characters it knows, each once
        known = tok.get_vocab()
        assert data["prompt"] == ("".join(c for c in text if c in known) or "\n")


def test_the_comparison_shows_each_character_once(monkeypatch, generation_tab, tokenizers):
    tok = get(tokenizers, "smollm2")
    text = "Hi 👋 there, 👩‍💻 naïve e\u0301 日本語"
    ids = tok.encode(text, add_special_tokens=False).ids
    name = scripted(monkeypatch, generation_tab, tok, ids, ids)
    view_a, _, data = generation_tab.compare(text, name, name, len(ids), "greedy", 1, 10, 0.9, 0)
    result = data["models"][name]
    assert result["text"] == text + text == text + "".join(s["token"] for s in result["steps"])
    assert shown_text(view_a) == text + text


def test_a_partial_byte_is_named_by_its_bytes_and_the_chosen_bar_by_its_rank(monkeypatch, generation_tab, tokenizers):
    tok = get(tokenizers, "smollm2")
    ids = tok.encode("Hi 👋", add_special_tokens=False).ids
    name = scripted(monkeypatch, generation_tab, tok, ids, ids)
    *_, data = list(generation_tab.generate("Hi 👋", name, len(ids), "greedy", 1, 10, 0.9, 0))[-1]
    part = next(i for i, s in enumerate(data["steps"]) if s["token"] == "")
    step = data["steps"][part]
    assert step["rank"] == 1 and step["bytes"] == tokenization.token_bytes(tok.id_to_token(step["id"])).hex(" ")
    fig = fgen.next_token_figure(step, part, ())
    assert "part of a character" in fig.layout.title.text
    assert list(fig.data[0].marker.color).count(fgen.ACCENT) == 1 and fig.data[0].marker.color[0] == fgen.ACCENT


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("key", TAB_KEYS)
def test_the_tokenization_tab_spells_the_text_once(tokenizers, key, text):
    """The coloured text and the table of tokens: each character a token covers, once (the byte tokens of one
    character share its offsets)."""
    tok = get(tokenizers, key)
    result = tokenization.encode(tok, text)
    covered = [False] * len(text)
    for start, end in result["offsets"]:
        covered[start:end] = [True] * (end - start)
    characters = ft.token_characters(text, result["offsets"])
    assert "".join(characters) == "".join(c for c, on in zip(text, covered) if on)
    table = ft.tokens_table({"text": text, "notices": [], "tokenizers": {key: {"label": key, **result}}})
    assert list(table["characters"]) == [ft.token_label(c) for c in characters]
    spans = [(int(a), int(b)) for a, b in re.findall(r'data-s="(\d+)" data-e="(\d+)"', ft.token_spans_html(text, result))]
    shown = [i for a, b in spans for i in range(a, b)]  # the coloured spans: each covered character in one of them
    assert shown == [i for i, on in enumerate(covered) if on]
