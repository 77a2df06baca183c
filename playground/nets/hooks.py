"""Hook points: named places in a forward pass where an experiment may read or replace an activation.

The idea is TransformerLens's (Nanda & Bloom 2022): an identity module at each site, so that torch's own
`register_forward_hook` on it sees the activation and may return a replacement. The transformers (nets/gpt.py,
llama.py, bert.py) put one at the same sites, under the same names, in every block:

    hook_resid_pre   the residual stream entering the block, (B, T, C)
    hook_z           each head's output before the output projection W^O, (B, T, n_head, d_head) (one head zeroed
                     is one slice of it)
    hook_attn_out    the attention sublayer's output, after W^O, (B, T, C)
    hook_resid_mid   the stream between the two sublayers (BERT: after its first LayerNorm), (B, T, C)
    hook_mlp_out     the feed-forward sublayer's output, (B, T, C)
    hook_resid_post  the stream leaving the block, (B, T, C)

A hook point holds no parameter and no buffer: state dicts, checkpoints and the transformers mapping are those of
the nets without them. When no hook is set it returns its input without going through `nn.Module.__call__` (one
attribute test), so training and generation pay nothing. torch's global module hooks
(`register_module_forward_hook`) are not honoured here; hooks are set on the hook point itself
(analysis/interventions.py does it, and always removes them).
"""

from __future__ import annotations

import torch
import torch.nn as nn

SITES = ("resid_pre", "z", "attn_out", "resid_mid", "mlp_out", "resid_post")  # each block's, in forward order


class HookPoint(nn.Module):
    """The identity, x -> x, as a module that forward hooks can be registered on."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self._forward_hooks or self._forward_pre_hooks:
            return super().__call__(x)
        return x                      # nobody is looking: no module call at all


def add_block_hooks(block: nn.Module) -> None:
    """The hook points every block has besides attention's `hook_z`, set on the block itself (so that their names
    read `transformer.h.3.hook_mlp_out`, as a block's other parts do)."""
    for site in ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post"):
        setattr(block, f"hook_{site}", HookPoint())
