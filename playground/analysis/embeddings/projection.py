"""Projections of word or sentence vectors to 2D or 3D: PCA (an SVD of the centred matrix), t-SNE (van der
Maaten & Hinton 2008, from scikit-learn), UMAP (McInnes et al. 2018, written out in `umap.py`).
t-SNE and UMAP results are cached (a cache of results, never of user state)."""

from __future__ import annotations

import threading
from collections import OrderedDict
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


def project(X: np.ndarray, method: str = "pca", dims: int = 2, seed: int = 0, cache_key: tuple | None = None,
            progress: Callable[[float, str], None] | None = None) -> tuple[np.ndarray, dict]:
    """(n, d) -> (n, dims) with PCA, t-SNE or UMAP. Returns the coordinates and what the method reports
    (explained variance for PCA; perplexity, KL divergence for t-SNE). With a cache_key, t-SNE and UMAP
    results are kept (the presets are computed once per process). UMAP on fewer than 6 points raises
    RuntimeError."""
    assert method in METHODS, f"method must be one of {METHODS}, not {method!r}"
    assert dims in (2, 3), f"dims must be 2 or 3, not {dims}"
    n = len(X)
    assert n >= 3, f"a projection needs at least 3 points, not {n}"
    if method == "pca":
        Y, ratio = pca(X, dims)
        return Y, {"method": "pca", "explained_variance_ratio": [round(float(r), 4) for r in ratio]}
    key = None if cache_key is None else (cache_key, method, dims, seed, n)
    if key is not None:
        with _PROJECTION_LOCK:
            if key in _PROJECTION_CACHE:
                _PROJECTION_CACHE.move_to_end(key)
                Y, info = _PROJECTION_CACHE[key]
                return Y, {**info, "cached": True}
    if progress:
        progress(0.1, f"{method} of {n} points")
    Y, info = (_tsne if method == "tsne" else _umap)(X.astype(np.float32), dims, seed)
    if progress:
        progress(1.0, "done")
    if key is not None:
        with _PROJECTION_LOCK:
            _PROJECTION_CACHE[key] = (Y, info)
            while len(_PROJECTION_CACHE) > 32:
                _PROJECTION_CACHE.popitem(last=False)
    return Y, {**info, "cached": False}


def _tsne(X: np.ndarray, dims: int, seed: int) -> tuple[np.ndarray, dict]:
    from sklearn.manifold import TSNE

    n = len(X)
    perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))   # must stay below n; 5-50 is the usual range
    tsne = TSNE(n_components=dims, perplexity=perplexity, init="pca", random_state=seed, metric="cosine",
                learning_rate="auto", max_iter=500 if n > 1000 else 1000)
    Y = tsne.fit_transform(X).astype(np.float32)
    return Y, {"method": "tsne", "perplexity": perplexity, "kl_divergence": round(float(tsne.kl_divergence_), 4),
               "metric": "cosine"}


def _umap(X: np.ndarray, dims: int, seed: int) -> tuple[np.ndarray, dict]:
    n = len(X)
    if n < 6:
        raise RuntimeError(f"UMAP needs at least 6 points (it builds a neighbour graph), not {n}; use PCA")
    cfg = UMAPConfig(n_neighbors=int(min(15, n - 1)), n_components=dims, seed=seed)
    Y = umap(X, cfg).astype(np.float32)
    return Y, {"method": "umap", "n_neighbors": cfg.n_neighbors, "min_dist": cfg.min_dist, "metric": "cosine"}
