"""Masked-LM fill-in: text with [MASK]s in, the model's guesses out, in the format of the
`transformers` fill-mask pipeline; and the pieces of "How BERT was trained" (BERT's 15% / 80-10-10
masking of a sentence, the input representation of a sentence pair, the NSP prediction).

Any model with the contract of `playground.nets.bert.BertForPreTraining` serves:
`model(idx, token_type_ids=None, attention_mask=None) -> (logits (B, T, V), loss)`, with its encoder
as `model.bert` (a `BertEncoder`) and an NSP head as `model.nsp` (None when it has none). The
tokenizer is a `tokenizers.Tokenizer` whose vocabulary has [CLS], [SEP] and [MASK] as special tokens.

The output follows `transformers.FillMaskPipeline` (transformers/pipelines/fill_mask.py) exactly:
for one mask, a list of `{score, token, token_str, sequence}`, the top_k most probable tokens,
`sequence` being the whole text with that token in place of the mask (special tokens left out); for
several masks, one such list per mask, in order, and each mask is predicted from the same input,
where the other masks are still [MASK]: the scores are the per-position marginals p(x_i | input), not
a joint guess of all the masks together (the pipeline's "experimental" multi-mask behaviour; its
`sequence` then keeps [CLS], [SEP] and the other [MASK]s, and so does ours).

What is accepted: "[MASK]" in any case ("[mask]", "[Mask]") and RoBERTa's "<mask>", with or without
spaces around it, glued to punctuation ("the [MASK]." / "[MASK],") or to a word ("un[MASK]"). A text
longer than the model's positions is cut to a window that holds the masks, with a notice; a mask
that cannot fit is never dropped silently.

References: Devlin et al. 2019 (BERT: MLM with 15% selected and 80/10/10 replacement, NSP, the
input representation E_tok + E_seg + E_pos, Fig. 2); the `transformers` fill-mask pipeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import torch

from playground.nets import bert
from playground.text import Encoded
from playground.text import MASK, words as text_words

MASK_SPELLINGS = re.compile(r"\[\s*mask\s*\]|<\s*mask\s*>", re.IGNORECASE)  # what we read as a mask
SPECIAL_NAMES = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class FillMaskError(ValueError):
    """Input the fill-in cannot answer (no mask, nothing left to read): the message says what to do."""


def check_model(model, tokenizer) -> None:
    """Refuse a model that does not keep the masked-LM contract: a vocabulary with [CLS], [MASK] and [SEP],
    model(idx) -> (logits (B, T, V), loss), an encoder at model.bert with at least 8 positions."""
    ids = [tokenizer.token_to_id(t) for t in ("[CLS]", "[MASK]", "[SEP]")]
    if None in ids:
        raise FillMaskError("its vocabulary has no [CLS], [MASK] or [SEP]")
    with torch.inference_mode():
        logits, _ = model(torch.tensor([ids]))
    if logits.shape[:2] != (1, 3) or n_positions(model) < 8:
        raise FillMaskError("its model does not keep the masked-LM contract: model(idx) -> (logits, loss)")


# ---------------------------------------------------------------------------------------------
# Reading the text


def normalise_masks(text: str) -> tuple[str, int]:
    """Every accepted spelling of a mask ("[mask]", "[ MASK ]", "<mask>") as "[MASK]"; returns the
    text and how many spellings were rewritten."""
    rewritten = 0

    def fix(match: re.Match) -> str:
        nonlocal rewritten
        rewritten += match.group(0) != MASK
        return MASK

    return MASK_SPELLINGS.sub(fix, text), rewritten


def words(text: str) -> list[tuple[int, int, str]]:
    """The units a click can mask: (start, end, piece) for each word, punctuation mark and [MASK]."""
    return text_words(text, marks=True)


def mask_word(text: str, word_index: int) -> str:
    """Click-to-mask: the text with its `word_index`-th unit (see `words`) replaced by [MASK]. A unit
    that is already a mask, or an index out of range, leaves the text as it is."""
    units = words(text)
    if not 0 <= word_index < len(units):
        return text
    start, end, piece = units[word_index]
    if piece.upper() == MASK:
        return text
    return text[:start] + MASK + text[end:]


def special_ids(tokenizer) -> dict[str, int]:
    """The ids of BERT's special tokens that the vocabulary has."""
    found = {name: tokenizer.token_to_id(name) for name in SPECIAL_NAMES}
    return {name: i for name, i in found.items() if i is not None}


def n_positions(model) -> int:
    """How many tokens the model reads at once, [CLS] and [SEP] included."""
    return int(model.bert.embeddings.pos.num_embeddings)


def encode(tokenizer, text: str, max_tokens: int) -> tuple[Encoded, list[int], list[str]]:
    """[CLS] text [SEP] (`bert.encode`), cut to `max_tokens` around the masks: the window is centred on
    the masks when they all fit; when they span more than the window, it starts at the first mask and the
    masks past its end are named in a notice. Returns the encoding, the positions of its masks, and the
    notices."""
    ids_of = special_ids(tokenizer)
    for name in ("[CLS]", "[SEP]", "[MASK]"):
        if name not in ids_of:
            raise FillMaskError(f"The tokenizer has no {name} token: it is not a masked-LM vocabulary.")
    mask_id = ids_of["[MASK]"]
    text, rewritten = normalise_masks(text)
    notices = [f"Read {rewritten} mask spelling(s) such as “[mask]” or “<mask>” as [MASK]."] if rewritten else []
    tokens = tokenizer.encode(text, add_special_tokens=False).ids
    where = [i for i, t in enumerate(tokens) if t == mask_id]
    if not where:
        raise FillMaskError("There is no [MASK] in the text. Write [MASK] where a word is missing "
                            "(e.g. “The cat sat on the [MASK].”), or click a word to mask it.")
    room = max_tokens - 2
    assert room >= 1, f"max_tokens {max_tokens} leaves no room between [CLS] and [SEP]"
    n = len(tokens)
    start = 0
    if n > room:
        first, last = where[0], where[-1]
        if last - first < room:  # every mask fits: centre them
            start = min(max(0, (first + last + 1) // 2 - room // 2), n - room)
            start = min(start, first)
            start = max(start, last - room + 1)
        else:
            start = first
        end = start + room
        lost = [i for i in where if i >= end]
        notices.append(f"The text has {n:,} tokens; the model reads at most {room:,} (plus [CLS] and [SEP]): "
                       f"kept tokens {start:,} to {end - 1:,}, the window around the masks.")
        if lost:
            notices.append(f"{len(lost)} of the {len(where)} masks lie beyond that window and are not predicted; "
                           "put the masks closer together or shorten the text.")
    enc = bert.encode(tokenizer, text, max_len=max_tokens, start=start)
    return enc, [i for i, t in enumerate(enc.ids) if t == mask_id], notices


# ---------------------------------------------------------------------------------------------
# Predicting


@dataclass
class Prediction:
    ids: list[int]                 # the input: [CLS] ... [SEP]
    masks: list[int]               # positions of the masks in ids
    scores: np.ndarray             # (n_masks, k) probabilities, best first
    tokens: np.ndarray             # (n_masks, k) token ids
    notices: list[str] = field(default_factory=list)


def mask_logits(model, idx: torch.Tensor, masks: list[int], fast: bool | None = None) -> torch.Tensor:
    """The MLM logits (n_masks, V) at the mask positions of one input idx (1, T). With `fast`, the
    encoder (`model.bert`) runs on the whole input and the MLM head (`model.mlm`) at the masks only:
    the decoder onto the vocabulary (T x C x V: 375M multiply-adds for 32 tokens and 30,522 words)
    is about half of the work for a whole sentence, and only the masks need it. fast=None takes the
    shortcut for our own BertForPreTraining, whose forward is exactly that; another model runs its
    whole forward unless `fast_path_agrees` has vouched for it."""
    from playground.nets.bert import BertForPreTraining

    if fast is None:
        fast = type(model) is BertForPreTraining
    if fast:
        h, _ = model.bert(idx)                                           # (1, T, C)
        return model.mlm(h[0, masks], model.bert.embeddings.tok.weight)  # (n_masks, V): the tied decoder
    logits, _ = model(idx)                                               # (1, T, V)
    return logits[0, masks]


def fast_path_agrees(model, tokenizer) -> bool:
    """Whether `mask_logits`' shortcut gives the numbers of the model's own forward on a probe input
    (a model shaped like BertForPreTraining whose forward computes something else does not)."""
    if not all(hasattr(model, a) for a in ("bert", "mlm")):
        return False
    ids = special_ids(tokenizer)
    idx = torch.tensor([[ids["[CLS]"], ids["[MASK]"], ids["[MASK]"], ids["[SEP]"]]])
    with torch.inference_mode():
        full = mask_logits(model, idx, [1, 2], fast=False)
        try:
            short = mask_logits(model, idx, [1, 2], fast=True)
        except Exception:
            return False
    return short.shape == full.shape and bool(torch.allclose(short, full, atol=1e-4, rtol=1e-4))


def predict(model, tokenizer, text: str, top_k: int = 5, max_tokens: int | None = None,
            max_masks: int | None = None, fast: bool | None = None) -> Prediction:
    """One forward pass; at each mask, the softmax over the vocabulary and its top_k (clamped to the
    vocabulary's size, with a notice). With `max_masks`, only the first max_masks masks get an answer
    (and a notice says so); every mask still stays [MASK] in the input the model reads."""
    enc, masks, notices = encode(tokenizer, text, max_tokens or n_positions(model))
    if max_masks is not None and len(masks) > max_masks:
        notices.append(f"The text has {len(masks)} masks; predictions are shown for the first {max_masks}.")
        masks = masks[:max_masks]
    idx = torch.tensor([enc.ids], dtype=torch.long)                # (1, T)
    with torch.inference_mode():
        logits = mask_logits(model, idx, masks, fast)              # (n_masks, V)
        probs = logits.float().softmax(dim=-1)                     # (n_masks, V): p(x_i | input) at each mask
        V = probs.size(-1)
        k = int(top_k)
        if k > V:
            notices.append(f"top_k {k} is larger than the vocabulary ({V:,} tokens); using {V:,}.")
            k = V
        assert k >= 1, f"top_k must be at least 1, not {top_k}"
        values, indices = probs.topk(k, dim=-1)                    # (n_masks, k)
    return Prediction(enc.ids, masks, values.numpy(), indices.numpy(), notices)


def pipeline_format(tokenizer, pred: Prediction) -> list:
    """The pipeline's output for a prediction (see the module docstring): for each mask and each of
    its top tokens, the input with that token in that mask's place, decoded."""
    single = len(pred.masks) == 1
    out = []
    for position, values, indices in zip(pred.masks, pred.scores.tolist(), pred.tokens.tolist()):
        row = []
        for v, p in zip(values, indices):
            ids = list(pred.ids)
            ids[position] = p
            # one mask: special tokens dropped for a readable sentence; several: kept, as the pipeline
            # does, so the other [MASK]s stay visible
            row.append({"score": v, "token": p, "token_str": tokenizer.decode([p], skip_special_tokens=False),
                        "sequence": tokenizer.decode(ids, skip_special_tokens=single)})
        out.append(row)
    return out[0] if single else out


def fill_mask(model, tokenizer, text: str, top_k: int = 5, max_tokens: int | None = None,
              notices: list[str] | None = None, fast: bool | None = None) -> list:
    """The fill-mask pipeline's answer for `text` (one list of {score, token, token_str, sequence}
    per mask; the list itself for one mask). Notices (truncation, top_k clamped, mask spellings) are
    appended to `notices`. Raises FillMaskError when there is no mask."""
    pred = predict(model, tokenizer, text, top_k, max_tokens, fast=fast)
    if notices is not None:
        notices.extend(pred.notices)
    return pipeline_format(tokenizer, pred)


# ---------------------------------------------------------------------------------------------
# How BERT was trained: the masking of one sentence


ACTIONS = ("not selected", "[MASK]", "random token", "kept")  # playground.training.bert's action codes 0..3


def masking_demo(tokenizer, text: str, seed: int, whole_word: bool = False, prob: float = 0.15,
                 replace: tuple[float, float, float] = (0.8, 0.1, 0.1), max_tokens: int = 128,
                 n_draws: int = 2_000) -> dict:
    """BERT's masking (playground.training.bert.mask_tokens) applied to one sentence with a seed: for each
    token, what happened to it and what the model sees. Also the same masking drawn `n_draws` times
    on this sentence, to compare the observed rates with 15% and 80/10/10."""
    from playground.training import masking as mlm

    ids_of = special_ids(tokenizer)
    enc = tokenizer.encode(text, add_special_tokens=False)
    body = enc.ids[: max_tokens - 2]
    if not body:
        raise FillMaskError("Type a sentence to mask (it has no token the vocabulary knows).")
    ids = [ids_of["[CLS]"]] + body + [ids_of["[SEP]"]]
    word = [-1] + [(-1 if w is None else w) for w in enc.word_ids[: len(body)]] + [-1]
    T = len(ids)
    x = torch.tensor([ids])                                        # (1, T)
    special = torch.tensor([[i in ids_of.values() for i in ids]])   # (1, T): never selected
    word_ids = torch.tensor([word]) if whole_word else None
    vocab = tokenizer.get_vocab_size()
    low = max(ids_of.values()) + 1 if max(ids_of.values()) + 1 < vocab else 0  # random tokens: not a special one
    common = dict(mask_id=ids_of["[MASK]"], vocab_size=vocab, prob=prob, replace=replace, random_low=low)
    g = torch.Generator().manual_seed(int(seed))
    m = mlm.mask_tokens(x, special=special, word_ids=word_ids, generator=g, **common)
    action = m.action[0].tolist()
    seen = m.input_ids[0].tolist()

    many = mlm.mask_tokens(x.expand(n_draws, T), special=special.expand(n_draws, T),
                           word_ids=None if word_ids is None else word_ids.expand(n_draws, T),
                           generator=torch.Generator().manual_seed(int(seed)), **common)
    a = many.action
    n_eligible = int((~special).sum()) * n_draws
    n_selected = int((a > 0).sum())
    rates = {"selected": n_selected / max(n_eligible, 1)}
    for code, name in ((1, "mask"), (2, "random"), (3, "kept")):
        rates[name] = int((a == code).sum()) / max(n_selected, 1)

    return {"tokens": [tokenizer.id_to_token(i) for i in ids], "ids": ids,
            "input_tokens": [tokenizer.id_to_token(i) for i in seen], "input_ids": seen,
            "action": action, "action_names": [ACTIONS[c] for c in action], "word_ids": word,
            "labels": m.labels[0].tolist(), "seed": int(seed), "whole_word": bool(whole_word),
            "prob": prob, "replace": list(replace), "n_cut": max(0, len(enc.ids) - len(body)),
            "draws": {"n": n_draws, **{k: round(v, 4) for k, v in rates.items()}}}


# ---------------------------------------------------------------------------------------------
# How BERT was trained: the input representation of a sentence pair, and NSP


def input_representation(model, tokenizer, text_a: str, text_b: str | None, max_tokens: int | None = None) -> dict:
    """[CLS] A [SEP] B [SEP] as BERT reads it: ids, segment ids and positions, and the three
    embeddings from the model's own tables, E_tok[x_t], E_seg[s_t], E_pos[t], with their sum and the
    LayerNorm of the sum (what the first block receives, h_0). With an NSP head, p(IsNext), p(NotNext)."""
    pair = bool(text_b) and bool(tokenizer.encode(text_b, add_special_tokens=False).ids)  # B has a token
    enc = bert.encode(tokenizer, text_a, text_b if pair else None, max_len=max_tokens or n_positions(model))
    if enc.segments.count(0) == 2:                                   # [CLS] [SEP]: nothing of A
        raise FillMaskError("Sentence A is empty (or has no token the vocabulary knows).")
    ids, segments, cut = enc.ids, enc.segments, enc.n_cut
    emb = model.bert.embeddings
    idx = torch.tensor([ids])                                        # (1, T)
    seg = torch.tensor([segments])                                   # (1, T)
    pos = torch.arange(len(ids))                                     # (T,)
    with torch.inference_mode():
        e_tok, e_seg, e_pos = emb.tok(idx)[0], emb.seg(seg)[0], emb.pos(pos)  # (T, C) each
        total = e_tok + e_seg + e_pos                                # (T, C): Devlin et al. 2019, Fig. 2
        h0 = emb.ln(total)                                           # (T, C): normalised, the first block's input
        nsp = None
        if getattr(model, "nsp", None) is not None:
            _, pooled = model.bert(idx, seg)                          # (1, C): tanh(h_L[CLS] W_p + b_p)
            p = model.nsp(pooled).softmax(dim=-1)[0]                  # (2,): IsNext (0), NotNext (1)
            nsp = {"IsNext": float(p[0]), "NotNext": float(p[1])}
    return {"tokens": [tokenizer.id_to_token(i) for i in ids], "ids": ids, "segments": segments,
            "positions": list(range(len(ids))), "n_cut": cut, "pair": pair,
            "token_embedding": e_tok.numpy(), "segment_embedding": e_seg.numpy(),
            "position_embedding": e_pos.numpy(), "sum": total.numpy(), "layer_norm": h0.numpy(), "nsp": nsp}
