"""Models built on PyTorch's meta device: shapes without memory or random numbers, for weights that come from a file
(SmolLM2) or are drawn next from a generator of their own (nets/recurrent.py's `seeded`)."""

from __future__ import annotations

import torch
import torch.nn as nn


def embedding(num_embeddings: int, embedding_dim: int, **kwargs) -> nn.Embedding:
    """nn.Embedding, drawn from N(0, 1) as usual, or, built on the meta device, not drawn at all. There torch draws
    the table in Python (torch._refs.normal_), and its first draw imports torch._dynamo and sympy: 66 MB and about 800
    modules in the compute process that loads SmolLM2, for numbers that are replaced at once."""
    if torch.empty(0).is_meta:
        return nn.Embedding(num_embeddings, embedding_dim, _weight=torch.empty(num_embeddings, embedding_dim), **kwargs)
    return nn.Embedding(num_embeddings, embedding_dim, **kwargs)
