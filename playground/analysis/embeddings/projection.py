"""Projections of word or sentence vectors to 2D or 3D: PCA (an SVD of the centred matrix), t-SNE (van der
Maaten & Hinton 2008, from scikit-learn), UMAP (McInnes et al. 2018, written out in `umap.py`).
t-SNE and UMAP results are cached (a cache of results, never of user state)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from playground.analysis.embeddings.umap import UMAPConfig, umap

METHODS = ("pca", "tsne", "umap")


def pca(X: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Principal components by SVD of the centred matrix: X - mean = U S V^T, coordinates = U S (the first
    `dims` columns). Returns (n, dims) and the share of variance each component explains."""
    Xc = X.astype(np.float64) - X.mean(0, keepdims=True)             # (n, d)
    if len(X) > 3 * X.shape[1]:  # tall: the d x d covariance's eigenvectors are V, cheaper than the full SVD
        cov = Xc.T @ Xc                                              # (d, d)
        evals, evecs = np.linalg.eigh(cov)
        order = np.argsort(evals)[::-1]
        evals, evecs = evals[order].clip(min=0), evecs[:, order]
        Y = Xc @ evecs[:, :dims]
        var = evals
    else:
        U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
        Y = U[:, :dims] * S[:dims]
        var = S ** 2
    ratio = var[:dims] / max(float(var.sum()), 1e-30)
    if Y.shape[1] < dims:  # fewer components than asked (n or d too small): pad with zeros
        Y = np.pad(Y, ((0, 0), (0, dims - Y.shape[1])))
        ratio = np.pad(ratio, (0, dims - len(ratio)))
    # a component's sign is arbitrary: make each one's largest coordinate positive, so reruns agree
    signs = np.sign(Y[np.abs(Y).argmax(0), np.arange(dims)])
    return (Y * np.where(signs == 0, 1, signs)).astype(np.float32), ratio.astype(np.float32)


_PROJECTION_CACHE: OrderedDict = OrderedDict()
_PROJECTION_LOCK = threading.Lock()


@dataclass(frozen=True)
class Settings:
    """What t-SNE and UMAP take besides the points: the seed of everything random, so that a link shows everyone
    the same picture, and each method's own parameters (None: the method's default for the number of points)."""

    seed: int = 0
    perplexity: float | None = None     # t-SNE: the effective number of neighbours (van der Maaten & Hinton)
    n_neighbors: int | None = None      # UMAP: k, the neighbourhood each local scale is fitted to
    min_dist: float = 0.1               # UMAP: how tightly points may pack


def project(X: np.ndarray, method: str = "pca", dims: int = 2, seed: int = 0, cache_key: tuple | None = None,
            progress: Callable[[float, str], None] | None = None,
            settings: Settings | None = None) -> tuple[np.ndarray, dict]:
    """(n, d) -> (n, dims) with PCA, t-SNE or UMAP. Returns the coordinates and what the method reports
    (explained variance for PCA; the seed and the parameters used, and the KL divergence for t-SNE). With a
    cache_key, t-SNE and UMAP results are kept (the presets are computed once per process). `settings` (or `seed`
    alone) fix the randomness and the parameters; a parameter outside what n points allow is brought within it
    and the info says the value used. UMAP on fewer than 6 points raises RuntimeError."""
    assert method in METHODS, f"method must be one of {METHODS}, not {method!r}"
    assert dims in (2, 3), f"dims must be 2 or 3, not {dims}"
    n = len(X)
    assert n >= 3, f"a projection needs at least 3 points, not {n}"
    if method == "pca":
        Y, ratio = pca(X, dims)
        return Y, {"method": "pca", "explained_variance_ratio": [round(float(r), 4) for r in ratio]}
    settings = settings or Settings(seed=seed)
    key = None if cache_key is None else (cache_key, method, dims, n, settings)
    if key is not None:
        with _PROJECTION_LOCK:
            if key in _PROJECTION_CACHE:
                _PROJECTION_CACHE.move_to_end(key)
                Y, info = _PROJECTION_CACHE[key]
                return Y, {**info, "cached": True}
    if progress:
        progress(0.1, f"{method} of {n} points")
    Y, info = (_tsne if method == "tsne" else _umap)(X.astype(np.float32), dims, settings)
    if progress:
        progress(1.0, "done")
    if key is not None:
        with _PROJECTION_LOCK:
            _PROJECTION_CACHE[key] = (Y, info)
            while len(_PROJECTION_CACHE) > 32:
                _PROJECTION_CACHE.popitem(last=False)
    return Y, {**info, "cached": False}


def _tsne(X: np.ndarray, dims: int, settings: Settings) -> tuple[np.ndarray, dict]:
    from sklearn.manifold import TSNE

    n = len(X)
    most = max(1.0, (n - 1) / 3)                             # must stay well below n; 5-50 is the usual range
    perplexity = float(min(settings.perplexity or 30.0, most))
    perplexity = max(perplexity, min(2.0, most))
    tsne = TSNE(n_components=dims, perplexity=perplexity, init="pca", random_state=settings.seed, metric="cosine",
                learning_rate="auto", max_iter=500 if n > 1000 else 1000)
    Y = tsne.fit_transform(X).astype(np.float32)
    return Y, {"method": "tsne", "seed": settings.seed, "perplexity": round(perplexity, 4),
               "kl_divergence": round(float(tsne.kl_divergence_), 4), "metric": "cosine"}


def _umap(X: np.ndarray, dims: int, settings: Settings) -> tuple[np.ndarray, dict]:
    n = len(X)
    if n < 6:
        raise RuntimeError(f"UMAP needs at least 6 points (it builds a neighbour graph), not {n}; use PCA")
    k = int(min(max(settings.n_neighbors or 15, 2), n - 1))
    cfg = UMAPConfig(n_neighbors=k, n_components=dims, min_dist=min(max(settings.min_dist, 0.0), 1.0),
                     seed=settings.seed)
    Y = umap(X, cfg).astype(np.float32)
    return Y, {"method": "umap", "seed": settings.seed, "n_neighbors": k, "min_dist": cfg.min_dist,
               "metric": "cosine"}
