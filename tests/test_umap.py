"""playground/analysis/embeddings/umap.py: each step of UMAP against its definition, and the layout against
what a projection must do (keep neighbours, separate clusters, give the same picture for the same seed)."""

import numpy as np
import pytest
from sklearn.manifold import trustworthiness

from playground.analysis.embeddings import projection
from playground.analysis.embeddings.umap import (UMAPConfig, cosine_knn, find_ab_params, fuzzy_simplicial_set,
                                                 smooth_knn_dist, spectral_init, umap)


def clusters(n_per: int = 40, n_clusters: int = 3, dim: int = 20, seed: int = 0):
    """Points scattered around n_clusters random directions (cosine distance sees directions)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, dim)) * 4
    X = np.concatenate([c + rng.normal(size=(n_per, dim)) for c in centres])
    return X, np.repeat(np.arange(n_clusters), n_per)


def test_cosine_knn_equals_a_full_sort_and_puts_each_point_first():
    X, _ = clusters()
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    D = 1 - unit @ unit.T
    idx, dist = cosine_knn(X, 7, chunk=50)                    # chunks smaller than n: the seams are tested
    assert (idx[:, 0] == np.arange(len(X))).all() and (dist[:, 0] == 0).all()
    np.testing.assert_allclose(dist[:, 1:], np.sort(D, axis=1)[:, 1:7], atol=1e-9)
    np.testing.assert_allclose(np.take_along_axis(D, idx[:, 1:], 1), dist[:, 1:], atol=1e-9)


def test_each_local_scale_spreads_log2_k_of_membership():
    X, _ = clusters()
    _, dist = cosine_knn(X, 15)
    rho, sigma = smooth_knn_dist(dist)
    np.testing.assert_allclose(rho, dist[:, 1])                # no duplicates: the nearest other point
    psum = np.exp(-np.maximum(dist[:, 1:] - rho[:, None], 0) / sigma[:, None]).sum(1)
    np.testing.assert_allclose(psum, np.log2(15), atol=1e-4)


def test_fuzzy_union_is_symmetric_without_self_loops_and_within_0_1():
    X, _ = clusters()
    W = fuzzy_simplicial_set(*cosine_knn(X, 10)).toarray()
    np.testing.assert_allclose(W, W.T, atol=1e-12)
    assert (np.diag(W) == 0).all() and W.min() >= 0 and W.max() <= 1
    assert ((W > 0).sum(1) >= 9).all()                        # every point keeps its neighbours
    assert np.isclose(W.max(), 1.0)                           # the nearest neighbour has membership 1


def test_fuzzy_union_of_one_edge_is_a_plus_b_minus_ab():
    # 3 points, k = 2: i's one neighbour is j. A small explicit case against W = A + A^T - A*A^T.
    idx = np.array([[0, 1], [1, 0], [2, 1]])
    dist = np.array([[0, 0.2], [0, 0.2], [0, 0.5]])
    W = fuzzy_simplicial_set(idx, dist).toarray()
    assert W[0, 1] == W[1, 0] == pytest.approx(1.0)           # mutual nearest neighbours: 1 + 1 - 1
    assert W[2, 1] == W[1, 2] == pytest.approx(1.0)           # 2 -> 1 is 2's nearest (1); 1 -> 2 absent (0)
    assert W[0, 2] == 0


def test_closeness_curve_matches_the_papers_defaults():
    a, b = find_ab_params(spread=1.0, min_dist=0.1)
    assert a == pytest.approx(1.577, abs=0.01) and b == pytest.approx(0.895, abs=0.01)
    a_tight, _ = find_ab_params(spread=1.0, min_dist=0.0)
    assert a_tight > a                                        # points may pack closer: the curve falls faster


def test_spectral_start_is_the_laplacians_smallest_nontrivial_eigenvectors():
    X, _ = clusters(n_per=450, n_clusters=1)                  # 450 points: the sparse solver's path
    W = fuzzy_simplicial_set(*cosine_knn(X, 15))
    Y = spectral_init(W, 2)
    d = np.asarray(W.sum(1)).ravel()
    L = np.eye(len(X)) - W.toarray() / np.sqrt(np.outer(d, d))
    evals = np.sort(np.linalg.eigvalsh(L))
    rayleigh = np.einsum("ij,jk,ki->i", Y.T, L, Y) / (Y ** 2).sum(0)
    np.testing.assert_allclose(np.sort(rayleigh), evals[1:3], atol=1e-3)
    apart = fuzzy_simplicial_set(*cosine_knn(clusters()[0], 10))   # three far clusters: three parts
    assert spectral_init(apart, 2) is None                          # the layout starts from PCA instead


def test_layout_keeps_neighbours_and_separates_clusters():
    X, labels = clusters()
    Y = umap(X, UMAPConfig(n_neighbors=10, seed=0))
    assert Y.shape == (len(X), 2) and np.isfinite(Y).all()
    assert trustworthiness(X, Y, n_neighbors=5, metric="cosine") > 0.9
    d = ((Y[:, None] - Y[None]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    assert (labels[d.argmin(1)] == labels).mean() > 0.97        # each point's nearest point in its cluster


def test_same_seed_same_picture_other_seed_other_picture():
    X, _ = clusters(n_per=20)
    cfg = UMAPConfig(n_neighbors=8, n_components=3, n_epochs=100, seed=3)
    np.testing.assert_array_equal(umap(X, cfg), umap(X, cfg))
    other = umap(X, UMAPConfig(n_neighbors=8, n_components=3, n_epochs=100, seed=4))
    assert not np.allclose(umap(X, cfg), other)


def test_duplicates_and_a_graph_in_pieces_still_give_a_finite_layout():
    X, _ = clusters(n_per=10)
    X = np.concatenate([X, X[:5]])                            # exact duplicates: distance 0 beyond the point itself
    far = np.zeros((8, X.shape[1]))
    far[:, 0] = -100
    far[:, 1] = np.arange(8)                                   # a separate family: the graph has two parts
    Y = umap(np.concatenate([X, far]), UMAPConfig(n_neighbors=5, n_epochs=50))
    assert np.isfinite(Y).all()


def test_config_and_input_errors_say_what_is_wrong():
    with pytest.raises(AssertionError, match="n_neighbors"):
        UMAPConfig(n_neighbors=1)
    with pytest.raises(AssertionError, match="min_dist"):
        UMAPConfig(min_dist=2.0)
    with pytest.raises(AssertionError, match="more points"):
        umap(np.ones((5, 3)), UMAPConfig(n_neighbors=5))


def test_project_runs_umap_and_refuses_too_few_points():
    X, _ = clusters(n_per=10)
    Y, info = projection.project(X.astype(np.float32), "umap", 3)
    assert Y.shape == (30, 3) and info["method"] == "umap" and info["n_neighbors"] == 15
    with pytest.raises(RuntimeError, match="at least 6 points"):
        projection.project(X[:5], "umap", 2)


def test_projections_take_a_seed_and_their_parameters_within_what_the_points_allow():
    X, _ = clusters(n_per=10)
    X = X.astype(np.float32)
    one = projection.Settings(seed=1, n_neighbors=5, min_dist=0.3)
    Y1, info = projection.project(X, "umap", 2, settings=one)
    assert info["seed"] == 1 and info["n_neighbors"] == 5 and info["min_dist"] == 0.3
    np.testing.assert_array_equal(Y1, projection.project(X, "umap", 2, settings=one)[0])
    assert not np.allclose(Y1, projection.project(X, "umap", 2, settings=projection.Settings(seed=2, n_neighbors=5))[0])
    _, info = projection.project(X, "umap", 2, settings=projection.Settings(n_neighbors=500))
    assert info["n_neighbors"] == 29                                   # k < n
    T1, info = projection.project(X, "tsne", 2, settings=projection.Settings(seed=5, perplexity=500))
    assert info["perplexity"] == round(29 / 3, 4) and info["seed"] == 5        # below n / 3
    np.testing.assert_array_equal(T1, projection.project(X, "tsne", 2, settings=projection.Settings(seed=5))[0])
