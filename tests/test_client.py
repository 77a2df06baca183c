"""The tools' and tests' gradio_client sessions (playground/tools/client.py) build no TLS context per request."""

from __future__ import annotations

import ssl


def test_sessions_share_one_tls_context_and_answer(app_url, monkeypatch):
    """gradio_client opens an httpx client per request and httpx builds a TLS context for each unless it is given
    one: the sessions' calls build none once the first session has made the shared one."""
    from playground.tools.client import session

    first = session(app_url).predict("A Sentence, Twice.", ["lowercase"], api_name="/normalize")
    built, create = [], ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: built.append(a or k) or create(*a, **k))
    answers = [session(app_url, timeout=None).predict("A Sentence, Twice.", ["lowercase"], api_name="/normalize")
               for _ in range(2)]
    assert answers == [first, first] and "'twice'" in str(first[-1])   # lowercased by the step
    assert built == [], f"{len(built)} TLS contexts built for two sessions' calls"
