"""The n-gram language model: counts of every sequence of up to n tokens, and two ways to turn them into
probabilities (Jurafsky & Martin, Speech and Language Processing, ch. 3; Chen & Goodman 1999).

- add-k (Lidstone): P(w | h) = (c(h w) + k) / (c(h) + k V), h the previous n - 1 tokens. An unseen context gives
  the uniform distribution: add-k has nothing to back off to.
- interpolated Kneser-Ney (Kneser & Ney 1995; Chen & Goodman's interpolated form): at each order m = 1..n,
      P_m(w | h) = max(c_m(h w) - D_m, 0) / c_m(h) + D_m N1+(h •) / c_m(h) · P_{m-1}(w | h'),
  h' = h without its oldest token, P_0 = 1/V. The highest order counts what was seen (c_n = count); every lower
  order counts in how many different contexts a sequence was seen (c_m(g) = N1+(• g), the continuation count: "
  Francisco" is frequent but only after "San"). An unseen context h (c_m(h) = 0) passes P_{m-1} on unchanged:
  the model backs off. D_m = n1 / (n1 + 2 n2) from the order's counts of counts (Ney et al. 1994), n1 floored at 1
  so that D_m > 0 (see `discount`).

The counts are tables of m-grams encoded as base-V integers, sorted for binary search: a whole next-token
distribution costs n searches of V keys. The model follows the language models' contract: forward(idx, targets)
-> (logits, loss) with log-probabilities as logits, and step(idx, cache) for generation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SMOOTHINGS = ("kneser-ney", "add-k")


@dataclass
class NGramConfig:
    vocab_size: int = 66            # V: the character vocabulary of the corpus
    n: int = 5                      # the longest sequence counted: a token is predicted from the n - 1 before it
    smoothing: str = "kneser-ney"   # or "add-k"
    k: float = 0.01                 # add-k's pseudo-count
    n_positions: int = 256          # a prompt longer than this is cut (it reads only its last n - 1 tokens anyway)

    def __post_init__(self):
        assert 1 <= self.n <= 8, f"n must be 1 to 8, not {self.n}"
        assert self.vocab_size ** self.n < 2 ** 62, f"V^n = {self.vocab_size}^{self.n} does not fit a 64-bit key"
        assert self.smoothing in SMOOTHINGS, f"smoothing must be one of {SMOOTHINGS}, not {self.smoothing!r}"
        assert self.k > 0, f"k must be positive, not {self.k}"


def gram_keys(ids: np.ndarray, m: int, V: int) -> np.ndarray:
    """Every m-gram of `ids` as one integer, sum_i ids[t + i] V^(m - 1 - i)."""
    keys = np.zeros(len(ids) - m + 1, dtype=np.int64)
    for i in range(m):
        keys = keys * V + ids[i:len(ids) - m + 1 + i]
    return keys


def count(ids: np.ndarray, n: int, V: int) -> dict[str, np.ndarray]:
    """The tables a model needs, per order m: the sorted keys of the m-grams seen, their counts and their
    continuation counts (in how many different contexts each was seen)."""
    tables = {}
    keys_by_order = [np.unique(gram_keys(ids, m, V), return_counts=True) for m in range(1, n + 1)]
    for m, (keys, counts) in enumerate(keys_by_order, start=1):
        continuation = np.zeros(len(keys), dtype=np.int64)
        if m < n:  # N1+(• g): the distinct (m + 1)-grams whose last m tokens are g
            longer = keys_by_order[m][0] % (V ** m)
            suffixes, per = np.unique(longer, return_counts=True)
            continuation[np.searchsorted(keys, suffixes)] = per
        tables[f"keys_{m}"], tables[f"counts_{m}"] = keys, counts.astype(np.int32)   # int32: a million at most
        tables[f"continuation_{m}"] = continuation.astype(np.int32)
    return tables


def discount(c: np.ndarray) -> float:
    """Ney's absolute discount D = n1 / (n1 + 2 n2) from how many sequences were counted once and twice, with n1
    floored at 1."""
    n1, n2 = int((c == 1).sum()), int((c == 2).sum())
    if n1 + n2 == 0:
        return 0.5
    # Why the floor: D is the mass a seen context keeps for the continuations it has not seen, and Ney et al.'s
    # estimate reads it off the singletons (leaving one out, a sequence seen once is the best model of a sequence
    # not seen yet: Good-Turing's n1 / N). With no singleton (a small or repetitive text) it says D = 0: nothing new
    # ever follows a seen context, an unseen continuation gets probability 0 and the loss is infinite. Counting at
    # least one singleton, the least evidence the estimator can hold, gives D = 1 / (1 + 2 n2) > 0, which still
    # shrinks as the doubletons grow; whenever n1 >= 1 (every order of the shipped model) D is unchanged.
    n1 = max(n1, 1)
    return n1 / (n1 + 2 * n2)


class NGramLM(nn.Module):
    """An n-gram LM over fixed count tables (buffers: they move with .to() and save with the state dict)."""

    def __init__(self, config: NGramConfig, tables: dict[str, np.ndarray] | None = None):
        super().__init__()
        self.config = config
        for m in range(1, config.n + 1):
            for name in ("keys", "counts", "continuation"):
                empty = torch.zeros(0, dtype=torch.int64 if name == "keys" else torch.int32)
                value = empty if tables is None else torch.as_tensor(tables[f"{name}_{m}"])
                self.register_buffer(f"{name}_{m}", value)
        self._orders: list[dict] | None = None

    def _prepare(self) -> list[dict]:
        """Per order, the numbers the probabilities read, in numpy: the keys, the counts in use (raw at the
        highest order, continuation below), each context's total and number of different next tokens, D."""
        if self._orders is None:
            V, n, orders = self.config.vocab_size, self.config.n, []
            for m in range(1, n + 1):
                keys = getattr(self, f"keys_{m}").cpu().numpy()
                c = getattr(self, f"counts_{m}" if m == n else f"continuation_{m}").cpu().numpy()
                seen = c > 0
                keys, c = keys[seen], c[seen]
                contexts, first = np.unique(keys // V, return_index=True)
                totals = np.add.reduceat(c.astype(np.int64), first) if len(c) else np.zeros(0, dtype=np.int64)
                types = np.diff(np.append(first, len(c)))
                orders.append(dict(keys=keys, c=c, contexts=contexts, totals=totals, types=types, D=discount(c)))
            self._orders = orders
        return self._orders

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        for name, value in state_dict.items():   # the tables' sizes come from the file
            setattr(self, name, value)
        self._orders = None
        return super().load_state_dict(state_dict, strict=strict, assign=True)

    @staticmethod
    def _lookup(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.searchsorted(keys, wanted).clip(max=max(len(keys) - 1, 0))
        found = (keys[at] == wanted) if len(keys) else np.zeros(wanted.shape, dtype=bool)
        return at, found

    def distribution(self, context: list[int]) -> tuple[np.ndarray, int]:
        """P(· | the last n - 1 tokens of `context`) over the vocabulary, and the highest order whose context was
        seen in training (n: the whole context was seen; 1: only unigrams)."""
        V, n = self.config.vocab_size, self.config.n
        h = list(context[-(n - 1):]) if n > 1 else []
        vocab = np.arange(V, dtype=np.int64)
        if self.config.smoothing == "add-k":
            return self._add_k(h, vocab)
        p, used = np.full(V, 1.0 / V), 0
        for m, order in enumerate(self._prepare(), start=1):
            hist = h[len(h) - (m - 1):] if m > 1 else []
            if len(hist) < m - 1:
                break                                        # the text is shorter than this order's context
            hkey = 0
            for t in hist:
                hkey = hkey * V + t
            at, seen = self._lookup(order["contexts"], np.array([hkey]))
            if not seen[0]:
                continue                                     # unseen context: back off (P_m = P_{m-1})
            total, types, D = order["totals"][at[0]], order["types"][at[0]], order["D"]
            idx, hit = self._lookup(order["keys"], hkey * V + vocab)
            c = np.where(hit, order["c"][idx], 0)
            p = np.maximum(c - D, 0) / total + D * types / total * p
            used = m
        return p, used

    def _add_k(self, h: list[int], vocab: np.ndarray) -> tuple[np.ndarray, int]:
        V, k, n = self.config.vocab_size, self.config.k, self.config.n
        if len(h) < n - 1:                                   # fewer tokens than a context: nothing counted to use
            return np.full(V, 1.0 / V), 0
        keys, counts = self.keys_n_np()
        hkey = 0
        for t in h:
            hkey = hkey * V + t
        idx, hit = self._lookup(keys, hkey * V + vocab)
        c = np.where(hit, counts[idx], 0).astype(np.float64)                    # (V,)
        return (c + k) / (c.sum() + k * V), n if c.sum() > 0 and len(h) == n - 1 else 0

    def keys_n_np(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.config.n
        return getattr(self, f"keys_{n}").cpu().numpy(), getattr(self, f"counts_{n}").cpu().numpy()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """idx (B, T) -> (log P(x_t+1 | x_≤t) for every position as logits (B, T, V), mean NLL or None): each
        position sees at most the n - 1 tokens before it within the row, as every LM here sees its window."""
        logits = self._log_probs(idx, 0)
        loss = None
        if targets is not None:
            loss = F.nll_loss(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def step(self, idx: torch.Tensor, cache: dict | None = None):
        """Incremental decoding (nets/gpt.py's contract): idx (B, T_new) the new tokens of every row (one row per
        beam in beam search) -> logits (B, T_new, V), each row's own distributions; the cache is the tokens seen."""
        seen = idx if cache is None else torch.cat([cache["seen"], idx], dim=1)   # (B, T_seen)
        return self._log_probs(seen, seen.size(1) - idx.size(1)), {"seen": seen}

    def _log_probs(self, seen: torch.Tensor, start: int) -> torch.Tensor:
        """log P(· | row b up to t) for every row b of seen (B, T) and every position t >= start: (B, T - start, V),
        on seen's device. Each row is read on its own (the tokens of another row, another beam, never enter)."""
        rows = seen.cpu().numpy()
        out = np.empty((rows.shape[0], rows.shape[1] - start, self.config.vocab_size))
        for b, row in enumerate(rows):
            for t in range(start, len(row)):
                out[b, t - start] = self.distribution(row[:t + 1].tolist())[0]
        return torch.from_numpy(np.log(out)).float().to(seen.device)

    def target_log_probs(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """log P(y[b, t] | x[b, ≤t]) for every position at once (N, T), the context restarting at each row as in
        `forward`: the held-out evaluation of a million characters in seconds, the same numbers as `forward`."""
        V, n, k = self.config.vocab_size, self.config.n, self.config.k
        N, T = x.shape
        pos = np.arange(T)
        def context_key(m: int) -> np.ndarray:  # the m - 1 tokens before each target, as one key (N, T)
            key = np.zeros((N, T), dtype=np.int64)
            for j in range(m - 1, 0, -1):
                shifted = np.zeros((N, T), dtype=np.int64)
                shifted[:, j - 1:] = x[:, :T - j + 1]
                key = key * V + shifted
            return key
        if self.config.smoothing == "add-k":
            keys, counts = self.keys_n_np()
            h = context_key(n)
            full = pos[None, :] >= n - 2
            grams = h[..., None] * V + np.arange(V)
            at, hit = self._lookup(keys, grams)
            c = np.where(hit, counts[at], 0)
            own = np.take_along_axis(c, y[..., None], -1)[..., 0]
            p = np.where(full, (own + k) / (c.sum(-1) + k * V), 1.0 / V)
            return np.log(p)
        p = np.full((N, T), 1.0 / V)
        for m, order in enumerate(self._prepare(), start=1):
            h = context_key(m)
            enough = pos[None, :] >= m - 2                    # position t has t + 1 tokens: m - 1 needed
            at, seen = self._lookup(order["contexts"], h)
            seen &= enough
            total = np.where(seen, order["totals"][at], 1)
            types = np.where(seen, order["types"][at], 0)
            gi, hit = self._lookup(order["keys"], h * V + y)
            c = np.where(hit & seen, order["c"][gi], 0)
            p = np.where(seen, np.maximum(c - order["D"], 0) / total + order["D"] * types / total * p, p)
        return np.log(p)

    @staticmethod
    def reorder_cache(cache: dict, index: torch.Tensor) -> dict:
        return {"seen": cache["seen"][index]}

    def sub_model(self, n: int, smoothing: str | None = None) -> "NGramLM":
        """The same counts read as an n-gram of a lower order (or another smoothing): orders above n unused."""
        config = NGramConfig(self.config.vocab_size, n, smoothing or self.config.smoothing, self.config.k)
        tables = {f"{name}_{m}": getattr(self, f"{name}_{m}").numpy() for m in range(1, n + 1)
                  for name in ("keys", "counts", "continuation")}
        return NGramLM(config, tables)

    def num_params(self) -> int:
        """What the model stores: one count per m-gram seen (and a continuation count below the top order)."""
        return sum(getattr(self, f"counts_{m}").numel() for m in range(1, self.config.n + 1))
