"""Pre-training our BERT (`python -m playground.train bert`): next-sentence pairs, the two losses, the trainer.

The masking of Devlin et al. 2019, §3.1 "Task #1: Masked LM" is training/masking.py's.

Next-sentence prediction (§3.1 "Task #2"): [CLS] A [SEP] B [SEP], where B is the segment that really
follows A half of the time (IsNext) and a segment from another document otherwise (NotNext).

References: Devlin et al. 2019 (BERT).
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from playground.nets.bert import IGNORE_INDEX, BertConfig, BertForPreTraining, pair_encoding
from playground.training import loop
from playground.training.masking import Masking, mask_tokens, topk_accuracy

# ---------------------------------------------------------------------------------------------
# Sentence pairs for next-sentence prediction
#
# The corpora are plain text, so the rule is simple and the same for every file:
#   - a blank line ends a document (an Austen paragraph, a Shakespeare speech, a Jargon File entry);
#     a file without blank lines (the Bible, one verse per line; WordNet, one gloss per line) is one
#     document, and there each line also ends a sentence (a gloss has no final full stop);
#   - inside a document, the lines are joined with spaces and split into sentences after . ! or ?
#     (and a closing quote or bracket) when whitespace and a capital letter, digit or opening quote
#     follow, except after Mr. Mrs. Dr. St.;
#   - the last `val_fraction` of each file's sentences is held out (never trained on, tokenizer included).

DATA_RULE = ("documents end at blank lines (a file without blank lines is one document, and each of its lines "
             "ends a sentence); sentences end after . ! ? (and a closing quote or bracket) before whitespace and a "
             "capital, digit or opening quote, not after Mr. Mrs. Dr. St.; IsNext: the sentences that follow A in "
             "its document; NotNext: sentences from a random other document; 50/50")

SENTENCE_END = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))"          # after . ! ? or . ! ? and a closing quote or bracket
    r"(?<!\bMr\.)(?<!\bMrs\.)(?<!\bDr\.)(?<!\bSt\.)"  # not after these abbreviations
    r"\s+(?=[\"'“‘(\[]?[A-Z0-9])")                    # whitespace, then a capital or digit (maybe quoted)


def split_documents(text: str) -> list[list[str]]:
    """Documents (lists of sentences) of one plain-text file, by the rule above."""
    lines = text.splitlines()
    by_line = not any(not line.strip() for line in lines)   # no blank line: one verse / gloss per line
    documents, block = [], []
    for line in lines + [""]:
        if line.strip():
            block.append(line.strip())
            continue
        if block:
            units = block if by_line else [" ".join(block)]
            documents.append([s for unit in units for s in SENTENCE_END.split(unit) if s.strip()])
            block = []
    return documents


@dataclass
class PairCorpus:
    """Tokenized sentences in corpus order, each with its document; pairs are drawn from one split."""

    sentences: list[list[int]]   # WordPiece ids of each sentence, no special tokens
    doc: list[int]               # the document of each sentence (unique over the whole corpus)

    def __post_init__(self):
        assert len(self.sentences) == len(self.doc), "one document id per sentence"
        n = len(self.sentences)
        # IsNext needs a sentence that has a successor in its own document
        self.starts = [i for i in range(n - 1) if self.doc[i] == self.doc[i + 1]]
        assert self.starts, "no document has two sentences: next-sentence pairs cannot be made"
        self.n_docs = len(set(self.doc))

    def _grow(self, i: int, budget: int, keep_one_after: bool) -> int:
        """End (exclusive) of a segment that starts at sentence i and takes whole sentences of i's
        document while they fit in `budget` tokens (always at least sentence i)."""
        end, used = i + 1, len(self.sentences[i])
        limit = len(self.doc) - (1 if keep_one_after else 0)
        while (end < limit and self.doc[end] == self.doc[i]
               and (not keep_one_after or self.doc[end + 1] == self.doc[i])   # B still has a sentence after A
               and used + len(self.sentences[end]) <= budget):
            used += len(self.sentences[end])
            end += 1
        return end

    def pair(self, rng: random.Random, max_len: int, nsp: bool = True) -> tuple[list[int], list[int], int]:
        """(ids_a, ids_b, label): label 0 IsNext (B really follows A in its document), 1 NotNext (B
        starts at a random sentence of another document), each with probability 1/2 (always IsNext
        when nsp is False). A takes up to half the room, B the rest; pair_encoding cuts what is over."""
        return self.pair_at(rng.choice(self.starts), rng, max_len, nsp)

    def pair_at(self, i: int, rng: random.Random, max_len: int, nsp: bool = True) -> tuple[list[int], list[int], int]:
        """`pair` with A starting at sentence i (one of `starts`): the held-out figures take every start once."""
        room = max_len - 3                                                  # [CLS] A [SEP] B [SEP]
        a_end = self._grow(i, room // 2, keep_one_after=True)              # leave a next sentence for B
        ids_a = [t for s in self.sentences[i:a_end] for t in s]
        is_next = (not nsp) or self.n_docs == 1 or rng.random() < 0.5
        if is_next:
            j = a_end
        else:
            j = rng.randrange(len(self.sentences))
            while self.doc[j] == self.doc[i]:
                j = rng.randrange(len(self.sentences))
        b_end = self._grow(j, max(1, room - len(ids_a)), keep_one_after=False)
        ids_b = [t for s in self.sentences[j:b_end] for t in s]
        return ids_a, ids_b, 0 if is_next else 1


@dataclass
class PairBatch:
    input_ids: torch.Tensor        # (B, T) [CLS] A [SEP] B [SEP] [PAD]..., before masking
    token_type_ids: torch.Tensor   # (B, T) 0 for [CLS], A and its [SEP]; 1 for B and its [SEP]; 0 on padding
    attention_mask: torch.Tensor   # (B, T) 1 for real tokens, 0 for padding
    special: torch.Tensor          # (B, T) bool: [CLS], [SEP], [PAD]: never masked
    word_ids: torch.Tensor         # (B, T) word index (a new word at every piece without "##"), -1 for specials
    next_sentence_label: torch.Tensor  # (B,) 0 IsNext, 1 NotNext


def collate(pairs: list[tuple[list[int], list[int], int]], *, cls_id: int, sep_id: int, pad_id: int,
            max_len: int, continuation: torch.Tensor) -> PairBatch:
    """Encode pairs with `pair_encoding` (BERT's truncation) and pad to the longest in the batch.
    `continuation` (V,) bool marks the "##" pieces, which continue the word before them."""
    rows = [pair_encoding(cls_id, sep_id, a, b, max_len=max_len)[:2] for a, b, _ in pairs]
    T = max(len(ids) for ids, _ in rows)
    B = len(rows)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    seg = torch.zeros((B, T), dtype=torch.long)
    for r, (row_ids, row_seg) in enumerate(rows):
        ids[r, : len(row_ids)] = torch.tensor(row_ids)
        seg[r, : len(row_seg)] = torch.tensor(row_seg)
    mask = torch.zeros((B, T), dtype=torch.long)
    for r, (row_ids, _) in enumerate(rows):
        mask[r, : len(row_ids)] = 1
    special = (ids == cls_id) | (ids == sep_id) | (mask == 0)                       # (B, T)
    starts = ~continuation[ids] & ~special                                           # a word begins here
    word_ids = torch.where(special, torch.full_like(ids, -1), starts.long().cumsum(dim=1) - 1)
    labels = torch.tensor([label for *_, label in pairs], dtype=torch.long)
    return PairBatch(ids, seg, mask, special, word_ids, labels)


# ---------------------------------------------------------------------------------------------
# Pre-training: `python -m playground.train bert --corpus FILE ... [--key=value ...]`


@dataclass
class BertTrainConfig:
    """The `bert` training kind: the vocabulary, the model's sizes, the two tasks, the optimisation.
    The optimisation fields carry LMTrainConfig's names, so loop.learning_rate / make_optimizer serve."""

    vocab_size: int = 8_192          # WordPiece vocabulary trained on the training split (bert-base: 30,522)
    n_positions: int = 128           # longest pair in tokens, [CLS] and [SEP]s included (BERT: 128, then 512)
    n_layer: int = 4                 # blocks
    n_head: int = 4                  # heads per block
    n_embd: int = 256                # width H
    n_inner: int = 1_024             # feed-forward width, 4 H
    dropout: float = 0.0             # a few CPU minutes underfit, so no dropout (BERT: 0.1 over 1M steps)
    prob: float = 0.15               # fraction of the tokens (or words) selected for prediction
    whole_word: bool = False         # select whole words, then all their pieces (BERT's 2019 option)
    nsp: bool = True                 # next-sentence prediction as the second task (RoBERTa drops it)
    val_fraction: float = 0.02       # the last 2% of each file's sentences, never trained on
    # held-out pairs per evaluation, the same each time (and half as many training ones)
    eval_pairs: int = 512
    max_iters: int = 100_000         # optimizer steps (max_seconds usually stops the run first)
    batch_size: int = 32             # sentence pairs per step
    learning_rate: float = 1e-3      # peak, after warmup
    min_lr: float = 1e-4             # floor of the cosine decay
    warmup_iters: int = 200          # linear warmup: post-norm Transformers diverge without one
    lr_decay_iters: int = 0          # cosine decay length; 0 means max_iters
    weight_decay: float = 0.01       # BERT's, on matrices only
    beta1: float = 0.9
    beta2: float = 0.98              # shorter second-moment memory than 0.999 for a short run (RoBERTa: 0.98)
    grad_clip: float = 1.0           # clip the global gradient norm; 0 turns it off
    eval_interval: int = 250         # steps between held-out evaluations (and checkpoint writes)
    max_seconds: float = 0.0         # stop after this much wall time (evaluations included); 0: no limit
    schedule: str = "steps"          # "time": after warmup the cosine decay follows the clock to max_seconds
    threads: int = 0                 # torch.set_num_threads; 0 leaves PyTorch's default
    half: bool = True                # store the weights as float16 (half the bytes); training stays float32

    def __post_init__(self):
        assert self.vocab_size >= 100, f"vocab_size={self.vocab_size} is too small for a WordPiece vocabulary"
        assert self.n_positions >= 8, f"n_positions={self.n_positions} leaves no room for a sentence pair"
        assert 0.0 < self.prob < 1.0, f"prob={self.prob} must be between 0 and 1"
        assert 0.0 < self.val_fraction < 0.5, f"val_fraction={self.val_fraction} must be between 0 and 0.5"
        assert self.max_iters >= 1 and self.batch_size >= 1, "max_iters and batch_size must be positive"
        assert 0 <= self.min_lr <= self.learning_rate, f"min_lr={self.min_lr} must lie in [0, learning_rate]"
        assert self.eval_interval >= 1 and self.eval_pairs >= 1, "eval_interval and eval_pairs must be positive"
        assert self.schedule in ("steps", "time"), f"schedule must be 'steps' or 'time', not {self.schedule!r}"
        assert self.schedule == "steps" or self.max_seconds > 0, "schedule=time needs max_seconds"

    def model_config(self, vocab_size: int) -> BertConfig:
        return BertConfig(vocab_size=vocab_size, n_positions=self.n_positions, n_layer=self.n_layer,
                          n_head=self.n_head, n_embd=self.n_embd, n_inner=self.n_inner, dropout=self.dropout)


def pretraining_losses(model: BertForPreTraining, batch: PairBatch, masking: Masking, nsp: bool = True):
    """The two losses of BertForPreTraining, with the MLM head run only on the selected positions (as
    BERT's run_pretraining.py gathers them): ~15% of the (B, T, V) logits, the same mean cross-entropy.
    Returns (mlm_loss, nsp_loss or None, logits (N, V) of the N selected positions, their labels (N,),
    nsp_logits (B, 2))."""
    h, pooled = model.bert(masking.input_ids, batch.token_type_ids, batch.attention_mask)  # (B, T, C), (B, C)
    selected = masking.labels != IGNORE_INDEX                                    # (B, T)
    logits = model.mlm(h[selected], model.bert.embeddings.tok.weight)           # (N, V)
    labels = masking.labels[selected]                                            # (N,)
    mlm_loss = F.cross_entropy(logits, labels)
    nsp_logits = None if model.nsp is None else model.nsp(pooled)                # (B, 2)
    nsp_loss = F.cross_entropy(nsp_logits, batch.next_sentence_label) if nsp and nsp_logits is not None else None
    return mlm_loss, nsp_loss, logits, labels, nsp_logits


def learning_rate(it: int, elapsed: float, cfg: BertTrainConfig) -> float:
    """loop.learning_rate (warmup, then cosine to min_lr over the steps), or with schedule=time the same
    cosine over the wall clock: on a shared CPU the number of steps that fit in max_seconds is unknown,
    and a decay that never happens (or ends early) costs accuracy."""
    if cfg.schedule == "steps" or it < cfg.warmup_iters:
        return loop.learning_rate(it, cfg)
    progress = min(1.0, elapsed / cfg.max_seconds)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.learning_rate - cfg.min_lr)


@dataclass
class _Vocab:
    cls_id: int
    sep_id: int
    pad_id: int
    mask_id: int
    n_special: int               # ids below this are special tokens: random replacements skip them
    continuation: torch.Tensor   # (V,) bool: "##" pieces


def _vocab(tok) -> _Vocab:
    from playground.training.tokenizers import BERT_SPECIALS

    ids = [tok.token_to_id(s) for s in BERT_SPECIALS]
    assert None not in ids, f"the tokenizer lacks one of {BERT_SPECIALS}"
    assert sorted(ids) == list(range(len(ids))), f"BERT's specials must come first in the vocabulary, got ids {ids}"
    V = tok.get_vocab_size()
    continuation = torch.zeros(V, dtype=torch.bool)
    for token, i in tok.get_vocab().items():
        continuation[i] = token.startswith("##")
    return _Vocab(tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]"), tok.token_to_id("[PAD]"),
                  tok.token_to_id("[MASK]"), len(ids), continuation)


def read_corpus(paths: list[Path], val_fraction: float) -> tuple[list[str], list[int], list[str], list[int], dict]:
    """Sentences and their document ids of the training and held-out splits, and counts for the card."""
    train_s, train_d, val_s, val_d = [], [], [], []
    counts, next_doc = {}, 0
    for path in paths:
        sentences, docs = [], []
        for document in split_documents(Path(path).read_text(encoding="utf-8")):
            sentences += document
            docs += [next_doc] * len(document)
            next_doc += 1
        n_val = max(1, math.ceil(val_fraction * len(sentences)))
        cut = len(sentences) - n_val                                # the last n_val sentences are held out
        train_s += sentences[:cut]
        train_d += docs[:cut]
        val_s += sentences[cut:]
        val_d += docs[cut:]
        counts[Path(path).name] = {"sentences": len(sentences), "documents": len(set(docs)), "held_out": n_val}
    return train_s, train_d, val_s, val_d, counts


def _pair_corpus(tok, sentences: list[str], docs: list[int]) -> PairCorpus:
    encoded = [e.ids for e in tok.encode_batch(sentences, add_special_tokens=False)]
    keep = [i for i, ids in enumerate(encoded) if ids]                # a sentence of nothing but stripped accents
    return PairCorpus([encoded[i] for i in keep], [docs[i] for i in keep])


def evaluate(model: BertForPreTraining, batches: list[tuple[PairBatch, Masking]], nsp: bool) -> dict[str, float]:
    """Mean MLM and NSP losses, masked-token top-1 / top-5 accuracy and NSP accuracy over fixed batches."""
    was_training = model.training
    model.eval()
    mlm_sum = nsp_sum = hits1 = hits5 = n_tok = nsp_right = n_pairs = 0.0
    with torch.inference_mode():
        for batch, masking in batches:
            mlm_loss, nsp_loss, logits, labels, nsp_logits = pretraining_losses(model, batch, masking, nsp=True)
            acc = topk_accuracy(logits, labels)
            n = acc["n"]
            mlm_sum += mlm_loss.item() * n
            hits1 += acc["top1"] * n
            hits5 += acc["top5"] * n
            n_tok += n
            if nsp_loss is not None:  # a model without an NSP head (model.nsp is None) has none
                B = len(batch.next_sentence_label)
                nsp_sum += nsp_loss.item() * B
                nsp_right += (nsp_logits.argmax(-1) == batch.next_sentence_label).sum().item()
                n_pairs += B
    model.train(was_training)
    out = {"mlm_loss": mlm_sum / n_tok, "top1": hits1 / n_tok, "top5": hits5 / n_tok, "masked_tokens": int(n_tok)}
    if nsp and n_pairs:
        out |= {"nsp_loss": nsp_sum / n_pairs, "nsp_accuracy": nsp_right / n_pairs}
    out["loss"] = out["mlm_loss"] + out.get("nsp_loss", 0.0)
    return out


def _fixed_batches(corpus: PairCorpus, vocab: _Vocab, cfg: BertTrainConfig, n_pairs: int, seed: int):
    """The same pairs, masked the same way (token-level, 15% / 80-10-10), at every evaluation."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    V = len(vocab.continuation)
    batches = []
    for start in range(0, n_pairs, cfg.batch_size):
        pairs = [corpus.pair(rng, cfg.n_positions, nsp=True) for _ in range(min(cfg.batch_size, n_pairs - start))]
        batch = collate(pairs, cls_id=vocab.cls_id, sep_id=vocab.sep_id, pad_id=vocab.pad_id,
                        max_len=cfg.n_positions, continuation=vocab.continuation)
        masking = mask_tokens(batch.input_ids, mask_id=vocab.mask_id, vocab_size=V, special=batch.special,
                              prob=cfg.prob, random_low=vocab.n_special, generator=g)
        batches.append((batch, masking))
    return batches


HELD_OUT_PROTOCOL = ("every held-out sentence that has a successor in its document starts sentence A once (A and B "
                     "grow to whole sentences within the model's positions); B is the true next segment or, with "
                     "probability 1/2, one from another document (random.Random(seed)); 15% of the tokens are "
                     "selected, 80/10/10 (torch.Generator seed); masked-token loss and top-1/top-5 over every "
                     "selected token, NSP accuracy over every pair")


@torch.no_grad()
def held_out(model: BertForPreTraining, tok, val_pairs: PairCorpus, n_positions: int, prob: float = 0.15,
             seed: int = 0, batch_size: int = 64) -> dict:
    """The model's figures over its whole held-out split (HELD_OUT_PROTOCOL)."""
    vocab = _vocab(tok)
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    batches = []
    for start in range(0, len(val_pairs.starts), batch_size):
        pairs = [val_pairs.pair_at(i, rng, n_positions) for i in val_pairs.starts[start:start + batch_size]]
        batch = collate(pairs, cls_id=vocab.cls_id, sep_id=vocab.sep_id, pad_id=vocab.pad_id, max_len=n_positions,
                        continuation=vocab.continuation)
        batches.append((batch, mask_tokens(batch.input_ids, mask_id=vocab.mask_id, vocab_size=len(vocab.continuation),
                                           special=batch.special, prob=prob, random_low=vocab.n_special, generator=g)))
    result = evaluate(model, batches, nsp=True)
    return {"protocol": HELD_OUT_PROTOCOL, "seed": seed, "pairs": len(val_pairs.starts),
            **{k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}}


def _frequency_baseline(corpus: PairCorpus, batches, n_special: int) -> dict[str, float]:
    """Top-1 / top-5 accuracy of always guessing the most frequent training tokens: the floor that a
    model which ignores the context reaches."""
    counts = torch.bincount(torch.tensor([t for s in corpus.sentences for t in s]))
    counts[:n_special] = 0
    top = counts.topk(5).indices                                                # (5,)
    labels = torch.cat([m.labels[m.labels != IGNORE_INDEX] for _, m in batches])  # (N,)
    return {"top1": round((labels == top[0]).float().mean().item(), 4),
            "top5": round(torch.isin(labels, top).float().mean().item(), 4)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass
class _Prepared:
    """The vocabulary and the data of a run, before the model."""

    tok: object                  # the WordPiece tokenizers.Tokenizer
    vocab: _Vocab
    train_pairs: PairCorpus
    val_pairs: PairCorpus
    val_batches: list            # fixed held-out (PairBatch, Masking) batches
    train_batches: list          # fixed training ones, for the generalisation gap
    baseline: dict               # the frequency baseline's accuracy
    counts: dict                 # sentences per file, for the card
    seconds: float               # preparation wall time


def _prepare(cfg: BertTrainConfig, run, folder: Path) -> _Prepared:
    """Read and split the corpus, train the WordPiece vocabulary (on --resume: the interrupted run's),
    tokenize both splits and draw the fixed evaluation batches."""
    import time

    from playground import checkpoints
    from playground.training import tokenizers

    started = time.perf_counter()
    train_s, train_d, val_s, val_d, counts = read_corpus(run.corpus, cfg.val_fraction)
    if run.resume:
        if not loop.has_resume_state(Path(run.out) / f".{folder.name}.resume"):
            raise FileNotFoundError(f"--resume: no interrupted run in {Path(run.out) / f'.{folder.name}.resume'}")
        tok = checkpoints.load(folder).tokenizer  # the vocabulary of the interrupted run
    else:
        chunks = ("\n".join(train_s[i : i + 10_000]) for i in range(0, len(train_s), 10_000))
        tok = tokenizers.train("wordpiece", chunks, cfg.vocab_size)
    vocab = _vocab(tok)
    train_pairs, val_pairs = _pair_corpus(tok, train_s, train_d), _pair_corpus(tok, val_s, val_d)
    val_batches = _fixed_batches(val_pairs, vocab, cfg, cfg.eval_pairs, run.seed + 1)
    train_batches = _fixed_batches(train_pairs, vocab, cfg, max(1, cfg.eval_pairs // 2), run.seed + 2)  # the gap
    baseline = _frequency_baseline(train_pairs, val_batches, vocab.n_special)
    return _Prepared(tok, vocab, train_pairs, val_pairs, val_batches, train_batches, baseline, counts,
                     time.perf_counter() - started)


def _card(cfg: BertTrainConfig, run, data: _Prepared, state: loop.TrainState, metrics: dict, n_params: int) -> dict:
    train_m, val_m = metrics["train"], metrics["val"]
    from playground import checkpoints

    return {
        "kind": "bert", "corpus": checkpoints.corpus_record(run.corpus), "steps": state.it,
        "pairs_seen": state.extra["pairs"], "tokens_seen": state.extra["tokens"],
        "wall_time_s": round(state.elapsed, 1), "prep_time_s": round(data.seconds, 1),
        "device": run.device, "n_params": n_params, "storage": "float16" if cfg.half else "float32",
        "train_loss": round(train_m["loss"], 4), "val_loss": round(val_m["loss"], 4),
        "val_mlm_loss": round(val_m["mlm_loss"], 4),
        "val_top1": round(val_m["top1"], 4), "val_top5": round(val_m["top5"], 4),
        "val_nsp_accuracy": _r(val_m.get("nsp_accuracy")), "val_nsp_loss": _r(val_m.get("nsp_loss")),
        "train_top1": round(train_m["top1"], 4), "train_top5": round(train_m["top5"], 4),
        "train_nsp_accuracy": _r(train_m.get("nsp_accuracy")),  # None when trained with --nsp=false
        "frequency_baseline": data.baseline,
        "evaluation": {"held_out_pairs": cfg.eval_pairs, "masked_tokens": val_m["masked_tokens"],
                       "masking": f"token-level, {cfg.prob:.0%} selected, 80/10/10, the same every time",
                       "split": f"the last {cfg.val_fraction:.0%} of each file's sentences"},
        "data": {"sentences": data.counts, "train_sentences": len(data.train_pairs.sentences),
                 "val_sentences": len(data.val_pairs.sentences), "rule": DATA_RULE},
        "train_config": dataclasses.asdict(cfg), "history": state.history, "seed": run.seed, "command": run.command,
    }


RESUMES = True   # fit() keeps resume state; _prepare reads the interrupted run's vocabulary


def configs(kind: str) -> tuple:
    return (BertTrainConfig,)


def train_kind(cfg: BertTrainConfig, run) -> dict:
    """Train a WordPiece vocabulary and a BERT (MLM + NSP) on the corpus; write `run.out/<name>` (model,
    config, tokenizer, card with held-out accuracies) at every evaluation and at the end. --resume
    continues an interrupted run from its last evaluation (optimizer, data order and all)."""
    import copy

    from playground import checkpoints

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = run.device
    name = run.name or f"bert-{Path(run.corpus[0]).stem}"
    folder = Path(run.out) / name
    data = _prepare(cfg, run, folder)
    vocab, V = data.vocab, data.tok.get_vocab_size()

    torch.manual_seed(run.seed)
    config = cfg.model_config(V)
    model = BertForPreTraining(config).to(device)
    optimizer = loop.make_optimizer(model, cfg, device)
    rng, g = random.Random(run.seed), torch.Generator().manual_seed(run.seed)
    state = loop.TrainState(extra={"pairs": 0, "tokens": 0})
    n_params = model.num_params()
    metrics: dict = {}

    def step(it: int):
        pairs = [data.train_pairs.pair(rng, cfg.n_positions, cfg.nsp) for _ in range(cfg.batch_size)]
        batch = collate(pairs, cls_id=vocab.cls_id, sep_id=vocab.sep_id, pad_id=vocab.pad_id,
                        max_len=cfg.n_positions, continuation=vocab.continuation)
        masking = mask_tokens(batch.input_ids, mask_id=vocab.mask_id, vocab_size=V, special=batch.special,
                              prob=cfg.prob, word_ids=batch.word_ids if cfg.whole_word else None,
                              random_low=vocab.n_special, generator=g)
        state.extra["pairs"] += len(pairs)
        state.extra["tokens"] += int(batch.attention_mask.sum())
        if not (masking.labels != IGNORE_INDEX).any():
            return None  # nothing selected (tiny batches only): no MLM loss to take
        batch = PairBatch(*(t.to(device) for t in dataclasses.astuple(batch)))
        masking = Masking(*(t.to(device) for t in dataclasses.astuple(masking)))
        mlm_loss, nsp_loss, *_ = pretraining_losses(model, batch, masking, cfg.nsp)
        return mlm_loss if nsp_loss is None else mlm_loss + nsp_loss  # BERT's objective: the sum

    def evaluate_both(it: int, _losses: list, last: bool) -> dict:
        if last and cfg.half:
            model.half().float()  # the card's numbers describe the shipped float16 weights
        val_m, train_m = evaluate(model, data.val_batches, cfg.nsp), evaluate(model, data.train_batches, cfg.nsp)
        metrics.update(val=val_m, train=train_m)
        return {"train": round(train_m["loss"], 4), "val": round(val_m["loss"], 4),
                "val_top1": round(val_m["top1"], 4), "val_top5": round(val_m["top5"], 4),
                "val_nsp_accuracy": _r(val_m.get("nsp_accuracy"))}

    def save(it: int, final: bool) -> None:
        shipped = copy.deepcopy(model).half() if cfg.half else model
        checkpoints.save(folder, kind="bert", config=config, card=_card(cfg, run, data, state, metrics, n_params),
                         model=shipped, tokenizer=data.tok)

    model.train()
    settings = loop.Loop(cfg.max_iters, cfg.eval_interval, cfg.grad_clip, cfg.max_seconds, desc=name)
    loop.fit(model, optimizer, step, settings, evaluate=evaluate_both, save=save,
             lr=lambda it, elapsed: learning_rate(it, elapsed, cfg), state=state,
             resume_dir=Path(run.out) / f".{name}.resume", resume=run.resume, rngs=[rng, g], device=device)
    val_m, train_m = metrics["val"], metrics["train"]
    return {"iters": state.history[-1]["iter"], "train_loss": train_m["loss"], "val_loss": val_m["loss"],
            "val_top1": val_m["top1"], "val_top5": val_m["top5"], "val_nsp_accuracy": val_m.get("nsp_accuracy"),
            "seconds": round(state.elapsed, 1), "n_params": n_params, "history": state.history}
