"""word2vec: skip-gram and CBOW with negative sampling (the model; training/word2vec.py trains it).

Written from the equations of Mikolov et al. 2013a ("Efficient Estimation of Word Representations in
Vector Space": the CBOW and skip-gram architectures) and 2013b ("Distributed Representations of Words
and Phrases and their Compositionality": negative sampling). Each word w has two vectors: v_w (input,
the embedding the app shows) and v'_w (output, used only by the training objective).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

ARCHITECTURES = ("skipgram", "cbow")


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
