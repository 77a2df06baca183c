"""GloVe: global vectors from a word-word co-occurrence matrix (the model; training/glove.py trains it).

Written from the equations of Pennington, Socher & Manning 2014 ("GloVe: Global Vectors for Word
Representation", EMNLP). X_ij is how often word j occurs in the context of word i (summed over the
corpus, each occurrence weighted 1/d by its distance d, §4.2). Each word i has two vectors and two
biases: w_i and b_i as a "word", w̃_j and b̃_j as a "context". The model asks (eq. 7)

    w_i · w̃_j + b_i + b̃_j = log X_ij

and fits it by weighted least squares over the nonzero entries of X (eq. 8):

    J = Σ_{i,j: X_ij > 0} f(X_ij) (w_i · w̃_j + b_i + b̃_j − log X_ij)²

with the weighting function (eq. 9)

    f(x) = (x / x_max)^α  if x < x_max,  else 1        (x_max = 100, α = 3/4 in the paper)

so rare, noisy co-occurrences count little and frequent ones are not overweighted. X is symmetric,
so W and W̃ differ only by their random initialisation; the vectors shown are W + W̃ (§4.2: "we choose
to use the sum W + W̃ as our word vectors"). A shipped checkpoint stores only that sum
(`GloVeVectors`): the biases and the two separate matrices matter only while training.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn


# ---------------------------------------------------------------------------------------------
# The weighting function f (eq. 9)


def weighting(X: torch.Tensor, x_max: float, alpha: float) -> torch.Tensor:
    """f(X) = (X / x_max)^α, capped at 1 (eq. 9). f(0) = 0, so the absent pairs (log 0) never enter J."""
    return (X / x_max).pow(alpha).clamp(max=1.0)


# ---------------------------------------------------------------------------------------------
# The config and the model


@dataclass
class GloVeConfig:
    """The config.json of a GloVe checkpoint."""

    vocab_size: int = 20_001   # words + [UNK] (id 0, never counted); set from the corpus
    dim: int = 100             # vector width; 20k words x 100 in fp16 = 4 MB (only W + W̃ is stored)
    x_max: float = 100.0       # f's cutoff (eq. 9): counts at or above it get full weight (paper: 100 on 6B tokens)
    alpha: float = 0.75        # f's exponent (eq. 9): the paper found 3/4 better than linear (α = 1)
    window: int = 10           # context words on each side when X was counted (§4.2: symmetric, 10; recorded
                               # here because the vectors' meaning depends on it: wider windows are more semantic)

    def __post_init__(self):
        assert self.vocab_size >= 2 and self.dim >= 1, f"vocab_size={self.vocab_size} and dim={self.dim} too small"
        assert self.x_max > 0, f"x_max={self.x_max} must be positive"
        assert 0 < self.alpha <= 1, f"alpha={self.alpha} must lie in (0, 1] (f must not decrease, eq. 9's conditions)"
        assert self.window >= 1, f"window={self.window} must be at least 1"


class GloVe(nn.Module):
    """Weighted least squares on log co-occurrence counts (eq. 8), for a batch of nonzero entries (i, j):

        J = Σ_batch f(X_ij) (w_i · w̃_j + b_i + b̃_j − log X_ij)²

    W (V, d) word vectors w_i, W̃ (V, d) context vectors w̃_j, b and b̃ (V,) their biases.
    """

    def __init__(self, config: GloVeConfig):
        super().__init__()
        self.config = config
        V, d = config.vocab_size, config.dim
        self.W = nn.Parameter(torch.empty(V, d))         # w_i: the word vectors
        self.W_tilde = nn.Parameter(torch.empty(V, d))   # w̃_j: the context vectors
        self.b = nn.Parameter(torch.zeros(V))            # b_i
        self.b_tilde = nn.Parameter(torch.zeros(V))      # b̃_j
        # small random vectors (the paper does not say; uniform in ±0.5/d as our word2vec), biases at 0
        nn.init.uniform_(self.W, -0.5 / d, 0.5 / d)
        nn.init.uniform_(self.W_tilde, -0.5 / d, 0.5 / d)

    def residual(self, i: torch.Tensor, j: torch.Tensor, log_X: torch.Tensor) -> torch.Tensor:
        """(B,) w_i · w̃_j + b_i + b̃_j − log X_ij for rows i (B,), columns j (B,) and log X_ij (B,)."""
        # index_select rather than W[i]: the same rows, ~10x faster on a CPU for a large batch
        w_i, w_j = self.W.index_select(0, i), self.W_tilde.index_select(0, j)       # (B, d), (B, d)
        return (w_i * w_j).sum(-1) + self.b.index_select(0, i) + self.b_tilde.index_select(0, j) - log_X  # (B,)

    def forward(self, i: torch.Tensor, j: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """J over the batch (eq. 8): the weighted sum of squared residuals, for counts X_ij > 0 (B,)."""
        f = weighting(X, self.config.x_max, self.config.alpha)         # (B,)
        return (f * self.residual(i, j, torch.log(X)).pow(2)).sum()

    @torch.no_grad()
    def adagrad_step(self, i: torch.Tensor, j: torch.Tensor, X: torch.Tensor, lr: float,
                     G: dict[str, torch.Tensor], eps: float = 1e-8) -> float:
        """One AdaGrad step (Duchi et al. 2011; the paper's optimiser, §4.2) on a batch of nonzero entries,
        with the gradients of eq. 8 written out. With r = w_i · w̃_j + b_i + b̃_j − log X_ij and g = 2 f(X_ij) r:

            ∂J/∂w_i = g w̃_j,   ∂J/∂w̃_j = g w_i,   ∂J/∂b_i = ∂J/∂b̃_j = g

        Each entry is one stochastic sample of J, as in the paper ("stochastically sampling nonzero
        elements from X"): its step θ -= lr ∂/√G uses the squared-gradient sum G as it stood before the
        batch, the batch's steps are added up, and so are their squared gradients into G (what asynchronous
        threads doing one entry each would do, without the races). For a row the batch touches once this is
        exactly AdaGrad; for a row it touches k times the step is AdaGrad's on the summed gradient, and G
        grows by the k entries' squares. `G` holds one accumulator per parameter
        (`new_accumulators`). Returns the batch's J (before the update), summed over its entries."""
        f = weighting(X, self.config.x_max, self.config.alpha)         # (B,)
        w_i, w_j = self.W.index_select(0, i), self.W_tilde.index_select(0, j)       # (B, d), (B, d)
        r = (w_i * w_j).sum(-1) + self.b.index_select(0, i) + self.b_tilde.index_select(0, j) - torch.log(X)  # (B,)
        loss = float((f * r * r).sum())
        g = (2.0 * f * r).unsqueeze(-1)                                # (B, 1) ∂J/∂r per entry
        for name, rows, grad in (("W", i, g * w_j), ("W_tilde", j, g * w_i),      # (B, d) each
                                 ("b", i, g.squeeze(-1)), ("b_tilde", j, g.squeeze(-1))):  # (B,) each
            param, acc = getattr(self, name), G[name]
            step = grad * (acc.index_select(0, rows) + eps).pow(-0.5)  # the per-entry AdaGrad step g / √G
            acc.index_add_(0, rows, grad * grad)                       # G += g², per coordinate
            param.index_add_(0, rows, step, alpha=-lr)
        return loss

    def new_accumulators(self, initial: float = 1.0) -> dict[str, torch.Tensor]:
        """AdaGrad's running sums of squared gradients, one per parameter. Started at 1 rather than 0, so
        the first steps are at most plain SGD steps (with G = 0 the first step of each coordinate would be
        lr · sign(g), whatever the gradient's size); the paper does not say."""
        return {name: torch.full_like(p, initial) for name, p in self.named_parameters()}

    @torch.no_grad()
    def vectors(self) -> torch.Tensor:
        """(V, d) the word vectors W + W̃ (§4.2), float32."""
        return (self.W + self.W_tilde).detach().float()


class GloVeVectors(nn.Module):
    """What a GloVe checkpoint ships: the vectors W + W̃ alone (V, d), as the paper uses them; the
    biases and the separate W, W̃ are not needed once training is over (and would triple the file)."""

    def __init__(self, config: GloVeConfig):
        super().__init__()
        self.config = config
        self.weight = nn.Parameter(torch.zeros(config.vocab_size, config.dim), requires_grad=False)  # (V, d)

    @classmethod
    def from_glove(cls, model: GloVe) -> "GloVeVectors":
        out = cls(model.config)
        out.weight.copy_(model.vectors())
        return out

    @torch.no_grad()
    def vectors(self) -> torch.Tensor:
        """(V, d) W + W̃ as trained, float32 (a checkpoint stores them in fp16)."""
        return self.weight.detach().float()
