"""Bias in word embeddings, as plain data: what our word spaces learned about gender from their corpus.

- A gender direction (after Bolukbasi et al. 2016, "Man is to Computer Programmer as Woman is to Homemaker?"):
  g = unit(mean_i (unit(m_i) - unit(f_i))) over definitional pairs (he, she), (man, woman), ... The paper takes
  the first principal component of the pairs' centred vectors; the mean of the differences is its simpler
  form (the two agree when the pairs agree), and each pair's cosine with g says how far they do.
  A word's projection is cos(w, g): > 0 leans to the first word of the pairs (he), < 0 to the second (she).
- The Word Embedding Association Test (Caliskan, Bryson & Narayanan 2017, "Semantics derived automatically from
  language corpora contain human-like biases"), with the paper's symbols:
      s(w, A, B)    = mean_{a in A} cos(w, a) - mean_{b in B} cos(w, b)
      s(X, Y, A, B) = sum_{x in X} s(x, A, B) - sum_{y in Y} s(y, A, B)
      d             = (mean_{x in X} s(x, A, B) - mean_{y in Y} s(y, A, B)) / std_{w in X u Y} s(w, A, B)
      p             = Pr_i [ s(X_i, Y_i, A, B) > s(X, Y, A, B) ]  over the splits (X_i, Y_i) of X u Y
                      into sets of the sizes of X and Y: all of them when there are few, else a seeded sample.

Only words of a space's vocabulary are used (FastText could build any string from its n-grams; here it does
not, so the three spaces are compared on the same words); the others are listed as missing, never dropped
silently. The numbers measure association in one corpus's co-occurrence statistics, through one model.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from playground.analysis.embeddings import EmbeddingError
from playground.analysis.embeddings.words import WordSpace, unit_rows

EXACT_MAX = 100_000      # up to this many splits of X u Y the p-value is exact (C(16, 8) = 12,870)
SAMPLES = 10_000         # beyond it, this many seeded random splits (the p-value's resolution: 1e-4)

# Bolukbasi et al. 2016's ten definitional pairs, (male, female); *gal* is not in our corpus (it says so)
PAIRS = [("he", "she"), ("his", "her"), ("man", "woman"), ("john", "mary"), ("himself", "herself"),
         ("son", "daughter"), ("father", "mother"), ("guy", "gal"), ("boy", "girl"), ("male", "female")]

# occupations and roles our books and glossaries use (Austen's governess, the Jargon File's programmer)
OCCUPATIONS = ["doctor", "nurse", "physician", "surgeon", "teacher", "professor", "lawyer", "judge", "soldier",
               "captain", "sailor", "servant", "maid", "cook", "carpenter", "merchant", "farmer", "priest",
               "governess", "housekeeper", "secretary", "programmer", "engineer", "scientist", "clerk", "banker",
               "baker", "tailor", "midwife", "dancer", "singer", "poet", "painter", "writer", "shepherd", "hacker",
               "manager", "officer", "architect", "weaver", "musician", "actor", "actress", "landlord", "minister"]

# Caliskan et al. 2017's word lists, unchanged (the words our corpus lacks are listed as missing):
# name -> (X, Y, A, B), each ("label", [words])
WEAT_TESTS = {
    "flowers vs insects, pleasant vs unpleasant (WEAT 1, the sanity check)": (
        ("flowers", "aster clover hyacinth marigold poppy azalea crocus iris orchid rose bluebell daffodil lilac "
                    "pansy tulip buttercup daisy lily peony violet carnation gladiola magnolia petunia zinnia"),
        ("insects", "ant caterpillar flea locust spider bedbug centipede fly maggot tarantula bee cockroach gnat "
                    "mosquito termite beetle cricket hornet moth wasp blackfly dragonfly horsefly roach weevil"),
        ("pleasant", "caress freedom health love peace cheer friend heaven loyal pleasure diamond gentle honest "
                     "lucky rainbow diploma gift honor miracle sunrise family happy laughter paradise vacation"),
        ("unpleasant", "abuse crash filth murder sickness accident death grief poison stink assault disaster "
                       "hatred pollute tragedy divorce jail poverty ugly cancer kill rotten vomit agony prison")),
    "male vs female names, career vs family (WEAT 6)": (
        ("male names", "john paul mike kevin steve greg jeff bill"),
        ("female names", "amy joan lisa sarah diana kate ann donna"),
        ("career", "executive management professional corporation salary office business career"),
        ("family", "home parents children family cousins marriage wedding relatives")),
    "male vs female terms, career vs family (WEAT 6's attributes, WEAT 7's terms)": (
        ("male terms", "male man boy brother he him his son"),
        ("female terms", "female woman girl sister she her hers daughter"),
        ("career", "executive management professional corporation salary office business career"),
        ("family", "home parents children family cousins marriage wedding relatives")),
    "math vs arts, male vs female terms (WEAT 7)": (
        ("math", "math algebra geometry calculus equations computation numbers addition"),
        ("arts", "poetry art dance literature novel symphony drama sculpture"),
        ("male terms", "male man boy brother he him his son"),
        ("female terms", "female woman girl sister she her hers daughter")),
}


def known(space: WordSpace, words: list[str]) -> tuple[list[str], np.ndarray, list[str]]:
    """The words of the space's vocabulary (lowercased, first occurrence kept), their unit vectors (n, d), and
    the words it does not have."""
    kept, missing = [], []
    for w in words:
        w = w.strip().lower()
        if not w or w in kept or w in missing:
            continue
        (kept if w in space.vocab else missing).append(w)
    rows = [space.vocab[w] for w in kept]
    return kept, space.unit(rows) if rows else np.zeros((0, space.dim), np.float32), missing


# ---------------------------------------------------------------------------------------------
# A direction and the projections on it (Bolukbasi et al. 2016)


def direction(space: WordSpace, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, list[dict], list[str]]:
    """g = unit(mean_i (unit(m_i) - unit(f_i))) over the pairs with both words in the space: g (d,), each
    used pair with its difference's cosine with g, and the words missing."""
    diffs, used, missing = [], [], []
    for m, f in pairs:
        words, vecs, absent = known(space, [m, f])
        missing += absent
        if len(words) == 2:
            diffs.append(vecs[0] - vecs[1])
            used.append((words[0], words[1]))
    if not diffs:
        raise EmbeddingError(f"None of the pairs has both words in {space.key}'s vocabulary "
                             f"(missing: {', '.join(missing) or 'none'}).")
    D = np.stack(diffs)                                               # (P, d) one difference per pair
    g = D.mean(0)
    g = g / max(float(np.linalg.norm(g)), 1e-12)                      # unit: a projection is then a cosine
    agree = unit_rows(D) @ g                                          # (P,) how well each pair points along g
    return g, [{"pair": list(p), "cosine_with_direction": round(float(c), 4)} for p, c in zip(used, agree)], missing


def projections(space: WordSpace, g: np.ndarray, words: list[str]) -> tuple[list[dict], list[str]]:
    """cos(w, g) for each known word, sorted from the most first-word-leaning (he) to the most second (she)."""
    kept, vecs, missing = known(space, words)
    p = vecs @ g                                                      # (n,) unit rows . unit g = cosine
    order = np.argsort(-p, kind="stable")
    return [{"word": kept[i], "projection": round(float(p[i]), 4)} for i in order], missing


# ---------------------------------------------------------------------------------------------
# WEAT (Caliskan et al. 2017)


def association(W: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """s(w, A, B) = mean_a cos(w, a) - mean_b cos(w, b) for each row of W; all rows unit length. (n,)"""
    return (W @ A.T).mean(1) - (W @ B.T).mean(1)


def weat_statistic(s_x: np.ndarray, s_y: np.ndarray) -> float:
    """s(X, Y, A, B) = sum_x s(x, A, B) - sum_y s(y, A, B)."""
    return float(s_x.sum() - s_y.sum())


def effect_size(s_x: np.ndarray, s_y: np.ndarray) -> float:
    """d = (mean_x s - mean_y s) / std_{X u Y} s, with the sample standard deviation (ddof = 1, as WEFE's
    implementation; the paper writes std-dev without saying which)."""
    spread = float(np.std(np.concatenate([s_x, s_y]), ddof=1))
    return float((s_x.mean() - s_y.mean()) / spread) if spread > 0 else 0.0


def permutation_p(s_x: np.ndarray, s_y: np.ndarray, seed: int = 0) -> dict:
    """One-sided p = the fraction of splits (X_i, Y_i) of X u Y, |X_i| = |X|, with s(X_i, Y_i) > s(X, Y) (strictly,
    as the paper). Every split when there are at most EXACT_MAX of them (the observed one counts in the
    denominator), else SAMPLES seeded random splits."""
    s = np.concatenate([s_x, s_y])
    n, k = len(s), len(s_x)
    observed = weat_statistic(s_x, s_y)
    total = float(s.sum())
    splits = math.comb(n, k)
    if splits <= EXACT_MAX:
        idx = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64).reshape(splits, k)
        exact = True
    else:
        rng = np.random.default_rng(seed)
        idx = rng.random((SAMPLES, n)).argsort(axis=1)[:, :k]         # (SAMPLES, k) a random X_i per row
        exact = False
    stats = 2 * s[idx].sum(1) - total                                # sum_{X_i} s - sum_{Y_i} s, (splits,)
    # a split that only reorders the observed sums may differ in the last bits: not "greater"
    greater = int((stats > observed + 1e-9 * max(1.0, abs(observed))).sum())
    return {"p_value": greater / len(idx), "greater": greater, "splits": len(idx), "exact": exact,
            "all_splits": splits, "seed": None if exact else seed}


@dataclass
class WeatSets:
    X: tuple[str, list[str]]     # (label, words): the targets ...
    Y: tuple[str, list[str]]
    A: tuple[str, list[str]]     # ... and the attributes
    B: tuple[str, list[str]]


def weat(space: WordSpace, sets: WeatSets, seed: int = 0) -> dict:
    """The test on one space: the words used and missing per set, s(w, A, B) per target word, the statistic,
    the effect size and the permutation p-value. A set left with too few words is reported in `error`."""
    used, missing, vecs = {}, {}, {}
    for name in "XYAB":
        words, V, absent = known(space, getattr(sets, name)[1])
        used[name], missing[name], vecs[name] = words, absent, V
    row = {"source": space.key, "used": used, "missing": missing}
    short = [n for n, need in (("X", 2), ("Y", 2), ("A", 1), ("B", 1)) if len(used[n]) < need]
    if short:     # the std over X u Y needs two words; an empty attribute set has no mean
        row["error"] = f"too few known words in {', '.join(short)}"
        return row
    s_x, s_y = association(vecs["X"], vecs["A"], vecs["B"]), association(vecs["Y"], vecs["A"], vecs["B"])
    row.update(statistic=round(weat_statistic(s_x, s_y), 4), effect_size=round(effect_size(s_x, s_y), 4),
               **permutation_p(s_x, s_y, seed),
               association={"X": [[w, round(float(v), 4)] for w, v in zip(used["X"], s_x)],
                            "Y": [[w, round(float(v), 4)] for w, v in zip(used["Y"], s_y)]})
    return row


def view(space: WordSpace, spaces: list[WordSpace], pairs: list[tuple[str, str]], occupations: list[str],
         sets: WeatSets, seed: int = 0) -> dict:
    """The endpoint's data: the direction and projections in `space`, and the WEAT on each of `spaces`."""
    g, used_pairs, missing_pairs = direction(space, pairs)
    shown, missing = projections(space, g, occupations)
    return {"source": space.key,
            "direction": {"method": "mean of the pairs' unit differences unit(m) - unit(f), unit length",
                          "pairs": used_pairs, "missing": missing_pairs},
            "projections": shown, "missing": missing,
            "weat": {"sets": {n: {"label": getattr(sets, n)[0], "words": getattr(sets, n)[1]} for n in "XYAB"},
                     "models": [weat(s, sets, seed) for s in spaces]}}
