"""Where a token is, for the Attention tab's positional views: the sinusoidal encoding of Vaswani et al. 2017,
MiniLM's learned positions beside it, and the two schemes that put position into the scores instead: RoPE
(Su et al. 2021, as nets/llama.py applies it) and ALiBi (Press et al. 2022). Numpy arrays and the endpoint's JSON."""

from __future__ import annotations

import numpy as np
import torch

from playground.nets import llama


def sinusoidal_pe(n_positions: int, d_model: int) -> np.ndarray:
    """PE (n_positions, d_model) of Vaswani et al. 2017 (§3.5): PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),
    PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)). Each pair of dimensions is a clock at its own
    frequency, so PE[pos + k] is a rotation of PE[pos] that depends on k only."""
    assert d_model % 2 == 0, f"d_model must be even, not {d_model}"
    pos = np.arange(n_positions)[:, None]                       # (n, 1)
    two_i = np.arange(0, d_model, 2)[None, :]                   # (1, d/2)
    angle = pos / np.power(10_000.0, two_i / d_model)           # (n, d/2)
    pe = np.empty((n_positions, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def cosine_matrix(X: np.ndarray) -> np.ndarray:
    """(n, d) -> (n, n) cosine similarities between the rows."""
    unit = X / np.linalg.norm(X, axis=1, keepdims=True).clip(min=1e-12)
    return unit @ unit.T


def rope_scores(n: int, d: int, theta: float = 10_000.0, seed: int = 0) -> tuple[np.ndarray, float]:
    """RoPE (Su et al. 2021) as Llama applies it (nets/llama.py): one query q and one key k (random, seeded), rotated
    to every position, and their scores S[m, n] = <R_m q, R_n k> (n, n). Since R_m^T R_n = R_{n-m}, S depends on
    m and n only through n − m: constant along every diagonal. Returns S and its largest deviation from that."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 1, 1, d, generator=g), torch.randn(1, 1, 1, d, generator=g)
    cos, sin = llama.rope_angles(torch.arange(n), d, theta)                      # (n, d)
    rq, rk = llama.rotate(q.expand(1, 1, n, d), cos, sin), llama.rotate(k.expand(1, 1, n, d), cos, sin)
    scores = (rq @ rk.transpose(-2, -1))[0, 0].double().numpy()                  # (n, n)
    deviation = max(float(np.ptp(np.diagonal(scores, offset))) for offset in range(-n + 1, n))
    return scores, deviation


def alibi(n: int, n_heads: int = 8) -> tuple[list[float], np.ndarray]:
    """ALiBi (Press et al. 2022): no position vectors at all; head h adds −m_h (i − j) to the score of query i for
    key j ≤ i, with slopes m_h = 2^(−8h/H). Returns the slopes and head 1's penalties (n, n), NaN above the
    diagonal (the causal mask)."""
    slopes = [2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return slopes, np.where(j <= i, -slopes[0] * (i - j), np.nan)


def positional(minilm, n: int, d: int) -> tuple[dict, dict[str, np.ndarray]]:
    """The sinusoidal PE (n, d), its dot products between positions (n, n), the cosines between MiniLM's first n
    learned position vectors (n, n): trained, not computed; then the two schemes that put position into the scores
    instead of the input: RoPE's scores between positions (`rope_scores`) and ALiBi's penalties (`alibi`). Returns
    the `positional_encoding` endpoint's JSON and the arrays."""
    pe = sinusoidal_pe(n, d)
    dots = pe @ pe.T                                                                  # (n, n)
    learned = cosine_matrix(minilm.model.embeddings.pos.weight[:n].detach().numpy())  # (n, n)
    rope, deviation = rope_scores(n, d)
    slopes, penalty = alibi(n)
    data = {"n_positions": n, "d_model": d, "pe": np.round(pe, 4).tolist(), "dot_products": np.round(dots, 3).tolist(),
            "minilm_position_cosine": np.round(learned, 3).tolist(),
            "rope": {"theta": 10_000.0, "scores": np.round(rope, 3).tolist(),
                     "max_deviation_along_diagonals": deviation},
            "alibi": {"slopes": slopes, "head_1_penalty": [[None if np.isnan(v) else round(float(v), 4) for v in row]
                                                           for row in penalty]}}
    return data, {"pe": pe, "dot_products": dots, "learned": learned, "rope": rope, "alibi": penalty}
