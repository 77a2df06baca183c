"""Follow me: a room's lecturer publishes the view they are on, and the pages of the students who follow apply it.

The view is the app's own link: the query string a page's address carries (tab, sentence, every control a tab
registers: playground/ui/view.py), so a followed view is restored by the same code that restores a link, and
nothing here knows what is in it. Each room keeps one view and a version, which goes up by one whenever the view
changes (the same view published again changes nothing), so a follower's poll asks "anything after version v?" and
a poll of an unchanged room is one read of one row, no write.

The lecturer is present while their page keeps publishing: every publication or heartbeat sets `lead_at`, and a
heartbeat within LEAD_FRESH_SECONDS of the last is not written. An empty view means the lecturer stopped leading.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

from playground import polls
from playground.rooms.database import RoomError, database

MAX_VIEW_CHARS = 8_000           # a link: a 2,000-character sentence (view.MAX_TEXT) percent-encoded, and the rest
PRESENT_SECONDS = 20.0           # a lecturer not heard from for this long is no longer leading
LEAD_FRESH_SECONDS = 5.0         # a heartbeat sooner than this after the last is not written


def normalise_view(view) -> str:
    """A view as the lecturer's page or an API caller gives it ("?tab=attention&layer=2", "tab=...", or a whole
    link to the app) as one canonical query string: the same view is always the same string."""
    if view is None:
        return ""
    if not isinstance(view, str):
        raise RoomError(f"A view is the query string of a link to the app, not {type(view).__name__}.")
    view = view.strip()
    if len(view) > MAX_VIEW_CHARS:
        raise RoomError(f"This view's link is {len(view):,} characters; a followed view has at most "
                        f"{MAX_VIEW_CHARS:,}.")
    if "://" in view:
        view = urlsplit(view).query
    return urlencode(parse_qsl(view.lstrip("?"), keep_blank_values=True))


def _present(view: str, lead_at: float, now: float) -> bool:
    return bool(view) and lead_at >= now - PRESENT_SECONDS


def lead(code, key, view, path: Path | str | None = None, now: float | None = None) -> dict:
    """The room's lecturer (its key) publishes `view` ('' stops leading); returns {room, version, view,
    lecturer_present}. Refused without the key. A view equal to the published one keeps its version."""
    now = time.time() if now is None else now
    code, view = polls.normalise_code(code), normalise_view(view)
    db = database(path)
    with db.read() as tx:
        room_key, _, _ = polls.check_room(tx, code, now)
        if not polls.owner(key, room_key):
            raise RoomError(f"Only the page that opened room {code} can lead it: follow me needs the room's key.")
        old_view, version, lead_at = tx.one("SELECT view, view_version, lead_at FROM rooms WHERE code = ?", (code,))
    fresh = view == old_view and (not view or lead_at >= now - LEAD_FRESH_SECONDS)
    if not fresh:   # a change, or a heartbeat that is due: one UPDATE, atomic, the version counted in the database
        with db.write() as tx:
            tx.run("UPDATE rooms SET view_version = view_version + (CASE WHEN view = ? THEN 0 ELSE 1 END), "
                   "view = ?, lead_at = ? WHERE code = ?", (view, view, now if view else 0.0, code))
            version, lead_at = tx.one("SELECT view_version, lead_at FROM rooms WHERE code = ?", (code,))
    return {"room": code, "version": version, "view": view, "lecturer_present": _present(view, lead_at, now)}


def view(code, since_version=-1, path: Path | str | None = None, now: float | None = None) -> dict:
    """What a follower asks every second: {room, version, view, lecturer_present}, `view` None when the version is
    still `since_version` (nothing to apply; nothing sent again). One read; never a write."""
    now = time.time() if now is None else now
    code = polls.normalise_code(code)
    try:
        since = int(since_version)
    except (TypeError, ValueError):
        raise RoomError("since_version is the version number a follower last applied (-1 for none).") from None
    with database(path).read() as tx:
        polls.check_room(tx, code, now)
        view_, version, lead_at = tx.one("SELECT view, view_version, lead_at FROM rooms WHERE code = ?", (code,))
    return {"room": code, "version": version, "view": view_ if version != since else None,
            "lecturer_present": _present(view_, lead_at, now)}
