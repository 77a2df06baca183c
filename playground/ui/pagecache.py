"""The page, built once and compressed: what every visitor's `GET /` receives.

Gradio builds the page for each request: the whole config (every component, its painted initial value) is
copied, its root URL rewritten and embedded in the HTML, 2 MB written out uncompressed, about 60-80 ms of the
server a visitor. The page is the same for every visitor who comes through the same address, so this middleware
keeps Gradio's answer per root URL (the address, or a proxy's forwarded host and scheme, as Gradio computes it) and
per config (the painted defaults replace the config once, after start), gzip-compressed once, and sends those bytes:
200 students opening the link within ten seconds cost the server a dictionary lookup each. A request Gradio would
answer otherwise (a deep link, a page of a multipage app, an error) passes through untouched.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from urllib.parse import parse_qs

from gradio import route_utils
from starlette.requests import Request

from playground.lru import Bounded

PAGES = 8 << 20  # the pages kept (one per address the app is reached through: ~0.3 MB compressed each)


@dataclass(frozen=True)
class KeptPage:
    headers: tuple[tuple[bytes, bytes], ...]   # Gradio's, less its length and encoding
    plain: bytes
    gzipped: bytes

    def __len__(self) -> int:
        return len(self.plain) + len(self.gzipped)


class CachedPage:
    """ASGI middleware: `GET /` from the kept page, gzip-compressed for a client that accepts it."""

    def __init__(self, app):
        self.app = app
        self.pages: Bounded[KeptPage] = Bounded(PAGES, size=len)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] != "/" or _special(scope):
            return await self.app(scope, receive, send)
        blocks = scope["app"].get_blocks()
        key = (_root(scope), id(blocks.config))  # the page embeds both
        page = self.pages.get(key)
        if page is None:
            page = await self._build(scope, receive, send)
            if page is None:
                return
            self.pages.put(key, page)
        zipped = b"gzip" in dict(scope["headers"]).get(b"accept-encoding", b"")
        body = page.gzipped if zipped else page.plain
        headers = [*page.headers, (b"content-length", str(len(body)).encode()), (b"vary", b"accept-encoding")]
        if zipped:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _build(self, scope, receive, send) -> KeptPage | None:
        """Gradio's page for this request; sent through as it is and returned only when it is a plain 200."""
        start, body = {}, bytearray()

        async def capture(message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))

        await self.app(scope, receive, capture)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-length",
                                                                                        b"content-encoding")]
        if start.get("status") != 200 or any(k.lower() == b"set-cookie" for k, _ in headers):
            await send(start)  # not a page to share: as Gradio answered it
            await send({"type": "http.response.body", "body": bytes(body)})
            return None
        return KeptPage(tuple(headers), bytes(body), gzip.compress(bytes(body), compresslevel=6, mtime=0))


def _root(scope) -> str:
    """The root URL Gradio writes into this request's page (its own function, as its page route calls it)."""
    app = scope["app"]
    return route_utils.get_root_url(Request(scope), "/", getattr(app, "root_path", None) or scope.get("root_path"))


def _special(scope) -> bool:
    """A deep link or a page of a multipage app: Gradio builds those pages itself."""
    return bool({"deep_link", "page"} & set(parse_qs(scope.get("query_string", b"").decode("latin-1"))))
