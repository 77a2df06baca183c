"""The Inference tab's KV cache view (analysis/kv_cache.py, ui/inference_kv.py): every byte figure is the cache
tensors' nbytes, built here again with the model's own step; grouped-query attention's saving is SmolLM2's own shape;
the second turn reuses exactly the common prefix and computes what the whole conversation computes; our GPT's window
slides at n_positions; bad input gets a clear message."""

from __future__ import annotations

import gradio as gr
import pytest
import torch

from playground.analysis import kv_cache as kv
from playground.analysis import models
from playground.figures import inference_engine as fe

PROMPT = "The bank raised its interest rates again this spring, and savers were pleased."
ROMEO = "ROMEO:\nBut soft, what light through yonder window breaks?"


@pytest.fixture(scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def smol(one_thread):
    from tests.smollm2_reference import require_smollm2

    require_smollm2()
    return models.get(models.SMOLLM2)


@pytest.fixture(scope="module")
def gpt():
    return models.get("gpt-shakespeare")


@pytest.fixture(scope="module")
def smol_data(smol):
    return kv.measure(smol, PROMPT, True, "And why?", 6, [], chunk=64)


def cache_of(model, ids: list[int]) -> dict:
    """The model's own cache after reading `ids`, built here (one pass, as generation's prompt is read)."""
    with torch.inference_mode():
        return model.step(torch.tensor([ids]), None)[1]


def test_every_byte_figure_is_the_tensors_nbytes(smol, smol_data):
    data = smol_data
    ids = smol.tokenizer.encode(data["prompt"], add_special_tokens=False).ids
    assert len(ids) == data["prompt_tokens"]
    cache = cache_of(smol.model, ids)
    built = [k.nbytes + v.nbytes for k, v in cache["kv"]]
    assert data["bytes"] == sum(built) and [r["bytes"] for r in data["layers"]] == built
    c = smol.config   # the same from the config alone: layers × (k, v) × kv heads × head width × 4 bytes (fp32)
    assert data["bytes_per_token"] == c.n_layer * 2 * c.n_kv_head * c.head_dim * 4 == 46_080
    assert data["bytes_per_token_per_layer"] == 1_536
    # the cache as it grows: after t prompt tokens, the cache the model builds from those t tokens
    seen = dict(zip(data["growth"]["seen"], data["growth"]["bytes"]))
    for t in (1, len(ids) // 2):
        assert seen[t] == sum(k.nbytes + v.nbytes for k, v in cache_of(smol.model, ids[:t])["kv"])
    answer = data["answer_ids"]
    last = data["steps"][-1]
    assert last["bytes"] == sum(k.nbytes + v.nbytes for k, v in cache_of(smol.model, ids + answer)["kv"])
    assert data["window"]["engine_row"]["bytes"] == smol.model.row_cache(last["seen"]).nbytes


def test_gqa_s_saving_is_smollm2_s_own_shape(smol, smol_data):
    gqa, c = smol_data["gqa"], smol.config
    assert (c.n_head, c.n_kv_head) == (9, 3) and gqa["group"] == 3 and gqa["ratio"] == 3.0
    cache = cache_of(smol.model, smol.tokenizer.encode(smol_data["prompt"], add_special_tokens=False).ids)
    # what multi-head attention would keep: one kv head per query head, as the attention's own repeat builds them
    mha = sum(torch.repeat_interleave(k, 3, dim=1).nbytes + torch.repeat_interleave(v, 3, dim=1).nbytes
              for k, v in cache["kv"])
    assert gqa["mha_bytes"] == mha == 3 * gqa["bytes"]


def test_the_second_turn_reuses_the_common_prefix_and_computes_the_same(smol, smol_data):
    turn = smol_data["second_turn"]
    ids = smol.tokenizer.encode(smol_data["prompt"], add_special_tokens=False).ids
    said = smol_data["answer_ids"]
    assert not set(said) & {smol.card["eos_id"]}             # the answer has not ended its turn within 6 tokens
    conversation = smol.chat([{"role": "user", "content": PROMPT},
                              {"role": "assistant", "content": smol_data["answer"].strip()},
                              {"role": "user", "content": "And why?"}])
    second = smol.tokenizer.encode(conversation, add_special_tokens=False).ids
    common = next(i for i, (a, b) in enumerate(zip(ids + said + [-1], second)) if a != b)
    assert turn["tokens"] == len(second) and turn["reused"] == common and turn["computed"] == len(second) - common
    assert len(ids) < common <= len(ids) + len(said)        # the whole first turn's prompt, and some of the answer
    assert turn["bytes_reused"] == common * 46_080 and turn["bytes_after"] == len(second) * 46_080
    assert turn["same_next_token"] and turn["max_logit_diff"] < 0.05   # fp16 products of a few positions, fp32 of many
    assert turn["engine_chunk"] == 64 and turn["engine_reused"] == (min(len(ids), common) // 64) * 64


def test_a_step_with_the_cache_is_one_position_and_faster_than_the_whole_text(smol_data):
    steps, turn = smol_data["steps"], smol_data["second_turn"]
    assert [s["computed"] for s in steps] == [1] * len(steps) and not smol_data["window"]["slid_from"]
    median = sorted(s["ms_cached"] for s in steps)[len(steps) // 2]
    # one position against ~50 (measured: 31 ms against 330) and ~65
    assert median < smol_data["prompt_ms"] and median < turn["ms_full"]


def test_our_gpt_s_window_slides_at_n_positions(gpt):
    data = kv.measure(gpt, ROMEO, False, "Speak again.", 8, [])
    window, per_token = gpt.config.n_positions, data["bytes_per_token"]
    assert per_token == gpt.config.n_layer * 2 * gpt.config.n_embd * 4 and data["gqa"]["ratio"] == 1.0
    assert data["window"]["slid_from"] == window + 1
    for step in data["steps"]:
        held = min(step["seen"], window)
        assert step["positions"] == held and step["bytes"] == held * per_token
        assert step["computed"] == (window if step["seen"] > window else 1)
    slid = [s for s in data["steps"] if s["slid"]]
    assert len(slid) == kv.GPT_PAST and all(s["bytes"] == data["window"]["full_context_bytes"] for s in slid)
    # characters: the second turn is the text so far and the follow-up, so all of it is reused
    turn = data["second_turn"]
    assert turn["reused"] == data["prompt_tokens"] + 8 and turn["engine_chunk"] is None
    assert turn["max_logit_diff"] < 1e-4 and turn["same_next_token"]


def test_the_figures_and_their_text_come_from_the_same_data(smol_data):
    growth, times = fe.kv_growth_figure(smol_data), fe.kv_time_figure(smol_data)
    assert list(growth.data[0].x) == smol_data["growth"]["seen"]
    assert [round(y * 1e6) for y in growth.data[0].y] == smol_data["growth"]["bytes"]
    assert growth.data[1].name.startswith("multi-head") and len(times.data) == 3
    assert [p for p in zip(times.data[1].x, times.data[1].y)] == [
        (smol_data["prompt_tokens"], smol_data["prompt_ms"]),
        (smol_data["second_turn"]["tokens"], smol_data["second_turn"]["ms_full"])]
    text = fe.kv_markdown(smol_data)
    assert "**46,080 bytes a token**" in text and "**3× more**" in text and f"{smol_data['bytes']:,}" in text


def test_bad_input_gets_a_clear_message(gpt):
    from playground.ui.inference_kv import kv_cache

    with pytest.raises(gr.Error, match="Type a prompt"):
        kv_cache("   ", "gpt-shakespeare")
    with pytest.raises(gr.Error, match="Unknown model"):
        kv_cache("Hello", "bert-english")
    *_, data = kv_cache("ROMEO: " + "a" * 4_990, "gpt-shakespeare", False, "", 2)    # 5,000 characters
    assert any("2,000" in n for n in data["notices"]) and len(data["prompt"]) == kv.MAX_CHARS
    assert any("No second turn typed" in n for n in data["notices"])


def test_a_prompt_too_long_for_smollm2_is_cut_with_a_notice(smol):
    notices: list[str] = []
    user, p = kv.fit(smol, "The bank raised its rates. " * 60, True, notices)
    assert len(p.ids) <= kv.MAX_PROMPT + 2 and "reads at most 160" in notices[0]
    assert p.text.startswith("<|im_start|>system") and user in p.text   # the chat template kept, the text cut
