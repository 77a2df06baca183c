"""The Generation tab through its API (gradio_client) and in a real browser (Chromium via
Playwright): the contract of `generate`, the rules for bad input, streaming, Stop, and a click on a
generated token showing its step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


MODEL = "gpt-shakespeare"


def call(client, prompt="ROMEO:", n=30, strategy="top-k", temperature=0.8, top_k=10, top_p=0.9, seed=0, beam=3):
    out = client.predict(prompt, MODEL, n, strategy, temperature, top_k, top_p, seed, beam, api_name="/generate")
    return out[-1]  # the last output is the data


def test_generate_api_follows_the_contract_and_reproduces(client):
    data = call(client)
    assert data["text"].startswith("ROMEO:") and len(data["steps"]) == 30
    assert data["text"] == "ROMEO:" + "".join(s["token"] for s in data["steps"])
    for s in data["steps"]:
        assert 0 < s["prob"] <= 1 and len(s["top"]) >= 10 and s["n_top_k"] == 10
        assert all(isinstance(tok, str) and 0 <= p <= 1 for tok, p in s["top"])
    assert call(client)["text"] == data["text"]                    # same seed, same text
    greedy = call(client, strategy="greedy")
    assert all(s["token"] == s["top"][0][0] for s in greedy["steps"])


def test_bad_input_gets_a_rule_not_a_crash(client):
    empty = call(client, prompt="", n=5)
    assert empty["prompt"] == "\n" and any("new line" in n for n in empty["notices"])
    odd = call(client, prompt="Héllo 👩‍💻", n=5)
    assert odd["prompt"] == "Hllo " and any("vocabulary" in n for n in odd["notices"])
    assert call(client, strategy="temperature", temperature=0, n=5)["temperature"] == 0
    assert call(client, strategy="top-p", top_p=0, n=5)["steps"][0]["n_top_p"] == 1
    with pytest.raises(Exception, match="maximum"):  # the slider's own bounds answer with a message
        call(client, strategy="top-p", top_p=7, n=5)
    assert call(client, strategy="top-k", top_k=80, n=5)["top_k"] < 80  # the vocabulary has fewer tokens
    clamped = call(client, n=-3)
    assert len(clamped["steps"]) == 1 and any("out of range" in n for n in clamped["notices"])


def test_beam_search_through_the_api(client):
    data = call(client, strategy="beam", n=12, beam=3)
    assert data["beam"]["log_prob"] >= data["beam"]["greedy_log_prob"] - 1e-3
    assert len(data["beam"]["beams"]) == 3 and len(data["steps"]) == 12


def test_compare_and_attention_apis(client):
    _, _, data = client.predict("To be, or not to be", MODEL, MODEL, 10, "greedy", 1.0, 10, 0.9, 0,
                                api_name="/compare_generate")
    result = data["models"][MODEL]
    assert result["prompt_perplexity"] > 1 and len(result["steps"]) == 10
    _, att = client.predict("First Citizen:", MODEL, 1, 1, api_name="/generation_attention")
    T = len(att["tokens"])
    assert T == 14 and len(att["attention"]) == T
    assert all(att["attention"][i][j] == 0 for i in range(T) for j in range(i + 1, T))


def test_streaming_stop_and_clicking_a_token(page, tmp_path):
    page.get_by_role("tab", name="Generation", exact=True).click()
    page.locator("#gen-max input[type=number]").fill("1000")
    page.locator("#gen-max input[type=number]").press("Enter")
    page.locator("#gen-run").click()
    lengths = []
    for _ in range(40):  # the text grows while it is generated
        page.wait_for_timeout(250)
        lengths.append(page.locator("#gen-text .gen-tok").count())
        if len(set(x for x in lengths if x)) >= 3:
            break
    assert len(set(x for x in lengths if x)) >= 3, lengths
    page.locator("#gen-stop").click()
    page.wait_for_timeout(1500)
    stopped = page.locator("#gen-text .gen-tok").count()
    page.wait_for_timeout(1500)
    assert page.locator("#gen-text .gen-tok").count() == stopped < 1000  # Stop stopped it
    page.locator("#gen-text .gen-tok").nth(2).click()
    page.wait_for_function("() => document.querySelector('#gen-chart')?.innerText.includes('Step 3:')",
                           timeout=20_000)
    shots = Path(os.environ.get("SCREENSHOT_DIR", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "generation.png"), full_page=True)
