"""A gradio_client session of a served app, as the load tests, the bench's round trips and the tests open one."""

from __future__ import annotations

import functools
import ssl

import certifi

SETUP_TIMEOUT = 120  # seconds a new session may take to read the app's config when many start at once


def session(url: str, timeout: float | None = SETUP_TIMEOUT):
    """A gradio_client session; its setup waits up to `timeout` (None: httpx's 5 s, which ran out with 20 sessions
    starting at once on a loaded machine). Its requests share one TLS context (`_tls`)."""
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=_tls(), httpx_kwargs={} if timeout is None else {"timeout": timeout})


@functools.cache
def _tls() -> ssl.SSLContext:
    """gradio_client opens an httpx client for each call, stream and file, and httpx builds a TLS context for each
    from certifi's file, for plain HTTP too: a trivial call cost 62 ms of CPU, client and app in one process on the
    2-core VM, and 12 ms with one context; a load test's sessions share the app's cores. gradio_client passes it
    to httpx as `verify`."""
    return ssl.create_default_context(cafile=certifi.where())
