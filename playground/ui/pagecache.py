"""The page and its scripts, built once and compressed: what every visitor's browser fetches first.

Gradio builds the page for each request: the whole config (every component, its painted initial value) is
copied, its root URL rewritten and embedded in the HTML, 2 MB written out uncompressed, about 60-80 ms of the
server a visitor. The page is the same for every visitor who comes through the same address, so this middleware
keeps Gradio's answer per root URL (the address, or a proxy's forwarded host and scheme, as Gradio computes it) and
per config (the painted defaults replace the config once, after start), gzip-compressed once, and sends those bytes:
200 students opening the link within ten seconds cost the server a dictionary lookup each. The page is built once
even for the visitors who come while it is being built: they wait for that build (without it, the first of 200
students opening at once each built their own, about 150 ms of the server apiece: page opens p95 10 s). A request
Gradio would answer otherwise (a deep link, a page of a multipage app, an error) passes through untouched.

The page then loads about 95 scripts and style sheets of Gradio's frontend (`/assets/`, names that carry a hash of
their content, and `/static/`), which Gradio serves from disk and Brotli-compresses again for every request, with no
caching headers, so every visitor asks for every file again. They are kept compressed too (Brotli and gzip, once
each), and sent with headers that let the browser keep them: a file under `/assets/` for a year (its name changes
with its content), the rest for an hour. Gradio's main bundle and the module that builds the page's tree are sent
with the app's fixes (ui/patches.fix_frontend), kept for an hour only: their names are the hashes of Gradio's
files, so a browser that kept them for a year would keep an older app's fixes through its upgrades.
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass
from urllib.parse import parse_qs

import brotli  # Gradio's own dependency (its BrotliMiddleware)
from gradio import route_utils
from starlette.requests import Request

from playground.lru import Bounded
from playground.ui.patches import fix_frontend

PAGES = 48 << 20  # the pages (one per address the app is reached through: ~2.5 MB each) and the frontend's files
IMMUTABLE = (b"cache-control", b"public, max-age=31536000, immutable")  # /assets/: a new content is a new name
HOUR = (b"cache-control", b"public, max-age=3600")


@dataclass(frozen=True)
class KeptPage:
    headers: tuple[tuple[bytes, bytes], ...]   # Gradio's, less its length and encoding
    plain: bytes
    gzipped: bytes
    brotli: bytes | None = None

    def __len__(self) -> int:
        return len(self.plain) + len(self.gzipped) + len(self.brotli or b"")

    def encoded(self, accepted: bytes) -> tuple[bytes, bytes | None]:
        """The body in the best encoding the client accepts, and its name."""
        if self.brotli is not None and b"br" in accepted:
            return self.brotli, b"br"
        if b"gzip" in accepted:
            return self.gzipped, b"gzip"
        return self.plain, None


class CachedPage:
    """ASGI middleware: `GET /` from the kept page, gzip-compressed for a client that accepts it. `blocks`: the
    served Blocks, whose config the page embeds."""

    def __init__(self, app, blocks):
        self.app = app
        self.blocks = blocks
        self.pages: Bounded[KeptPage] = Bounded(PAGES, size=len)
        self._building: dict[tuple, asyncio.Future] = {}  # key -> the page being built for it (KeptPage or None)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "GET":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if path == "/" and not _special(scope):
            key = ("page", _root(scope), id(self.blocks.config))  # the page embeds both
        elif path.startswith(("/assets/", "/static/")) and not scope.get("query_string"):
            key = ("file", path)
        else:
            return await self.app(scope, receive, send)
        page = self.pages.get(key)
        if page is None:
            building = self._building.get(key)
            if building is not None:  # another visitor's request is building it: its answer, once
                page = await asyncio.shield(building)
                if page is None:  # not a page to share: Gradio answers this request as it answered that one
                    return await self.app(scope, receive, send)
            else:
                building = self._building[key] = asyncio.get_running_loop().create_future()
                try:
                    page = await self._build(scope, receive, send, extra=() if key[0] == "page" else
                                             (IMMUTABLE if path.startswith("/assets/") else HOUR,))
                finally:
                    del self._building[key]
                    building.set_result(page)
                if page is None:
                    return
                self.pages.put(key, page)
        body, encoding = page.encoded(dict(scope["headers"]).get(b"accept-encoding", b""))
        headers = [*page.headers, (b"content-length", str(len(body)).encode()), (b"vary", b"accept-encoding")]
        if encoding:
            headers.append((b"content-encoding", encoding))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _build(self, scope, receive, send, extra: tuple = ()) -> KeptPage | None:
        """Gradio's answer to this request, asked uncompressed; sent through as it is unless it is a plain 200, which
        is returned, compressed, with the `extra` headers, for the caller to send."""
        scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"accept-encoding"]}
        start, body = {}, bytearray()

        async def capture(message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))

        await self.app(scope, receive, capture)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in (b"content-length",
                                                                                        b"content-encoding", b"vary",
                                                                                        b"cache-control")]
        if start.get("status") != 200 or any(k.lower() == b"set-cookie" for k, _ in headers):
            await send(start)  # not a page to share: as Gradio answered it
            await send({"type": "http.response.body", "body": bytes(body)})
            return None
        plain = fix_frontend(scope["path"], bytes(body))
        if plain != body and extra == (IMMUTABLE,):  # its name is the hash of Gradio's file, not of the one sent
            extra = (HOUR,)
        return KeptPage((*headers, *extra), plain, gzip.compress(plain, compresslevel=6, mtime=0),
                        brotli.compress(plain, quality=5) if len(plain) > 400 else None)


def _root(scope) -> str:
    """The root URL Gradio writes into this request's page (its own function, as its page route calls it)."""
    app = scope["app"]
    return route_utils.get_root_url(Request(scope), "/", getattr(app, "root_path", None) or scope.get("root_path"))


def _special(scope) -> bool:
    """A deep link or a page of a multipage app: Gradio builds those pages itself."""
    return bool({"deep_link", "page"} & set(parse_qs(scope.get("query_string", b"").decode("latin-1"))))
