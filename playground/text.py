"""Text as every tab reads it: input hygiene (`clean_text`), the one word splitter (`words`), and `Encoded`, a
text as a model reads it (its tokens and ids).

A word is a run of letters and digits with their combining marks (accents, Arabic harakat, Hebrew points)
and inner apostrophes, or an emoji sequence (joiners, variation selectors and skin tones included), so
"don't", "naïve", "Ελληνικά", "مرحبا" and "👩‍💻" are one word each; a typed `[MASK]` is one word too (the
selected word `MASK` in brackets was masked into "[[MASK]]"). Control characters, spaces and punctuation separate
words. The same words are the sentence's chips, the units a click masks in the Masked-LM tab, the words the
normaliser and the "why this split" panel read, and the vocabulary of the classic bag-of-words and TF-IDF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MASK = "[MASK]"
MAX_CHARS = 5_000  # longest free text a view reads; longer input is cut with a notice

_LETTER = r"[\w\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u064b-\u065f\u0670]"
_EMOJI = r"[\U0001F000-\U0001FAFF\u2600-\u27bf\u200d\ufe0f\U0001F3FB-\U0001F3FF]"
_WORD = rf"(?:{_LETTER}|(?<=\w)['’](?=\w)|{_EMOJI})+"
_MARK = r"[^\w\s]"                                          # one punctuation mark or symbol
WORDS = re.compile(rf"{re.escape(MASK)}|{_WORD}")                  # [MASK] is one unit, never "MASK" in brackets
WORDS_AND_MARKS = re.compile(rf"{re.escape(MASK)}|{_WORD}|{_MARK}")


def words(text: str | None, marks: bool = False) -> list[tuple[int, int, str]]:
    """(start, end, word) for every word of the text, in order, every [MASK] one word; with `marks`, every
    punctuation mark is a unit of its own too. Offsets are Python string indices (code points)."""
    pattern = WORDS_AND_MARKS if marks else WORDS
    return [(m.start(), m.end(), m.group(0)) for m in pattern.finditer(text or "")]


def clean_text(text: str | None, max_chars: int = MAX_CHARS) -> tuple[str, list[str]]:
    """Make any input safe to tokenize and show: None -> '', lone surrogates -> U+FFFD, cut to
    `max_chars` (at a character boundary). Returns the text and notices for the user."""
    notices = []
    text = text or ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
        notices.append("Some characters were not valid Unicode (lone surrogates) and were replaced by '?'.")
    if len(text) > max_chars:
        notices.append(f"The text has {len(text):,} characters; only the first {max_chars:,} are used here.")
        text = text[:max_chars]
    return text, notices


def token_label(token: str) -> str:
    """A token as text for tables, tooltips and notices: whitespace and controls spelled out."""
    spelled = {" ": "·", "\n": "↵", "\t": "→"}
    return "".join(spelled.get(ch, f"\\x{ord(ch):02x}" if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F else ch)
                   for ch in token)


@dataclass
class Encoded:
    """A text as a model reads it: its tokens, their ids, and for BERT's pairs [CLS] A [SEP] (B [SEP]) the segment of
    each position. Every family's input in the views (attention, fill-in, generation); made by nets/bert.py's
    `encode` for WordPiece pairs and by the analysis modules for the other tokenizers."""

    tokens: list[str]             # one label per position
    ids: list[int]
    segments: list[int]           # 0 for [CLS], A and its [SEP]; 1 for B and its [SEP]
    n_cut: int = 0                # tokens of A and B left out to fit max_len
    spans: list[tuple[int, int]] = field(default_factory=list)  # characters of A per position; (-1, -1) for
                                                                # the special tokens and sentence B
