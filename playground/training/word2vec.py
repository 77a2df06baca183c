"""Training word2vec (`python -m playground.train word2vec`): vocabulary, pairs, the loop, the evaluation.

From Mikolov et al. 2013a (the analogy test) and 2013b (the unigram^(3/4) noise distribution,
subsampling of frequent words); the model is nets/word2vec.py's. Training is batched and vectorised
(thousands of (input, target) pairs per step) instead of the original C code's one pair at a time over
many threads; the objective is the same. Words are lowercased letter runs; the vocabulary is a
word-level `tokenizers.Tokenizer` saved beside the weights ([UNK] is id 0 and is dropped from the
text, as the original drops out-of-vocabulary words).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

from playground.nets.word2vec import ARCHITECTURES, Word2Vec, Word2VecConfig
from playground.training import loop

UNK = "[UNK]"


# ---------------------------------------------------------------------------------------------
# Vocabulary: a word-level tokenizer, lowercased letter runs


def new_tokenizer(vocab: dict[str, int] | None = None) -> Tokenizer:
    """Lowercase, strip accents, keep runs of letters a-z (digits and punctuation are dropped)."""
    tok = Tokenizer(models.WordLevel(vocab or {UNK: 0}, unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[^a-z]+"), behavior="removed")
    return tok


def train_vocabulary(lines: Iterable[str], max_vocab: int, min_count: int) -> Tokenizer:
    """The `max_vocab` most frequent words seen at least `min_count` times, ids by falling frequency."""
    tok = new_tokenizer()
    trainer = trainers.WordLevelTrainer(vocab_size=max_vocab + 1, min_frequency=min_count, special_tokens=[UNK],
                                        show_progress=False)
    tok.train_from_iterator(lines, trainer=trainer)
    return tok


def encode_corpus(tok: Tokenizer, lines: Iterable[str]) -> torch.Tensor:
    """The corpus as one stream of word ids (N,), out-of-vocabulary words ([UNK], id 0) removed."""
    parts = []
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == 256:
            parts.extend(np.asarray(e.ids, dtype=np.int32) for e in tok.encode_batch(batch, add_special_tokens=False))
            batch = []
    if batch:
        parts.extend(np.asarray(e.ids, dtype=np.int32) for e in tok.encode_batch(batch, add_special_tokens=False))
    ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return torch.from_numpy(ids[ids != 0].astype(np.int64))


# ---------------------------------------------------------------------------------------------
# The two distributions of Mikolov et al. 2013b


def keep_probability(counts: torch.Tensor, t: float) -> torch.Tensor:
    """Subsampling (2013b, eq. 5): each occurrence of w is discarded with P(w) = 1 - sqrt(t / f(w)),
    f(w) its relative frequency; so it is kept with min(1, sqrt(t / f(w))). Words rarer than t are
    always kept. (The released C code uses a softer variant, (sqrt(f/t) + 1) t/f; we follow the paper.)
    t <= 0 turns subsampling off."""
    if t <= 0:
        return torch.ones_like(counts, dtype=torch.float64)
    f = counts.double() / counts.sum().clamp(min=1)
    keep = torch.sqrt(t / f.clamp(min=1e-30))
    return keep.clamp(max=1.0).masked_fill(counts == 0, 0.0)


def noise_distribution(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """P_n(w) = U(w)^(3/4) / Z (2013b, §2.2): the unigram distribution flattened, so rare words are
    drawn as negatives more often than their frequency alone would make them."""
    p = counts.double().pow(power)
    return p / p.sum()


def build(vocab_size: int, cfg: "Word2VecTrainConfig") -> Word2Vec:
    return Word2Vec(Word2VecConfig(vocab_size=vocab_size, dim=cfg.dim, architecture=cfg.architecture,
                                   window=cfg.window))


# ---------------------------------------------------------------------------------------------
# Training data: (input, target) pairs from the subsampled stream


def context_pairs(ids: torch.Tensor, window: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (centre, context) pair of a stream (N,), with the C code's dynamic window: each centre
    draws b in 1..window and takes the words at distance ≤ b (near words count more, on average).
    Returns centres (P,) and contexts (P,), in stream order."""
    N = len(ids)
    b = torch.randint(1, window + 1, (N,), generator=generator)      # (N,) reduced window per centre
    centres, contexts = [], []
    for d in range(1, window + 1):
        if d >= N:
            break
        left = b[d:] >= d                                             # centre i, context i - d
        centres.append(ids[d:][left]), contexts.append(ids[:-d][left])
        right = b[:-d] >= d                                           # centre i, context i + d
        centres.append(ids[:-d][right]), contexts.append(ids[d:][right])
    if not centres:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    return torch.cat(centres), torch.cat(contexts)


def cbow_windows(ids: torch.Tensor, window: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For each position: its centre (N,), the context ids (N, 2W) and a mask (N, 2W) of the
    positions inside the drawn window and inside the stream."""
    N = len(ids)
    b = torch.randint(1, window + 1, (N,), generator=generator)      # (N,)
    offsets = torch.cat([torch.arange(-window, 0), torch.arange(1, window + 1)])   # (2W,)
    pos = torch.arange(N)[:, None] + offsets                          # (N, 2W)
    mask = (offsets.abs()[None, :] <= b[:, None]) & (pos >= 0) & (pos < N)
    ctx = ids[pos.clamp(0, max(N - 1, 0))]                            # (N, 2W)
    return ids, ctx, mask


# ---------------------------------------------------------------------------------------------
# Training


@dataclass
class Word2VecTrainConfig:
    """`python -m playground.train word2vec --corpus ...`: vocabulary, model and optimisation."""

    architecture: str = "skipgram"  # skipgram (better on rare words, Mikolov 2013a) or cbow (faster)
    dim: int = 100                  # vector width
    max_vocab: int = 20_000         # most frequent words kept; with dim, sets the file size (fp16)
    min_count: int = 5              # rarer words are dropped before the vocabulary is cut
    window: int = 5                 # maximum context distance (2013a: 5 to 10)
    negatives: int = 5              # k noise words per pair (2013b: 5-20 for small data)
    subsample: float = 1e-4         # t of the subsampling formula (2013b: 1e-5 for billions of words; 0: off)
    epochs: int = 3                 # passes over the (re-subsampled) corpus
    batch_size: int = 1024          # pairs per step (their updates add up: 4096 gave half the analogy accuracy)
    optimizer: str = "sgd"          # sgd: the paper's plain SGD per pair (summed loss); adam: SparseAdam on the mean
    learning_rate: float = 0.025    # sgd: the C code's 0.025 for skip-gram (0.05 for CBOW); adam: ~0.003
    lr_floor: float = 0.0001        # the rate at the end of the linear decay, as a fraction of learning_rate
    chunk_tokens: int = 200_000     # the stream is cut into chunks whose pairs are shuffled together
    max_seconds: float = 0.0        # stop after this much training wall time, the rate decayed by then; 0: no limit
    threads: int = 0                # torch.set_num_threads; 0 leaves PyTorch's default

    def __post_init__(self):
        assert self.architecture in ARCHITECTURES, f"architecture={self.architecture!r}: choose from {ARCHITECTURES}"
        assert self.max_vocab >= 2 and self.dim >= 1, "max_vocab and dim must be positive"
        assert self.epochs >= 1 and self.batch_size >= 1 and self.negatives >= 1, "epochs, batch_size, negatives >= 1"
        assert 0 < self.lr_floor <= 1, f"lr_floor={self.lr_floor} must lie in (0, 1]"
        assert self.optimizer in ("sgd", "adam"), f"optimizer={self.optimizer!r}: choose sgd or adam"


class Batches:
    """The (inputs, targets, mask) batches of every epoch, drawn from one generator in the C code's order:
    each epoch subsamples the stream again, visits its chunks in a random order and shuffles each chunk's
    pairs. Keeps the per-epoch record (mean loss, tokens kept) as the steps report their losses. FastText's
    trainer draws its skip-gram batches here too (`config` needs only `architecture` and `window`)."""

    def __init__(self, ids: torch.Tensor, keep: torch.Tensor, cfg: Word2VecTrainConfig, config: Word2VecConfig,
                 generator: torch.Generator):
        self.ids, self.keep, self.cfg, self.config, self.g = ids, keep, cfg, config, generator
        self.epochs: list[dict] = []
        self.epoch, self.loss, self.n, self.kept, self.open, self.pairs = 0, 0.0, 0, 0, False, 0
        self.started = time.perf_counter()
        # the steps are not known in advance (subsampling is random): estimated from the expected kept tokens
        expected = float((keep[ids] if len(ids) else keep[:0]).sum())
        per_token = 1.0 if config.architecture == "cbow" else (config.window + 1)   # pairs per centre
        self.total_steps = max(1, int(cfg.epochs * expected * per_token / cfg.batch_size))

    def learning_rate(self, it: int) -> float:
        """Linear decay to the floor (the C code's schedule); under a time budget, by whichever of steps or
        seconds is further along, so a run cut by max_seconds still ends annealed."""
        done = it / self.total_steps
        if self.cfg.max_seconds > 0:
            done = max(done, (time.perf_counter() - self.started) / self.cfg.max_seconds)
        return self.cfg.learning_rate * max(self.cfg.lr_floor, 1.0 - done)

    def __iter__(self):
        cfg, g, cbow, window = self.cfg, self.g, self.config.architecture == "cbow", self.config.window
        for epoch in range(cfg.epochs):
            kept = self.ids[torch.rand(len(self.ids), generator=g, dtype=torch.float64) < self.keep[self.ids]]
            self.epoch, self.loss, self.n, self.kept, self.open = epoch, 0.0, 0, len(kept), True
            chunk_order = torch.randperm(max(1, math.ceil(len(kept) / cfg.chunk_tokens)), generator=g)
            for c in chunk_order.tolist():
                chunk = kept[c * cfg.chunk_tokens : (c + 1) * cfg.chunk_tokens]
                if cbow:
                    targets, ctx, mask = cbow_windows(chunk, window, g)
                    rows = mask.any(1)
                    inputs, targets, mask = ctx[rows], targets[rows], mask[rows]
                else:
                    (inputs, targets), mask = context_pairs(chunk, window, g), None  # centre -> each context word
                perm = torch.randperm(len(targets), generator=g)
                for s in range(0, len(targets), cfg.batch_size):
                    idx = perm[s : s + cfg.batch_size]
                    yield inputs[idx], targets[idx], (mask[idx] if cbow else None)
            self.close()

    def report(self, loss: float, n: int) -> None:
        """A step's mean loss over its n pairs."""
        self.loss, self.n, self.pairs = self.loss + loss * n, self.n + n, self.pairs + n

    def close(self) -> None:
        """Record the current epoch (also one cut short by max_seconds)."""
        if self.open:
            self.epochs.append({"epoch": self.epoch + 1, "loss": round(self.loss / max(1, self.n), 4),
                                "tokens_kept": int(self.kept), "seconds": round(time.perf_counter() - self.started, 1)})
            self.open = False


def train(model: Word2Vec, ids: torch.Tensor, counts: torch.Tensor, cfg: Word2VecTrainConfig, seed: int = 0,
          progress: bool = False, log_every: int = 200) -> dict:
    """Train on a stream of ids (N,); `counts` (V,) are the corpus counts of each id. Returns the
    history: mean loss per logged interval and per epoch, pairs seen, wall time."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    g = torch.Generator().manual_seed(seed)
    keep = keep_probability(counts, cfg.subsample)                   # (V,)
    noise = noise_distribution(counts).float()                       # (V,)
    # sgd: each pair moves its rows by lr x its own gradient, as in the C code (Word2Vec.sgd_step)
    optimizer = None
    if cfg.optimizer == "adam":
        optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=cfg.learning_rate)
    data = Batches(ids, keep, cfg, model.config, g)
    batches = iter(data)

    def step(it: int):
        inputs, targets, mask = next(batches)
        lr = data.learning_rate(it)
        negatives = torch.multinomial(noise, len(targets) * cfg.negatives, replacement=True, generator=g)
        negatives = negatives.view(-1, cfg.negatives)
        if optimizer is None:
            value = model.sgd_step(inputs, targets, negatives, lr, mask)
            data.report(value, len(targets))
            return value
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = model(inputs, targets, negatives, mask)
        data.report(loss.item(), len(targets))
        return loss

    return fit_pairs(model, optimizer, step, data, f"word2vec {model.config.architecture}", progress, log_every)


def fit_pairs(model, optimizer, step, data: Batches, desc: str, progress: bool, log_every: int) -> dict:
    """The run of a pair-batch trainer (word2vec's, FastText's) through the one loop, `data`'s steps
    estimated and its time budget: the history, the mean loss of every log_every steps and of each epoch."""

    def record(it: int, losses: list, last: bool) -> dict | None:
        if it % log_every or not losses:  # the log: the mean loss of every log_every steps
            return None
        return {"loss": round(sum(losses) / len(losses), 4)}

    model.train()
    settings = loop.Loop(None, log_every, max_seconds=data.cfg.max_seconds, show=progress,
                         expected_iters=data.total_steps, desc=desc)
    state = loop.fit(model, optimizer, step, settings, evaluate=record)
    data.close()
    model.eval()
    log = [{"step": h["iter"], "loss": h["loss"], "seconds": h["seconds"]} for h in state.history]
    return {"log": log, "epochs": data.epochs, "pairs": data.pairs, "steps": state.it,
            "seconds": round(time.perf_counter() - data.started, 1),
            "final_loss": data.epochs[-1]["loss"] if data.epochs else float("nan")}


@torch.no_grad()
def mean_loss(model: Word2Vec, ids: torch.Tensor, counts: torch.Tensor, negatives: int = 5, seed: int = 0,
              max_pairs: int = 50_000) -> float:
    """The negative-sampling loss on (a sample of) the pairs of a stream, without subsampling, with
    fixed noise draws: comparable before and after training."""
    g = torch.Generator().manual_seed(seed)
    noise = noise_distribution(counts).float()
    if model.config.architecture == "cbow":
        targets, ctx, mask = cbow_windows(ids, model.config.window, g)
        n = min(max_pairs, len(targets))
        neg = torch.multinomial(noise, n * negatives, replacement=True, generator=g).view(n, negatives)
        return float(model(ctx[:n], targets[:n], neg, mask[:n]))
    centres, contexts = context_pairs(ids, model.config.window, g)
    n = min(max_pairs, len(centres))
    neg = torch.multinomial(noise, n * negatives, replacement=True, generator=g).view(n, negatives)
    return float(model(centres[:n], contexts[:n], neg))


# ---------------------------------------------------------------------------------------------
# Intrinsic evaluation, written for the English corpus of the shipped checkpoint (Austen, the World
# English Bible, WordNet glosses, the Jargon File, Shakespeare): pairs of words that all occur there.

ANALOGY_PAIRS: dict[str, list[tuple[str, str]]] = {
    "family-gender": [("king", "queen"), ("man", "woman"), ("father", "mother"), ("son", "daughter"),
                      ("brother", "sister"), ("husband", "wife"), ("uncle", "aunt"), ("boy", "girl"),
                      ("prince", "princess"), ("lord", "lady"), ("he", "she"), ("his", "her"),
                      ("nephew", "niece"), ("sir", "madam"), ("gentleman", "lady"), ("duke", "duchess")],
    "country-capital": [("france", "paris"), ("england", "london"), ("italy", "rome"), ("greece", "athens"),
                        ("egypt", "cairo"), ("spain", "madrid"), ("germany", "berlin"), ("russia", "moscow"),
                        ("japan", "tokyo"), ("china", "beijing"), ("ireland", "dublin"), ("scotland", "edinburgh"),
                        ("austria", "vienna"), ("portugal", "lisbon")],
    "verb-past": [("go", "went"), ("see", "saw"), ("take", "took"), ("come", "came"), ("give", "gave"),
                  ("know", "knew"), ("speak", "spoke"), ("write", "wrote"), ("eat", "ate"), ("run", "ran"),
                  ("begin", "began"), ("find", "found"), ("tell", "told"), ("think", "thought"), ("bring", "brought")],
    "noun-plural": [("king", "kings"), ("house", "houses"), ("day", "days"), ("hand", "hands"), ("child", "children"),
                    ("man", "men"), ("woman", "women"), ("city", "cities"), ("word", "words"), ("eye", "eyes"),
                    ("horse", "horses"), ("tree", "trees"), ("letter", "letters")],
    "adjective-comparative": [("good", "better"), ("great", "greater"), ("old", "older"), ("young", "younger"),
                              ("strong", "stronger"), ("long", "longer"), ("high", "higher"), ("small", "smaller"),
                              ("large", "larger"), ("rich", "richer"), ("wise", "wiser")],
}

# (word, a related word, an unrelated word): the related one should be the nearer
SIMILARITY_TRIPLES: list[tuple[str, str, str]] = [
    ("dog", "cat", "letter"), ("horse", "cow", "sermon"), ("king", "prince", "bread"), ("queen", "princess", "stone"),
    ("river", "stream", "daughter"), ("sea", "ocean", "marriage"), ("bread", "wine", "sword"),
    ("sword", "spear", "sister"), ("happy", "glad", "iron"), ("sad", "sorrow", "computer"),
    ("money", "wealth", "moon"), ("sun", "moon", "program"), ("god", "lord", "computer"),
    ("computer", "program", "sheep"), ("file", "directory", "angel"), ("love", "affection", "copper"),
    ("marriage", "wedding", "software"), ("house", "home", "planet"), ("ship", "boat", "sister"),
    ("father", "mother", "garden"), ("red", "blue", "church"), ("one", "two", "heaven"),
    ("monday", "tuesday", "sheep"), ("january", "february", "sword"), ("gold", "silver", "aunt"),
    ("war", "battle", "dinner"), ("heart", "soul", "ship"), ("walk", "run", "silver"),
    ("speak", "say", "tree"), ("letter", "note", "lion"), ("ball", "dance", "priest"),
    ("priest", "temple", "ball"), ("lion", "tiger", "wedding"), ("apple", "fruit", "soldier"),
]


def analogy_questions(pairs: dict[str, list[tuple[str, str]]], vocab: dict[str, int]) -> dict[str, list[tuple]]:
    """a : b :: c : d from every ordered pair of distinct pairs in each category whose four words are in
    the vocabulary."""
    out = {}
    for category, items in pairs.items():
        present = [(a, b) for a, b in items if a in vocab and b in vocab]
        out[category] = [(a, b, c, d) for i, (a, b) in enumerate(present) for j, (c, d) in enumerate(present)
                         if i != j and len({a, b, c, d}) == 4]
    return out


def evaluate(vectors: torch.Tensor, vocab: dict[str, int], max_questions: int = 300) -> dict:
    """Analogy accuracy (3CosAdd, Mikolov 2013a: argmax_d cos(d, b - a + c) over the vocabulary, the
    three question words excluded; top-1) per category, and the similarity-triple accuracy.
    vectors (V, d); vocab word -> row."""
    unit = F.normalize(vectors.float(), dim=1)
    unit[0] = 0.0  # [UNK] is never an answer
    result: dict = {"analogy": {}, "similarity": {}}
    total_right = total_n = 0
    for category, questions in analogy_questions(ANALOGY_PAIRS, vocab).items():
        questions = questions[:max_questions]
        if not questions:
            result["analogy"][category] = {"questions": 0, "accuracy": None}
            continue
        a, b, c, d = (torch.tensor([vocab[q[i]] for q in questions]) for i in range(4))
        target = F.normalize(unit[b] - unit[a] + unit[c], dim=1)       # (Q, dim)
        scores = target @ unit.T                                        # (Q, V)
        for col in (a, b, c):
            scores[torch.arange(len(questions)), col] = -math.inf
        right = int((scores.argmax(1) == d).sum())
        result["analogy"][category] = {"questions": len(questions), "accuracy": round(right / len(questions), 4)}
        total_right, total_n = total_right + right, total_n + len(questions)
    result["analogy"]["all"] = {"questions": total_n, "accuracy": round(total_right / max(1, total_n), 4)}
    triples = [t for t in SIMILARITY_TRIPLES if all(w in vocab for w in t)]
    if triples:
        w, r, u = (torch.tensor([vocab[t[i]] for t in triples]) for i in range(3))
        right = int(((unit[w] * unit[r]).sum(1) > (unit[w] * unit[u]).sum(1)).sum())
        result["similarity"] = {"triples": len(triples), "of": len(SIMILARITY_TRIPLES),
                                "accuracy": round(right / len(triples), 4)}
    return result


# ---------------------------------------------------------------------------------------------
# The `python -m playground.train word2vec` kind


def read_lines(paths: Iterable[str | Path]) -> Iterable[str]:
    for path in paths:
        with open(path, encoding="utf-8") as f:
            yield from f


def fp16_copy(model: Word2Vec) -> Word2Vec:
    """The weights in fp16 for the checkpoint (half the bytes; cosine neighbours do not change at
    that precision). `checkpoints.load` builds a float32 model and load_state_dict converts back."""
    half = Word2Vec(model.config)
    half.load_state_dict(model.state_dict())
    return half.half()


# ---------------------------------------------------------------------------------------------
# `python -m playground.train word2vec` (train.KINDS; the trainer protocol: configs, train_kind, RESUMES)


RESUMES = False   # a run takes minutes and keeps no resume state; --resume is refused


def configs(kind: str) -> tuple:
    return (Word2VecTrainConfig,)


def train_kind(cfg: Word2VecTrainConfig, run) -> dict:
    """Vocabulary, subsampled stream, skip-gram or CBOW with negative sampling; writes
    `word2vec-<first corpus>/` (or --name) with the weights in fp16, the word-level tokenizer, and a card
    with the loss before and after and the intrinsic evaluation (analogies, similarity triples)."""
    from playground import checkpoints

    started = time.perf_counter()
    tok = train_vocabulary(read_lines(run.corpus), cfg.max_vocab, cfg.min_count)
    ids = encode_corpus(tok, read_lines(run.corpus))
    counts = torch.bincount(ids, minlength=tok.get_vocab_size())
    model = build(tok.get_vocab_size(), cfg)
    n_val = min(len(ids) // 10, 100_000)  # the loss before and after on the stream's last words
    loss_before = mean_loss(model, ids[-n_val:], counts, cfg.negatives, seed=run.seed)
    history = train(model, ids, counts, cfg, seed=run.seed, progress=True)
    loss_after = mean_loss(model, ids[-n_val:], counts, cfg.negatives, seed=run.seed)
    evaluation = evaluate(model.vectors(), tok.get_vocab())
    seconds = time.perf_counter() - started
    card = {
        "kind": "word2vec", "architecture": cfg.architecture, "corpus": checkpoints.corpus_record(run.corpus),
        "tokens": int(len(ids)), "vocab_size": tok.get_vocab_size(), "dim": cfg.dim,
        "steps": history["steps"], "pairs_seen": history["pairs"], "wall_time_s": round(seconds, 1),
        "device": "cpu", "train_loss": history["final_loss"],
        "loss_before": round(loss_before, 4), "loss_after": round(loss_after, 4),
        "loss_note": "mean negative-sampling loss over the corpus's last words, no subsampling, fixed noise draws",
        "evaluation": evaluation, "train_config": asdict(cfg), "history": history,
        "storage": "float16", "seed": run.seed, "command": run.command,
    }
    name = run.name or f"word2vec-{run.corpus[0].stem}"
    checkpoints.save(run.out / name, kind="word2vec", config=model.config, card=card,
                     model=fp16_copy(model), tokenizer=tok)
    return {"name": name, "tokens": int(len(ids)), "loss_before": loss_before, "loss_after": loss_after,
            "analogy": evaluation["analogy"]["all"], "similarity": evaluation["similarity"],
            "seconds": round(seconds, 1)}
