"""The Fine-tuning tab in a real browser (the same Chromium fixture as test_browser.py): the shipped runs at once,
a live LoRA run streamed to its end, a live run stopped by the user."""

from __future__ import annotations


def test_shipped_runs_are_shown_at_once(page):
    page.get_by_role("tab", name="Fine-tuning", exact=True).click()
    page.wait_for_selector("#ft-lora-plot .js-plotly-plot", timeout=30_000)
    assert "The shipped run, recorded by" in page.locator("#ft-lora-status").inner_text()
    assert page.locator("#ft-lora-texts td").count() >= 3                      # prompt, before, after
    page.get_by_role("tab", name="SFT", exact=True).click()
    page.wait_for_function("() => document.querySelector('#ft-sft-status')?.innerText.trim()", timeout=30_000)
    status = page.locator("#ft-sft-status").inner_text()
    if "No shipped run" not in status and "not installed" not in status:
        page.wait_for_selector("#ft-sft-mask .ft-loss", timeout=30_000)    # the loss mask: the response's tokens
        assert page.locator("#ft-sft-mask .ft-prompt").count() > page.locator("#ft-sft-mask .ft-loss").count()


def test_a_live_lora_run_streams_to_its_end_and_a_stopped_one_keeps_its_steps(page):
    page.get_by_role("tab", name="Fine-tuning", exact=True).click()
    page.get_by_role("tab", name="LoRA", exact=True).click()
    page.wait_for_selector("#ft-lora-plot .js-plotly-plot", timeout=30_000)
    page.locator("#ft-lora-run").click()
    # the shipped run's status leaves at once: nothing of it is shown as the live run's
    page.wait_for_function("() => !/shipped run/.test(document.querySelector('#ft-lora-status')?.innerText)",
                           timeout=30_000)
    page.wait_for_function("() => /Trained live: 60 steps/.test(document.querySelector('#ft-lora-status')?.innerText)",
                           timeout=120_000)
    status = page.locator("#ft-lora-status").inner_text()
    assert "24,576 trainable" in status and "1.964 for the base → 1.173" in status   # the shipped run's numbers
    assert "ROBOT" in page.locator("#ft-lora-texts").inner_text() or page.locator("#ft-lora-texts td").count() == 3

    steps = page.get_by_label("number input for Steps").first
    steps.fill("200")
    steps.press("Enter")
    page.locator("#ft-lora-run").click()
    page.wait_for_function("() => /Training: step [1-9]/.test(document.querySelector('#ft-lora-status')?.innerText)",
                           timeout=60_000)
    page.locator("#ft-lora-stop").click(timeout=60_000)
    page.traffic.settle()                                                  # the run's stream has ended
    status = page.locator("#ft-lora-status").inner_text()
    assert "Training: step" in status and "Trained live" not in status     # stopped: what was streamed stays
    assert page.locator("#ft-lora-plot .js-plotly-plot").count() == 1
    page.wait_for_timeout(3000)                                            # nothing trains on behind it
    assert page.locator("#ft-lora-status").inner_text() == status
