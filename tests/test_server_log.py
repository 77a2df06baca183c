"""A refused call is one line of the server's log: Gradio prints a full traceback for every gr.Error unless told not
to, so a lecturer's log of a class was mostly tracebacks of students' typing. The app started as `python app.py`
starts it, its stderr read: a handler's refusal and a value gradio refuses before the handler (not among the
choices) each give one line naming the endpoint and the message, and no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SERVE = textwrap.dedent("""
    import socket, sys
    import app
    from gradio_client.exceptions import AppError
    from playground.tools.client import session

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.configure_process()
    app.demo.launch(**app.launch_settings(), server_name="127.0.0.1", server_port=port, prevent_thread_lock=True,
                    quiet=True)
    client = session(app.demo.local_url, timeout=None)
    for kwargs in ({"text": "Hello.", "model_key": "no-such-model", "api_name": "/attention"},   # the handler refuses
                   {"model": "no-such-model", "api_name": "/sft"}):                          # not among the choices
        try:
            client.predict(**kwargs)
        except AppError as err:
            print("REFUSED", kwargs["api_name"], flush=True)
    client.predict(text="Hello, world.", api_name="/tokenize")
    print("ANSWERED", flush=True)
    sys.stderr.flush()
    app.demo.close()
""")


@pytest.mark.process  # the app's own process
@pytest.mark.timeout(240)
def test_each_refused_call_is_one_line_of_the_servers_log_and_no_traceback():
    done = subprocess.run([sys.executable, "-c", SERVE], cwd=ROOT, capture_output=True, text=True, timeout=220,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "REFUSED /attention\nREFUSED /sft\nANSWERED" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("refused ")]
    assert len(lines) == 2, done.stderr[-3000:]
    assert lines[0].startswith("refused /attention: Unknown model 'no-such-model'")
    assert lines[1].startswith("refused /sft: ") and "no-such-model" in lines[1]


def test_a_refusal_is_logged_once_however_many_wrappers_see_it(caplog):
    import gradio as gr

    from playground.ui.common import checked

    def handler(text):
        raise gr.Error("Type a sentence first.\nThen press Enter.")

    twice = checked(checked(handler, [gr.Textbox()], "inner"), [gr.Textbox()], "outer")
    with caplog.at_level("WARNING", logger="playground.refused"), pytest.raises(gr.Error) as err:
        twice("")
    assert [r.getMessage() for r in caplog.records] == ["refused /inner: Type a sentence first. Then press Enter."]
    assert err.value.print_exception is False       # gradio prints no traceback for it
