"""word2vec: skip-gram and CBOW with negative sampling and subsampling of frequent words.

Written from the equations of Mikolov et al. 2013a ("Efficient Estimation of Word Representations in
Vector Space": the CBOW and skip-gram architectures, the analogy test) and 2013b ("Distributed
Representations of Words and Phrases and their Compositionality": negative sampling, the unigram^(3/4)
noise distribution, subsampling of frequent words). Each word w has two vectors: v_w (input, the
embedding the app shows) and v'_w (output, used only by the training objective).

The training loop is batched and vectorised (thousands of (input, target) pairs per step, PyTorch
sparse gradients) instead of the original C code's one pair at a time over many threads; the
objective is the same. Words are lowercased letter runs; the vocabulary is a word-level
`tokenizers.Tokenizer` saved beside the weights ([UNK] is id 0 and is dropped from the text, as the
original drops out-of-vocabulary words).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

UNK = "[UNK]"
ARCHITECTURES = ("skipgram", "cbow")


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


# ---------------------------------------------------------------------------------------------
# The model


@dataclass
class Word2VecConfig:
    """The config.json of a word2vec checkpoint."""

    vocab_size: int = 20_001        # words + [UNK] (id 0, never trained); set from the corpus
    dim: int = 100                  # vector width; 20k words x 100 x 2 matrices in fp16 = 8 MB
    architecture: str = "skipgram"  # "skipgram" (predict each context word from the centre) or "cbow"
    window: int = 5                 # context words on each side (the window actually used is drawn in 1..window)

    def __post_init__(self):
        assert self.architecture in ARCHITECTURES, f"architecture={self.architecture!r}: choose from {ARCHITECTURES}"
        assert self.vocab_size >= 2 and self.dim >= 1, f"vocab_size={self.vocab_size} and dim={self.dim} too small"
        assert self.window >= 1, f"window={self.window} must be at least 1"


class Word2Vec(nn.Module):
    """Negative sampling (Mikolov et al. 2013b, eq. 4), for one input h and one target word w_O:

        loss = -log σ(v'_{w_O} · h) - Σ_{i=1..k} log σ(-v'_{w_i} · h),   w_i ~ P_n(w)

    skip-gram: h = v_{w_I}, the centre word's input vector, and w_O one word of its context;
    CBOW:      h = (1/|C|) Σ_{c ∈ C} v_c, the mean of the context's input vectors, and w_O the centre.
    The batch loss is the mean over the pairs in the batch.
    """

    def __init__(self, config: Word2VecConfig):
        super().__init__()
        self.config = config
        V, d = config.vocab_size, config.dim
        self.W_in = nn.Embedding(V, d, sparse=True)    # v_w: the word vectors
        self.W_out = nn.Embedding(V, d, sparse=True)   # v'_w: the output ("context") vectors
        # the C code's init: v uniform in ±0.5/d, v' zero (so every σ starts at 1/2)
        nn.init.uniform_(self.W_in.weight, -0.5 / d, 0.5 / d)
        nn.init.zeros_(self.W_out.weight)

    def hidden(self, inputs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """skip-gram: inputs (B,) -> h (B, d). CBOW: inputs (B, 2W) context ids and mask (B, 2W) of the
        real ones -> h (B, d), their mean."""
        if inputs.dim() == 1:
            return self.W_in(inputs)                                   # (B, d)
        v = self.W_in(inputs)                                          # (B, 2W, d)
        m = mask.to(v.dtype).unsqueeze(-1)                             # (B, 2W, 1)
        return (v * m).sum(1) / m.sum(1).clamp(min=1.0)                # (B, d)

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """inputs: (B,) centres (skip-gram) or (B, 2W) contexts (CBOW); targets (B,); negatives (B, k).
        Returns the mean negative-sampling loss."""
        h = self.hidden(inputs, mask)                                  # (B, d)
        pos = (self.W_out(targets) * h).sum(-1)                        # (B,): v'_{w_O} · h
        neg = torch.bmm(self.W_out(negatives), h.unsqueeze(-1)).squeeze(-1)  # (B, k): v'_{w_i} · h
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()

    @torch.no_grad()
    def sgd_step(self, inputs: torch.Tensor, targets: torch.Tensor, negatives: torch.Tensor, lr: float,
                 mask: torch.Tensor | None = None) -> float:
        """One step of the paper's SGD with the gradients written out (what the C code does per pair,
        here for a batch at once, the pairs' updates summed). With s = v'·h and σ the logistic function,
        the loss above has ∂/∂s_O = σ(s_O) - 1 for the target and ∂/∂s_i = σ(s_i) for each noise word, so

            v'_{w_O} -= lr (σ(s_O) - 1) h,   v'_{w_i} -= lr σ(s_i) h,
            h        -= lr [(σ(s_O) - 1) v'_{w_O} + Σ_i σ(s_i) v'_{w_i}]

        and h's gradient goes to v_{w_I} (skip-gram), or is shared equally by the |C| context vectors
        (CBOW, h being their mean). Returns the batch's mean loss (before the update). About 3x faster
        than autograd with sparse gradients; `tests/test_word2vec.py` checks it against autograd."""
        W_in, W_out = self.W_in.weight, self.W_out.weight
        h = self.hidden(inputs, mask)                                  # (B, d)
        u_o = W_out[targets]                                           # (B, d)   v'_{w_O}
        u_n = W_out[negatives]                                         # (B, k, d) v'_{w_i}
        s_o = (u_o * h).sum(-1)                                        # (B,)
        s_n = torch.bmm(u_n, h.unsqueeze(-1)).squeeze(-1)              # (B, k)
        loss = -(F.logsigmoid(s_o) + F.logsigmoid(-s_n).sum(-1)).mean()
        g_o = torch.sigmoid(s_o) - 1.0                                 # (B,)   ∂loss/∂s_O
        g_n = torch.sigmoid(s_n)                                       # (B, k) ∂loss/∂s_i
        grad_h = g_o.unsqueeze(-1) * u_o + (g_n.unsqueeze(-1) * u_n).sum(1)   # (B, d)
        W_out.index_add_(0, targets, g_o.unsqueeze(-1) * h, alpha=-lr)
        W_out.index_add_(0, negatives.reshape(-1), (g_n.unsqueeze(-1) * h.unsqueeze(1)).reshape(-1, h.size(1)),
                         alpha=-lr)
        if inputs.dim() == 1:
            W_in.index_add_(0, inputs, grad_h, alpha=-lr)
        else:  # CBOW: h = mean of the context vectors, so each gets grad_h / |C|
            m = mask.to(h.dtype)                                        # (B, 2W)
            share = m / m.sum(1, keepdim=True).clamp(min=1.0)           # (B, 2W)
            grads = share.unsqueeze(-1) * grad_h.unsqueeze(1)           # (B, 2W, d)
            W_in.index_add_(0, inputs.reshape(-1), grads.reshape(-1, h.size(1)), alpha=-lr)
        return float(loss)

    @torch.no_grad()
    def vectors(self) -> torch.Tensor:
        """(V, d) the input vectors v_w, float32 (a checkpoint stores them in fp16)."""
        return self.W_in.weight.detach().float()


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
    window, k, B = model.config.window, cfg.negatives, cfg.batch_size
    cbow = model.config.architecture == "cbow"
    # steps are not known in advance (subsampling is random): estimate from the expected kept tokens
    expected = float((keep[ids] if len(ids) else keep[:0]).sum())
    per_token = 1.0 if cbow else (window + 1)                        # mean pairs per centre: 2 * (W+1)/2
    total_steps = max(1, int(cfg.epochs * expected * per_token / B))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total_steps, desc=f"word2vec {model.config.architecture}", unit="step")
    history: dict = {"log": [], "epochs": [], "pairs": 0, "steps": 0}
    started, step, running, n_running = time.perf_counter(), 0, 0.0, 0
    stop = False
    model.train()
    for epoch in range(cfg.epochs):
        kept = ids[torch.rand(len(ids), generator=g, dtype=torch.float64) < keep[ids]]   # subsampled stream
        epoch_loss, epoch_n = 0.0, 0
        chunk_order = torch.randperm(max(1, math.ceil(len(kept) / cfg.chunk_tokens)), generator=g)
        for c in chunk_order.tolist():
            chunk = kept[c * cfg.chunk_tokens : (c + 1) * cfg.chunk_tokens]
            if cbow:
                targets_all, ctx_all, mask_all = cbow_windows(chunk, window, g)
                keep_rows = mask_all.any(1)
                targets_all, ctx_all, mask_all = targets_all[keep_rows], ctx_all[keep_rows], mask_all[keep_rows]
            else:
                inputs_all, targets_all = context_pairs(chunk, window, g)  # centre -> each context word
            P = len(targets_all)
            perm = torch.randperm(P, generator=g)
            for s in range(0, P, B):
                idx = perm[s : s + B]
                # linear decay to the floor (the C code's schedule); under a time budget, by whichever of
                # steps or seconds is further along, so a run cut by max_seconds still ends annealed
                done = step / total_steps
                if cfg.max_seconds > 0:
                    done = max(done, (time.perf_counter() - started) / cfg.max_seconds)
                lr = cfg.learning_rate * max(cfg.lr_floor, 1.0 - done)
                negatives = torch.multinomial(noise, len(idx) * k, replacement=True, generator=g).view(-1, k)
                inputs, mask = (ctx_all[idx], mask_all[idx]) if cbow else (inputs_all[idx], None)
                if optimizer is None:
                    value = model.sgd_step(inputs, targets_all[idx], negatives, lr, mask)
                else:
                    for group in optimizer.param_groups:
                        group["lr"] = lr
                    loss = model(inputs, targets_all[idx], negatives, mask)
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    value = loss.item()
                running, n_running = running + value, n_running + 1
                epoch_loss, epoch_n = epoch_loss + value * len(idx), epoch_n + len(idx)
                step += 1
                history["pairs"] += len(idx)
                if bar is not None:
                    bar.update(1)
                if step % log_every == 0:
                    history["log"].append({"step": step, "loss": round(running / n_running, 4),
                                           "seconds": round(time.perf_counter() - started, 1)})
                    if bar is not None:
                        bar.set_postfix(loss=f"{running / n_running:.3f}", epoch=epoch + 1)
                    running, n_running = 0.0, 0
                if cfg.max_seconds > 0 and time.perf_counter() - started >= cfg.max_seconds:
                    stop = True
                    break
            if stop:
                break
        history["epochs"].append({"epoch": epoch + 1, "loss": round(epoch_loss / max(1, epoch_n), 4),
                                  "tokens_kept": int(len(kept)), "seconds": round(time.perf_counter() - started, 1)})
        if stop:
            break
    if bar is not None:
        bar.close()
    model.eval()
    history["steps"] = step
    history["seconds"] = round(time.perf_counter() - started, 1)
    history["final_loss"] = history["epochs"][-1]["loss"] if history["epochs"] else float("nan")
    return history


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
# `python -m playground.train word2vec` (registered in train.KINDS)


def train_kind(cfg: Word2VecTrainConfig, run) -> dict:
    """Vocabulary, subsampled stream, skip-gram or CBOW with negative sampling; writes
    `word2vec-<first corpus>/` (or --name) with the weights in fp16, the word-level tokenizer, and a card
    with the loss before and after and the intrinsic evaluation (analogies, similarity triples)."""
    from playground import checkpoints

    if run.resume:
        raise SystemExit("word2vec: --resume is not supported (a full run takes minutes); run it again")
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
