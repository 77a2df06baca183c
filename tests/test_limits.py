"""Limits at the edge of the app: uploads (the app has no upload component) and numbers beyond a float."""

from __future__ import annotations

import httpx
import pytest

from playground.ui.common import as_int, as_number


def test_a_large_upload_is_refused_and_a_small_one_accepted(app_url):
    url = app_url + "gradio_api/upload"
    small = httpx.post(url, files={"files": ("a.txt", b"x" * 1_000)}, timeout=30)
    assert small.status_code == 200
    large = httpx.post(url, files={"files": ("big.bin", b"x" * 3_000_000)}, timeout=30)
    assert large.status_code >= 400 and large.status_code != 500, large.text[:200]


@pytest.mark.parametrize("value", [10**400, -(10**400), 10**5000, "1" * 500, "1e400", float("inf")],
                         ids=["1e400", "-1e400", "1e5000", "500 digits", "string 1e400", "inf"])
def test_numbers_beyond_a_float_are_clamped_with_a_short_notice(value):
    notices = []
    n = as_int(value, "Seed", 0, 100, notices)
    assert n in (0, 100) and len(notices) == 1 and len(notices[0]) < 120


def test_a_number_that_is_not_one_is_a_clear_error():
    import gradio as gr

    for bad in ("ten", None, [3], float("nan")):
        with pytest.raises(gr.Error):
            as_number(bad, "Seed")
