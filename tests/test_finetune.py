"""playground/training/finetune.py and nets/adapters.py: LoRA, SFT and DPO on our GPT (and SmolLM2 where it is
installed, as in CI): the losses by hand, the frozen reference, exactness at step 0 and after merging, the loss
mask, stopping, and the shipped runs."""

import math
import threading

import pytest
import torch

from playground import checkpoints
from playground.analysis import models
from playground.nets import adapters, lora
from playground.nets.llama import half_linear
from playground.training import finetune as ft
from playground.training import finetune_data as fd
from tests.tiers import slow_where


def tiny(method: str, **overrides) -> ft.FinetuneConfig:
    return ft.FinetuneConfig(method=method, steps=3, batch_size=2, max_new_tokens=8, **overrides)


def start(cfg: ft.FinetuneConfig) -> ft.Run:
    """A run on the registry's copy of its base, as the Fine-tuning tab starts one."""
    return ft.start(cfg, models.get(cfg.base))


def live(cfg: ft.FinetuneConfig):
    return ft.live(cfg, None, lambda: models.get(cfg.base))


needs_smollm2 = pytest.mark.skipif(models.resolve(models.SMOLLM2) is None,
                                   reason="SmolLM2 is not installed (the README's commands install it)")


def fingerprint(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_dpo_loss_equals_a_hand_computation():
    pi_w, pi_l = torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -1.0])
    ref_w, ref_l = torch.tensor([-1.5, -2.0]), torch.tensor([-1.5, -2.0])
    loss, terms = fd.dpo_loss(pi_w, pi_l, ref_w, ref_l, beta=0.5)
    # pair 1: 0.5 * ((-1 + 1.5) - (-2 + 1.5)) = 0.5; pair 2: 0.5 * ((-3 + 2) - (-1 + 2)) = -1
    by_hand = (math.log1p(math.exp(-0.5)) + math.log1p(math.exp(1.0))) / 2
    assert loss.item() == pytest.approx(by_hand, abs=1e-6)
    assert terms["margin"] == pytest.approx((0.5 - 1.0) / 2)
    assert terms["chosen_reward"] == pytest.approx((0.25 - 0.5) / 2)
    assert terms["accuracy"] == 0.5
    even, _ = fd.dpo_loss(pi_w, pi_l, pi_w, pi_l, beta=0.1)      # the policy is the reference: ln 2
    assert even.item() == pytest.approx(math.log(2))


def test_token_kl_is_zero_for_the_same_model_and_positive_otherwise():
    logits = torch.randn(2, 5, 7, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([[fd.IGNORE, 1, 2, 3, fd.IGNORE], [fd.IGNORE, fd.IGNORE, 4, 5, 6]])
    assert fd.token_kl(logits, logits, labels) == pytest.approx(0.0, abs=1e-7)
    other = logits.clone()
    other[0, 0] += 5                                              # a masked position: not counted
    assert fd.token_kl(logits, other, labels) == pytest.approx(0.0, abs=1e-7)
    other[1, 3] += torch.arange(7.0)
    assert fd.token_kl(logits, other, labels) > 0


def test_sft_masks_every_prompt_token():
    fmt = fd.text_format(models.get(adapters.GPT))
    prompt, answer = fmt.encode(fmt.prompt("What do bees make?")), fmt.encode(fmt.answer("Good friend, honey."))
    ids, labels = fd.example(fmt, "What do bees make?", "Good friend, honey.")
    assert ids == (prompt + answer)[:-1]
    assert labels[:len(prompt) - 1] == [fd.IGNORE] * (len(prompt) - 1)      # every prompt token predicted: masked
    assert labels[len(prompt) - 1:] == answer                                 # every answer token: a target
    mask = ft.mask_view(fmt, tiny("sft"))
    first = fd.pairs()[0]
    n_answer = len(fmt.encode(fmt.answer(first["response"])))
    assert sum(mask["in_loss"]) == n_answer and not any(mask["in_loss"][:len(mask["in_loss"]) - n_answer])
    assert "".join(mask["tokens"]) == f"Q: {first['instruction']}\nA: {first['response']}\n"


def test_response_logps_sum_only_the_answer():
    logits = torch.randn(1, 4, 5, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([[fd.IGNORE, fd.IGNORE, 2, 4]])
    logp = torch.log_softmax(logits, -1)
    assert fd.response_logps(logits, labels).item() == pytest.approx((logp[0, 2, 2] + logp[0, 3, 4]).item(), abs=1e-6)


@pytest.mark.parametrize("method", ft.METHODS)
def test_a_run_starts_exact_trains_and_merges_exactly_without_touching_the_base(method):
    base = models.get(adapters.GPT).model
    before = fingerprint(base)
    result = ft.execute(start(tiny(method)))
    assert result["step0_max_abs_diff"] == 0.0                    # B = 0: the adapted model is the base
    # W + (α/r) B A gives the same logits, up to fp32 rounding of two summation orders (1.1e-5 on an AMX VM's kernels)
    assert result["merged_max_abs_diff"] < 5e-5
    assert [s["step"] for s in result["steps"]] == [1, 2, 3] and not result["stopped"]
    assert all(math.isfinite(s["loss"]) for s in result["steps"])
    assert len(result["before"]) == len(result["after"]) >= 1
    assert result["held_out"]["protocol"] and "loss" in result["held_out"]
    after = fingerprint(base)
    assert all(torch.equal(before[k], after[k]) for k in before)  # the reference never changes
    if method == "dpo":
        first = result["steps"][0]
        assert first["loss"] == pytest.approx(math.log(2), abs=1e-5)     # π = π_ref at the first step
        assert first["kl"] == pytest.approx(0.0, abs=1e-6)
        assert first["chosen_logp"] == pytest.approx(first["chosen_ref_logp"], abs=1e-4)


def test_counts_follow_the_lecture_formula():
    run = start(tiny("lora", targets="c_attn,attn.c_proj", rank=4))
    counts = lora.count_parameters(run.model)
    table = lora.adapter_table(run.model)
    n_layer, C = run.base.config.n_layer, run.base.config.n_embd
    assert len(table) == 2 * n_layer
    assert counts["trainable"] == sum(m["params"] for m in table) == n_layer * 4 * ((3 * C + C) + (C + C))
    assert counts["total"] == sum(p.numel() for p in run.base.parameters()) + counts["trainable"]


def test_same_seed_same_run_and_the_global_generator_untouched():
    state = torch.random.get_rng_state()
    a = ft.execute(start(tiny("lora", seed=3)))
    b = ft.execute(start(tiny("lora", seed=3)))
    assert [s["loss"] for s in a["steps"]] == [s["loss"] for s in b["steps"]] and a["after"] == b["after"]
    assert torch.equal(torch.random.get_rng_state(), state)
    c = ft.execute(start(tiny("lora", seed=4)))
    assert [s["loss"] for s in c["steps"]] != [s["loss"] for s in a["steps"]]


def test_lora_never_trains_on_its_held_out_tail():
    fmt = fd.text_format(models.get(adapters.GPT))
    text = fd.default_text()
    train, tail = ft.split_text(fmt, text)
    assert train + tail == fmt.encode(text) and len(tail) == max(2, int(len(train + tail) * ft.HELD_OUT_SHARE))
    run = start(tiny("lora"))
    step = ft.text_steps(run, text)
    seen = []
    real = run.model.forward
    run.model.forward = lambda x, *a, **k: (seen.append(x), real(x, *a, **k))[1]
    step(0)
    for window in seen[0]:
        _find(train, window.tolist())                          # every window lies in the training part


def _find(haystack: list[int], needle: list[int]) -> int:
    for s in range(len(haystack) - len(needle) + 1):
        if haystack[s:s + len(needle)] == needle:
            return s
    raise AssertionError("a training window is not inside the training part")


def test_closing_a_live_run_stops_its_training():
    stream = live(ft.FinetuneConfig(method="lora", steps=10_000, batch_size=2))
    seen = []
    while len(seen) < 3:
        item = next(stream)
        seen += [item] if "step" in item else []                  # the phases before the first step are said too
    assert [item["step"]["step"] for item in seen] == [1, 2, 3]
    stream.close()                                                 # what Gradio does when the user presses Stop
    assert not any(t.name == "finetune" for t in threading.enumerate())


def test_a_finished_live_run_yields_its_steps_then_the_result():
    """...and says what it does before its first step and after its last (issue #32: SFT on SmolLM2 sat at 'step 16
    of 16' for 20 s while it wrote its texts and evaluated, with nothing said)."""
    items = list(live(tiny("sft")))
    assert [i["step"]["step"] for i in items if "step" in i] == [1, 2, 3] and items[-1]["result"]["method"] == "sft"
    said = [i.get("phase") or ("step" if "step" in i else "result") for i in items]
    assert said == ["loading", "before", "step", "step", "step", "after", "held_out", "merge", "result"]
    assert set(ft.PHASES) == {p for p in said if p not in ("step", "result")}


def test_half_stored_frozen_matrix_gives_the_fp32_gradient():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 5, generator=g).half()
    x = torch.randn(3, 4, 5, generator=g, requires_grad=True)
    x32 = x.detach().clone().requires_grad_(True)
    half_linear(x, w).pow(2).sum().backward()
    torch.nn.functional.linear(x32, w.float()).pow(2).sum().backward()
    torch.testing.assert_close(x.grad, x32.grad)


def test_targets_by_role_name_real_matrices():
    for base in adapters.BASES:
        assert adapters.targets_for(base, "qv") == adapters.DEFAULT_TARGETS[base]
        assert adapters.targets_for(base, "all").startswith(adapters.ATTENTION[base])
    with pytest.raises(AssertionError, match="targets"):
        adapters.targets_for(adapters.GPT, "everything")


@pytest.mark.parametrize("name", slow_where(["lora-gpt-shakespeare", "sft-smollm2", "dpo-smollm2"],
                                            lambda name: "smollm2" in name))
def test_shipped_runs_load_differ_from_the_base_and_are_small(name):
    if name != "lora-gpt-shakespeare" and models.resolve(models.SMOLLM2) is None:
        pytest.skip("SmolLM2 is not installed (the README's commands install it)")
    ckpt = checkpoints.load(name)
    base = models.get(ckpt.config.base)  # the adapters sit on the registry's copy of their base
    result = ckpt.card["result"]
    assert result["steps"] and result["before"] and result["after"]
    assert all(f.stat().st_size <= 10 * 2**20 for f in ckpt.path.iterdir())
    ids = torch.tensor([ft.probe(fd.text_format(base), ft.FinetuneConfig(
        method=ckpt.config.method, base=ckpt.config.base), fd.default_text())])
    with torch.no_grad():
        assert not torch.allclose(ckpt.model(ids)[0], base.model(ids)[0])


@pytest.mark.slow  # SmolLM2
@needs_smollm2
def test_smollm2_sft_runs_and_learns_the_answer_format():
    result = ft.execute(start(ft.FinetuneConfig(method="sft", base=adapters.SMOLLM2, steps=2, batch_size=2,
                                                max_new_tokens=4)))
    assert result["step0_max_abs_diff"] == 0.0 and result["merged_max_abs_diff"] < 1e-3
    assert result["counts"]["trainable"] == 30 * 8 * ((576 + 576) + (576 + 192))   # W_q and W_v of 30 layers
    assert sum(result["mask"]["in_loss"]) < len(result["mask"]["tokens"]) / 2      # the chat prompt is masked
