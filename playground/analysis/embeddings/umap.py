"""UMAP (McInnes, Healy & Melville 2018, arXiv:1802.03426), written out in NumPy and SciPy.

The steps of the paper's Algorithms 1-5, with its names:
1. the k nearest neighbours of every point (exact, cosine distance; the paper approximates them with NN-descent);
2. for point i, rho_i = its distance to the nearest neighbour and sigma_i chosen so that
   sum_j exp(-(d(i, j) - rho_i) / sigma_i) = log2(k)  (a binary search): memberships w(i -> j) on a local scale;
3. the fuzzy union of the directed graph and its transpose: W = A + A^T - A * A^T;
4. a low-dimensional layout started from the graph's spectral embedding (the normalised Laplacian's smallest
   eigenvectors) and moved by stochastic gradient descent on the fuzzy-set cross entropy: each edge pulls its ends
   together as often as its weight says, and a few random points (negative samples) push the head away. The curve
   1 / (1 + a d^(2b)) that measures closeness in the layout is fitted to min_dist and spread.

Deviation from umap-learn, said here: the edges due in one epoch move their points together (one vectorised update
per epoch, like umap-learn's parallel mode), not one after another, and the neighbours are exact. Everything random
comes from one seeded generator, so a seed gives the same picture on every machine and thread count.
This replaces umap-learn, whose numba compiler cost 357 MB of resident memory and seconds per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.optimize import curve_fit
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import eigsh

SMOOTH_K_TOLERANCE = 1e-5     # |sum_j exp(...) - log2 k| at which the search for sigma_i stops
MIN_K_DIST_SCALE = 1e-3       # sigma_i never below this share of the mean neighbour distance (umap-learn's floor)


@dataclass
class UMAPConfig:
    n_neighbors: int = 15         # k: the size of the neighbourhood each point's local scale is fitted to
    n_components: int = 2         # dimensions of the layout
    min_dist: float = 0.1         # how tightly points may pack in the layout (through a and b)
    spread: float = 1.0           # the scale of the layout's distances (through a and b)
    n_epochs: int | None = None   # None: 500 up to 10,000 points, else 200 (the paper's defaults)
    negative_sample_rate: int = 5  # random points pushed away per edge sample
    learning_rate: float = 1.0    # alpha at epoch 0, decaying linearly to 0
    seed: int = 0

    def __post_init__(self):
        assert self.n_neighbors >= 2, f"n_neighbors must be at least 2, not {self.n_neighbors}"
        assert self.n_components >= 1, f"n_components must be at least 1, not {self.n_components}"
        assert 0 <= self.min_dist <= self.spread, \
            f"min_dist must lie in [0, spread={self.spread}], not {self.min_dist}"


def cosine_knn(X: np.ndarray, k: int, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Each point's k nearest points by cosine distance 1 - cos, itself first (distance 0). Exact, in chunks of
    rows so that 10,000 points never hold a 10,000 x 10,000 matrix. Returns indices and distances, (n, k)."""
    unit = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    n = len(X)
    indices, distances = np.empty((n, k), np.int64), np.empty((n, k), np.float64)
    for start in range(0, n, chunk):
        d = 1.0 - unit[start:start + chunk] @ unit.T                           # (rows, n)
        rows = np.arange(len(d))
        d[rows, start + rows] = -1.0                                           # itself always first
        part = np.argpartition(d, k - 1, axis=1)[:, :k]                        # the k smallest, unordered
        order = np.argsort(np.take_along_axis(d, part, 1), axis=1, kind="stable")
        indices[start:start + chunk] = np.take_along_axis(part, order, 1)
        distances[start:start + chunk] = np.take_along_axis(d, indices[start:start + chunk], 1)
    distances[:, 0] = 0.0
    return indices, np.maximum(distances, 0.0)


def smooth_knn_dist(distances: np.ndarray, n_iter: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """rho_i (the distance to the nearest other point) and sigma_i such that
    sum_{j>0} exp(-max(d_ij - rho_i, 0) / sigma_i) = log2(k), by bisection for all points at once."""
    n, k = distances.shape
    target = np.log2(k)
    others = distances[:, 1:]                                                  # column 0 is the point itself
    positive = np.where(others > 0, others, np.inf)
    rho = positive.min(axis=1)
    rho[~np.isfinite(rho)] = 0.0                                               # every neighbour a duplicate
    lo, hi, sigma = np.zeros(n), np.full(n, np.inf), np.ones(n)
    gap = np.maximum(others - rho[:, None], 0.0)
    for _ in range(n_iter):
        psum = np.exp(-gap / sigma[:, None]).sum(axis=1)
        if np.all(np.abs(psum - target) < SMOOTH_K_TOLERANCE):
            break
        too_big = psum > target                                                # sigma too wide: shrink it
        hi = np.where(too_big, sigma, hi)
        lo = np.where(too_big, lo, sigma)
        sigma = np.where(np.isinf(hi), sigma * 2, (lo + hi) / 2)
    mean_row, mean_all = others.mean(axis=1), others.mean()
    floor = MIN_K_DIST_SCALE * np.where(rho > 0, mean_row, mean_all)
    return rho, np.maximum(sigma, floor)


def fuzzy_simplicial_set(indices: np.ndarray, distances: np.ndarray) -> sp.csr_matrix:
    """The symmetric graph of memberships: w(i -> j) = exp(-(d_ij - rho_i) / sigma_i) (1 for the nearest
    neighbour), then the fuzzy union W = A + A^T - A * A^T. Self-loops are left out."""
    n, k = indices.shape
    rho, sigma = smooth_knn_dist(distances)
    w = np.exp(-np.maximum(distances - rho[:, None], 0.0) / sigma[:, None])   # (n, k)
    w[indices == np.arange(n)[:, None]] = 0.0
    A = sp.csr_matrix((w.ravel(), (np.repeat(np.arange(n), k), indices.ravel())), shape=(n, n))
    A.eliminate_zeros()
    At = A.T.tocsr()
    W = A + At - A.multiply(At)
    W.eliminate_zeros()
    return W.tocsr()


def find_ab_params(spread: float, min_dist: float) -> tuple[float, float]:
    """a and b of the layout's closeness 1 / (1 + a d^(2b)), least-squares fitted to 1 below min_dist and
    exp(-(d - min_dist) / spread) above it (min_dist 0.1, spread 1 give a = 1.58, b = 0.90)."""
    x = np.linspace(0, spread * 3, 300)
    y = np.where(x < min_dist, 1.0, np.exp(-(x - min_dist) / spread))
    (a, b), _ = curve_fit(lambda d, a, b: 1.0 / (1.0 + a * d ** (2 * b)), x, y)
    return float(a), float(b)


def spectral_init(W: sp.csr_matrix, dims: int) -> np.ndarray | None:
    """The eigenvectors of the normalised Laplacian L = I - D^-1/2 W D^-1/2 with the smallest non-zero
    eigenvalues (Laplacian eigenmaps), or None when the graph falls apart or the solver does not converge."""
    n = W.shape[0]
    n_parts, _ = connected_components(W, directed=False)
    if n_parts > 1 or n <= dims + 1:
        return None
    d = np.asarray(W.sum(axis=1)).ravel()
    D = sp.diags(1.0 / np.sqrt(d))
    L = sp.identity(n) - D @ W @ D
    try:
        if n <= 300:                                        # small: the dense solver is exact and quick
            values, vectors = np.linalg.eigh(L.toarray())
        else:
            values, vectors = eigsh(L, dims + 1, which="SM", tol=1e-4, v0=np.ones(n), maxiter=n * 5)
    except (np.linalg.LinAlgError, RuntimeError, ValueError):
        return None
    order = np.argsort(values)[1:dims + 1]                  # the first is the constant vector D^1/2 1
    return vectors[:, order]


def _initial_layout(X: np.ndarray, W: sp.csr_matrix, dims: int, rng: np.random.Generator) -> np.ndarray:
    """Spectral start scaled to [-10, 10] with a little noise to break ties (as umap-learn); the principal
    components when the graph has several parts."""
    Y = spectral_init(W, dims)
    if Y is None:
        Xc = X - X.mean(0)
        Y = np.linalg.svd(Xc, full_matrices=False)[0][:, :dims]
        if Y.shape[1] < dims:
            Y = np.pad(Y, ((0, 0), (0, dims - Y.shape[1])))
    Y = 10.0 * Y / max(np.abs(Y).max(), 1e-12)
    return Y + rng.normal(scale=1e-4, size=Y.shape)


def _clip(g: np.ndarray) -> np.ndarray:
    return np.clip(g, -4.0, 4.0)                            # umap-learn's bound on every gradient coordinate


def optimize_layout(Y: np.ndarray, W: sp.csr_matrix, a: float, b: float, cfg: UMAPConfig, n_epochs: int,
                    rng: np.random.Generator, progress: Callable[[float], None] | None = None) -> np.ndarray:
    """SGD on the cross entropy between the graph W and the layout's memberships 1 / (1 + a |y_i - y_j|^(2b)).
    An edge of weight w is sampled every max(w) / w epochs; each sample pulls y_i and y_j together and pushes
    y_i away from negative_sample_rate random points."""
    coo = W.tocoo()
    keep = coo.data >= coo.data.max() / n_epochs            # edges too weak to be sampled once are dropped
    head, tail, weight = coo.row[keep], coo.col[keep], coo.data[keep]
    n, dims = Y.shape
    epochs_per_sample = weight.max() / weight
    epochs_per_negative = epochs_per_sample / cfg.negative_sample_rate
    next_sample, next_negative = epochs_per_sample.copy(), epochs_per_negative.copy()
    Y = Y.astype(np.float32)                                # float32: twice as fast, and plenty for a picture

    def move(points: np.ndarray, step: np.ndarray) -> None:
        for c in range(dims):                               # bincount sums every edge's step per point at once
            Y[:, c] += np.bincount(points, step[:, c], minlength=n)

    for epoch in range(n_epochs):
        alpha = cfg.learning_rate * (1.0 - epoch / n_epochs)
        due = np.flatnonzero(next_sample <= epoch + 1)
        i, j = head[due], tail[due]
        diff = Y[i] - Y[j]
        d2 = (diff ** 2).sum(1, keepdims=True)
        d2b1 = np.where(d2 > 0, d2, 1.0) ** (b - 1)                          # d^(2b-2), computed once
        pull = -2.0 * a * b * d2b1 / (a * d2b1 * d2 + 1.0)
        step = _clip(np.where(d2 > 0, pull, 0.0) * diff) * alpha
        move(i, step)
        move(j, -step)
        next_sample[due] += epochs_per_sample[due]
        # negative samples: as many as are due for each sampled edge, each a uniformly random point
        n_neg = ((epoch + 1 - next_negative[due]) / epochs_per_negative[due]).astype(np.int64).clip(min=0)
        next_negative[due] += n_neg * epochs_per_negative[due]
        src = np.repeat(i, n_neg)
        other = rng.integers(0, n, size=len(src))
        src, other = src[other != src], other[other != src]
        diff = Y[src] - Y[other]
        d2 = (diff ** 2).sum(1, keepdims=True)
        push = 2.0 * b / ((0.001 + d2) * (a * d2 ** b + 1.0))
        move(src, _clip(push * diff) * alpha)
        if progress and epoch % 50 == 0:
            progress(epoch / n_epochs)
    return Y


def umap(X: np.ndarray, cfg: UMAPConfig | None = None,
         progress: Callable[[float], None] | None = None) -> np.ndarray:
    """(n, d) -> (n, n_components): the whole method. The same X and cfg (seed included) give the same layout."""
    cfg = cfg or UMAPConfig()
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    assert n > cfg.n_neighbors, f"UMAP with n_neighbors={cfg.n_neighbors} needs more points than that, not {n}"
    rng = np.random.default_rng(cfg.seed)
    indices, distances = cosine_knn(X, cfg.n_neighbors)
    W = fuzzy_simplicial_set(indices, distances)
    a, b = find_ab_params(cfg.spread, cfg.min_dist)
    n_epochs = cfg.n_epochs or (500 if n <= 10_000 else 200)
    Y = _initial_layout(X, W, cfg.n_components, rng)
    Y = 10.0 * (Y - Y.min(0)) / np.maximum(Y.max(0) - Y.min(0), 1e-12)   # umap-learn optimises in [0, 10]
    return optimize_layout(Y, W, a, b, cfg, n_epochs, rng, progress)
