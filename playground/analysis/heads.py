"""What each attention head does, as numbers: six statistics per head, over one text or over a corpus sample.

A head is described by where its weight goes, averaged over the queries of a text (Clark et al. 2019 read BERT's
heads this way; Olsson et al. 2022 defined the induction and previous-token scores; Wang et al. 2022 named the
duplicate-token heads; Xiao et al. 2023 the "attention sinks"). For attention weights A (L, H, T, T) over token ids
t_0 .. t_{T-1}, each statistic is a mean over the queries i that have it (query 0 has no choice in a causal model,
so every statistic starts at query 1):

- `entropy`     −Σ_j A[i, j] log A[i, j], in nats: low, the head looks at one token;
- `distance`    Σ_j A[i, j] |i − j|, in tokens: how far it looks;
- `previous`    A[i, i − 1]: a previous-token head;
- `first`       A[i, 0]: the weight parked on the first token (a causal model's sink, a BERT's [CLS]);
- `duplicate`   Σ_{j < i, t_j = t_i} A[i, j], over the queries whose token occurred before: a duplicate-token head;
- `induction`   Σ_{k < i, t_{k−1} = t_i} A[i, k], over the queries whose token occurred before with a successor other
                than the query itself: "find the earlier occurrence, look at what followed it" (an induction head).

Earlier occurrences only, for every family: a BERT may also look ahead, but the statistics are defined the same way
for every model so that their numbers compare. A corpus is many windows: each statistic's sums and query counts are
added over the windows (`Sums`), so a window with more repeated tokens counts more for `induction`, as it should.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

STATS = {"entropy": "entropy (nats): low, the head looks at one token",
         "distance": "mean distance attended |i − j| (tokens)",
         "previous": "previous-token score: weight on the token just before",
         "first": "first-token (sink) score: weight on the first token",
         "duplicate": "duplicate-token score: weight on earlier copies of the query's token",
         "induction": "induction score: weight on the token after an earlier copy of the query's token"}


def masks(ids: list[int] | np.ndarray) -> dict[str, np.ndarray]:
    """The keys each statistic adds up, as (T, T) booleans over (query i, key j): the previous token, the first,
    earlier copies of the query's token (`duplicate`), and the tokens after those copies (`induction`: key k with
    t_{k−1} = t_i and k < i)."""
    t = np.asarray(ids)
    T = len(t)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    same = t[:, None] == t[None, :]                                     # (T, T): t_i = t_j
    after_same = np.zeros((T, T), bool)
    after_same[:, 1:] = same[:, :-1]                                    # (i, k): t_{k-1} = t_i
    return {"previous": j == i - 1, "first": (j == 0) & (i > 0), "duplicate": same & (j < i),
            "induction": after_same & (j < i)}


@dataclass
class Sums:
    """Each statistic's sum over the queries that have it, per head (L, H), and how many queries that was:
    adding windows is adding these, and `means` divides at the end."""

    sums: dict[str, np.ndarray] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATS, 0))

    def add(self, A: np.ndarray | tuple[np.ndarray, ...], ids: list[int]) -> Sums:
        """One text's attention A (L, H, T, T) (or L arrays (H, T, T)) over its token ids."""
        W = np.stack(A).astype(np.float64)                              # (L, H, T, T)
        T = W.shape[-1]
        if T < 2:
            return self
        Q = W[..., 1:, :]                                               # queries 1 .. T-1
        idx = np.arange(T)
        logs = np.log(np.where(Q > 0, Q, 1.0))
        part = {"entropy": (-(Q * logs).sum(-1), T - 1),
                "distance": ((Q * np.abs(idx[1:, None] - idx[None, :])).sum(-1), T - 1)}
        for name, mask in masks(ids).items():
            rows = mask.any(axis=1)                                     # the queries this statistic has
            part[name] = ((W[..., rows, :] * mask[rows]).sum(-1), int(rows.sum()))
        for name, (per_query, n) in part.items():
            total = per_query.sum(-1) if n else np.zeros(W.shape[:2])   # (L, H)
            self.sums[name] = self.sums.get(name, 0) + total
            self.counts[name] += n
        return self

    def means(self) -> dict[str, np.ndarray | None]:
        """Per statistic, (L, H) means over its queries, or None where no query had it (no repeated token)."""
        return {name: (self.sums[name] / self.counts[name] if self.counts[name] else None) for name in STATS}


def stats(A: np.ndarray | tuple[np.ndarray, ...], ids: list[int]) -> dict[str, np.ndarray | None]:
    """The six statistics of every head on one text (see the module's docstring)."""
    return Sums().add(A, ids).means()


def ranking(table: np.ndarray, descending: bool = True) -> list[tuple[int, int, float]]:
    """Every head as (layer, head, value), the largest value first (smallest with descending=False); ties in the
    order layer, then head, so the ranking is the same on every run."""
    L, H = table.shape
    order = sorted(((float(table[l, h]), l, h) for l in range(L) for h in range(H)),
                   key=lambda r: (-r[0] if descending else r[0], r[1], r[2]))
    return [(l, h, v) for v, l, h in order]
