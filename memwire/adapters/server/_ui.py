"""``/memwire/ui``: the page an operator keeps open, served by the proxy (docs/page.md). Server-
rendered HTML with inline style and a few lines of inline script (editing a text in place); every
form also works without the script; nothing comes from another origin (a Content-Security-Policy
says so). Forms post and the page is drawn again. What it draws is in ``_ui_page``.

- ``/memwire/ui?ns=NAME``: a header of live figures (request records), the namespace's memories
  with their source, dates, injections, stability and where a captured one was said; search
  (``q``, each hit with the words it matched) and filters (``tag``, ``source``, ``fading``); add,
  edit in place (``add(new, replaces=old)``), pin, forget; the capture inbox (approve, reject, edit
  then approve) and the pairs that may contradict each other (keep newer / older / both).
- ``/memwire/ui/memories/ID``: a memory's history; ``/memwire/ui/archive``: the archive, searched,
  with restore.
- ``/memwire/ui/sessions?ns=NAME``: the recent sessions of that namespace from the proxy's request
  records (start, client, mode, requests, turns, cached share); ``/memwire/ui/sessions/ID``: per
  request, the memories injected (their text as it is now), the earlier blocks replayed, the
  tokens, the provider's cached share, and that share as a chart over the session.

Access: with a proxy key or a keys file the page asks for a key once and keeps it in an HttpOnly,
SameSite=Strict cookie; ``memwire proxy`` serves the page on a non-loopback bind only with a key.
A client key of the keys file opens its own namespace (and its sub-namespaces, ``?ns=NAME.SUB``),
nothing else (403); the proxy key opens any. Every form post
must come from the page itself (its ``Origin`` is the proxy's own), so another site open in the
same browser cannot post to it. Namespaces are validated; a namespace's page shows only its store
and its own sessions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from ..._charts import share_chart
from ..._errors import InvalidMemoryError, MemoryNotFoundError, MemwireError, NamespaceError
from ...memory._inbox import added, approve, inbox_of, is_merge, log_event, read_log, reject, replaced
from ...memory._lifecycle import CUES, Meta
from ...memory._model import Memory
from ...memory._protocol import Store
from ...memory._store import cue_of, validate_namespace
from ...memory._supersede import conflicts, history, resolve
from ...middleware._core import Middleware
from ...middleware._records import Record, session_records
from ...policies._secrets import find_secret
from .._common import Failures, error_id, public_message
from ._keys import Access, Caller
from ._limits import NamespaceQuota, read_all
from ._refusal import Refusal, refusal_response
from ._ui_page import (
    HEADERS,
    MemoryView,
    figures,
    figures_header,
    matched_words,
    memory_row,
    page_html,
    said,
    share,
    when,
)

__all__ = ["UI_PREFIX", "ui_routes"]

log = logging.getLogger("memwire")

UI_PREFIX = "/memwire/ui"
COOKIE = "memwire_key"
SHOWN = 200  # memories listed at most (search to find the others)
MAX_FORM_BYTES = 64 * 1024
REFRESH_S = 15.0  # the header's figures are fetched again this often while the page is shown

_CAPTURED = ("captured", "captured-for-review")  # capture log events that wrote or proposed a memory


# complexity over 15: the count sums the page's handlers, nested here as closures over the
# middleware; each handler is short
def ui_routes(  # noqa: C901
    middleware: Middleware, proxy_key: str | None = None, *, access: Access | None = None,
    quota: NamespaceQuota | None = None,
) -> list[BaseRoute]:
    """The page's routes, mounted at ``UI_PREFIX``. ``access``: the proxy's keys (default:
    ``proxy_key`` alone); ``quota``: the proxy's namespace caps, for adds to a new namespace."""
    access = access if access is not None else Access(proxy_key)
    tenants = access.keys is not None
    failures = Failures("memory page")

    def caller(request: Request) -> Caller | None:
        """Who holds the page's key (None: ask for one)."""
        try:
            return access.caller(request.cookies.get(COOKIE) or request.headers.get("x-memwire-key"))
        except Refusal as exc:
            if exc.status == 401:
                return None
            raise

    def same_origin(request: Request) -> None:
        """A form post must come from this page: browsers send ``Origin`` with every POST."""
        origin, host = request.headers.get("origin"), request.headers.get("host", "")
        if origin is None or origin.split("://", 1)[-1] != host:
            raise Refusal(403, "this form must be sent from the memwire page itself")

    def namespace(request: Request, who: Caller) -> str | None:
        # a client key's own namespace when ?ns= is not given; another tenant's: 403
        ns = access.namespace(who, request.query_params.get("ns") or None)
        if ns in (None, "default"):
            return None
        try:
            return validate_namespace(ns)
        except NamespaceError as exc:
            raise Refusal(400, public_message(exc)) from None

    def page(handler: Callable[..., Response], write: bool = False, creates: bool = False) -> Callable[[Request], Any]:
        """``creates``: the handler may start a namespace (the quota's to admit)."""
        async def endpoint(request: Request) -> Response:
            try:
                who = caller(request)
                if who is None:
                    return _login(request, failed=False, tenants=tenants)
                if write:
                    same_origin(request)
                ns = namespace(request, who)
                if creates and quota is not None and ns is not None:
                    try:  # a cap reached: a 429 Refusal
                        await run_in_threadpool(
                            quota.admit, ns, who.budget(request.client.host if request.client else None))
                    except NamespaceError as exc:  # the name of another namespace but for its case
                        raise Refusal(400, public_message(exc)) from None
                form = await _form(request, middleware.config.proxy_body_timeout) if write else {}
                response = await run_in_threadpool(handler, request, ns, form)
                failures.ok()
                return response
            except Refusal as exc:
                return refusal_response(exc, "page")
            except (OSError, MemwireError) as exc:  # the store cannot be used: its details go to the log only
                eid = failures.failed(exc)
                return page_html("memwire: unavailable", f'<p class="error">The memory store cannot be used now '
                                 f"(error {escape(eid)}; the proxy's log has the details).</p>", 503)
            except Exception as exc:  # a bug: one line, and a page, never a server's path
                eid = error_id()
                log.error("memwire: memory page: %s %s failed: unexpected %s [error %s]", request.method,
                          request.url.path, type(exc).__name__, eid)
                log.debug("memwire: memory page: error %s", eid, exc_info=exc)
                return page_html("memwire: error", f'<p class="error">memwire failed on this request (error '
                                 f"{escape(eid)}; the proxy's log has the details).</p>", 500)
        return endpoint

    async def login(request: Request) -> Response:
        try:
            given = (await _form(request, middleware.config.proxy_body_timeout)).get("key", "")
        except Refusal as exc:
            return refusal_response(exc, "page")
        try:
            known = access.guarded and bool(given) and access.caller(given) is not None
        except Refusal:
            known = False
        if not known:
            return _login(request, failed=True, tenants=tenants)
        resp = RedirectResponse(UI_PREFIX, status_code=303)
        resp.set_cookie(COOKIE, given, httponly=True, samesite="strict", path=UI_PREFIX)
        return resp

    def store(ns: str | None) -> Store:
        return middleware.store_for(ns)

    def header(s: Store, ns: str | None, records: list[Record], pairs: list[tuple[Memory, Memory]] | None = None
               ) -> str:
        captures = sum(e.get("event") in _CAPTURED for e in read_log(s))
        pairs = conflicts(s) if pairs is None else pairs
        return figures_header(figures(records), len(s), len(inbox_of(s)), captures, len(pairs),
                              _url("/figures", ns), REFRESH_S)

    def live(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s = store(ns)
        return HTMLResponse(header(s, ns, session_records(s, middleware.records, ns)), headers=HEADERS)

    def memories(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s, params = store(ns), request.query_params
        q, tag, cue, fading = (params.get(k, "").strip() for k in ("q", "tag", "source", "fading"))
        hits = s.search(q, SHOWN, min_score=0.0) if q else None
        found = [h.memory for h in hits] if hits is not None else s.memories()
        records = session_records(s, middleware.records, ns)
        total, tags = len(s), sorted({t for m in found for t in m.tags})
        found = [m for m in found if not tag or tag in m.tags]
        # the facts (lifecycle, capture log) of the memories shown only, unless a filter needs them all
        views = _views(s, found if cue or fading else found[:SHOWN + 1], records, q)
        views = [v for v in views if (not cue or v.cue == cue)
                 and (not fading or (not v.memory.pinned and v.state not in (None, "active")))]
        shown = views[:SHOWN]
        clear = f' <a href="{_url("", ns)}">clear</a>' if q or tag or cue or fading else ""
        what = " ".join(x for x in (f"matching {q!r}" if q else "", f"tagged #{tag}" if tag else "",
                                    f"from {cue}" if cue else "", "fading" if fading else "") if x)
        pairs = conflicts(s)  # the header counts them, the list below shows them: one look (it costs)
        body = (_nav(ns, "memories") + header(s, ns, records, pairs) +
                f'<form method="get" action="{UI_PREFIX}" class="bar" id="search" role="search">'
                f'<input type="hidden" name="ns" value="{escape(ns or "")}">'
                f'<input type="search" name="q" value="{escape(q)}" placeholder="search the memories" '
                f'aria-label="search the memories">'
                + _select("tag", "any tag", tags, tag) + _select("source", "any source", CUES, cue) +
                f'<label><input type="checkbox" name="fading" value="1"{" checked" if fading else ""}> fading</label>'
                f" <button>search</button>{clear}"
                f"</form>"
                f'<form method="post" action="{_url("/memories", ns)}" id="add" class="bar">'
                f'<input type="text" class="grow" name="text" placeholder="a new memory, one statement" '
                f'aria-label="a new memory" required>'
                f' <input type="text" name="tags" placeholder="tags, comma-separated" size="18" aria-label="tags">'
                f' <label><input type="checkbox" name="pinned" value="1"> pinned</label>'
                f' <button class="primary">add</button></form>'
                f'<p class="note" id="count">{len(shown)} of {total} memories{" " + escape(what) if what else ""}'
                f'{" (search to see the others)" if len(views) > SHOWN else ""}. Click a text (or Enter on it) '
                f"to edit it in place; Escape cancels.</p>"
                f'<table id="memories" class="cards"><thead><tr><th>memory</th><th class="n">actions</th></tr></thead>'
                f'<tbody>{"".join(memory_row(v, ns) for v in shown)}</tbody></table>')
        if inbox := inbox_of(s).memories():
            body += ('<h2 id="inbox-title">Captured, waiting for review</h2><table id="inbox" class="cards"><tbody>'
                     + "".join(_inbox_row(m, _capture_events(s).get(m.id), ns) for m in inbox) + "</tbody></table>")
        if pairs:  # issue 33: only the newer of each is injected until a person decides
            body += ('<h2>May contradict each other</h2><table id="conflicts" class="cards"><tbody>'
                     + "".join(_conflict_row(new, old, ns) for new, old in pairs) + "</tbody></table>")
        return page_html(f"memwire: {ns or 'default'}", body)

    def add(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        text = _text(form, "added")
        tags = [t.strip() for t in str(form.get("tags", "")).split(",") if t.strip()]
        try:
            store(ns).add(text, tags=tags, pinned=bool(form.get("pinned")))
        except InvalidMemoryError as exc:
            raise Refusal(400, public_message(exc)) from None
        return _back(ns)

    def edit(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        s, mid = store(ns), request.path_params["mid"]
        text = _text(form, "changed")
        old = _get(s, mid)
        if text != old.text:
            try:  # the old text goes to the archive, linked to the new one (its history)
                s.add(text, tags=old.tags, pinned=old.pinned, topic=old.topic, replaces=old.id)
            except InvalidMemoryError as exc:
                raise Refusal(400, public_message(exc)) from None
        return _back(ns)

    def forget(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s = store(ns)
        s.forget(_get(s, request.path_params["mid"]).id)
        return _back(ns)

    def pin(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        s = store(ns)
        s.pin(_get(s, request.path_params["mid"]).id, form.get("pinned") == "1")
        return _back(ns)

    def review(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        s, mid, verdict = store(ns), request.path_params["mid"], request.path_params["verdict"]
        if verdict not in ("approve", "reject", "edit"):
            raise Refusal(404, f"no such review action: {verdict}")
        try:
            if verdict == "edit":  # approve with the reviewer's words: one action
                found = inbox_of(s).get(mid)
                text = _text(form, "approved")
                if text != found.text and is_merge(found):
                    raise Refusal(400, "a merge is approved or rejected as proposed; edit the memory kept after")
                if text == found.text:
                    approve(s, [found.id])
                else:
                    try:
                        mem = added(s, found, text)  # what it replaces, if anything, is replaced all the same
                    except InvalidMemoryError as exc:
                        raise Refusal(400, public_message(exc)) from None
                    inbox_of(s).forget(found.id, reason=None)
                    log_event(s, "approved", mem, {"edited": True})
            else:
                (approve if verdict == "approve" else reject)(s, [mid])
        except MemoryNotFoundError as exc:
            raise Refusal(404, public_message(exc)) from None
        return _back(ns)

    def keep(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        s = store(ns)  # this one stays; the other goes to the archive as superseded, or both stay
        resolve(s, _get(s, request.path_params["mid"]).id, both=form.get("both") == "1")
        return _back(ns)

    def one(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s, mid = store(ns), request.path_params["mid"]
        try:
            steps = history(s, mid)
        except MemoryNotFoundError as exc:
            raise Refusal(404, public_message(exc)) from None
        rows = "".join(
            f'<tr data-id="{st.memory.id}" data-state="{escape(st.state)}"><td>'
            + (f"<s>{escape(st.memory.text)}</s>" if st.state != "current" else escape(st.memory.text))
            + f'</td><td>{escape(st.state)}</td><td>{escape(st.since[:16].replace("T", " "))}</td>'
            f'<td>{escape((st.until or "")[:16].replace("T", " ") or "now")}</td></tr>' for st in steps)
        body = (_nav(ns, "") + "<h2>History of a memory</h2>"
                '<p class="note">Each value it held, oldest first: when it was known, until when it held, and '
                "what became of it.</p>"
                '<table id="history" class="cards"><thead><tr><th>value</th><th>state</th><th>since</th>'
                f"<th>until</th></tr></thead><tbody>{rows}</tbody></table>")
        return page_html("memwire: history", body)

    def archive(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s = store(ns)
        q = request.query_params.get("q", "").strip()
        arch = s.archive
        found = [h.memory for h in arch.search(q, SHOWN, min_score=0.0)] if q else arch.memories()[-SHOWN:][::-1]
        rows = "".join(
            f'<tr data-id="{m.id}"><td>{escape(m.text)}<span class="meta">'
            + "".join(f'<span class="tag">#{escape(t)}</span>' for t in m.tags)
            + f'{" · " + escape(m.date) if m.date else ""}</span></td><td class="actions">'
            f'<a href="{_url(f"/memories/{m.id}", ns)}">history</a> '
            f'<form method="post" class="inline" action="{_url(f"/archive/{m.id}/restore", ns)}">'
            f"<button>restore</button></form></td></tr>" for m in found)
        body = (_nav(ns, "archive") +
                f'<form method="get" action="{UI_PREFIX}/archive" class="bar" role="search">'
                f'<input type="hidden" name="ns" value="{escape(ns or "")}">'
                f'<input type="search" name="q" value="{escape(q)}" placeholder="search the archive" '
                f'aria-label="search the archive"> <button>search</button></form>'
                f'<p class="note">{len(found)} of {len(arch)} archived (forgotten, superseded, rejected, merged, '
                "decayed: each tagged with why). Restoring brings one back as it was.</p>"
                f'<table id="archive" class="cards"><tbody>{rows}</tbody></table>')
        return page_html("memwire: archive", body)

    def restore(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s = store(ns)
        try:
            s.restore(request.path_params["mid"])
        except MemoryNotFoundError as exc:
            raise Refusal(404, public_message(exc)) from None
        return RedirectResponse(_url("/archive", ns), status_code=303)

    def sessions(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s = store(ns)
        records = session_records(s, middleware.records, ns)
        by: dict[str, list[Record]] = {}
        for r in records:
            if r.session:
                by.setdefault(r.session, []).append(r)
        rows = "".join(_session_row(sid, rs, ns) for sid, rs in sorted(by.items(), key=lambda kv: -kv[1][-1].at))
        body = (_nav(ns, "sessions") + header(s, ns, records) +
                '<table id="sessions" class="cards"><thead><tr><th>session</th><th>started</th><th>client</th>'
                '<th>mode</th><th class="n">requests</th><th class="n">turns</th><th class="n">memories / turn</th>'
                f'<th class="n">cached</th></tr></thead><tbody>{rows}</tbody></table>'
                '<p class="note">The requests served lately, by every worker and replica on this store '
                "(the newest in its request log). A turn is a request that chose its memories; a tool loop's "
                "further requests reuse its block.</p>")
        return page_html("memwire: sessions", body)

    def session(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        sid = request.path_params["sid"]
        rs = session_records(store(ns), middleware.records, ns, sid)
        known = {m.id: m for m in store(ns).known({i for r in rs for i in r.memory_ids})}
        seen: set[str] = set()
        rows: list[str] = []
        blocks: list[tuple[int, int]] = []  # (turn, request #) of the earlier turns that had a block
        turn = 0
        for i, r in enumerate(rs):
            turn += not r.reused
            rows.append(
                f'<tr id="req-{i + 1}"><td class="n" data-label="#">{i + 1}</td><td data-label="at">{when(r.at)}</td>'
                f'<td data-label="mode">{escape(r.mode or "none")} · turn {turn}{" (reused)" if r.reused else ""}</td>'
                f'<td data-label="injected">{_injected(r, known, seen, ns)}</td>'
                f'<td data-label="replayed">{_replayed(r, [b for b in blocks if b[0] != turn])}</td>'
                f'<td class="n" data-label="block tokens">{r.block_tokens}</td>'
                f'<td class="n" data-label="prompt tokens">{_tokens(r.prompt_tokens)}</td>'
                f'<td class="n" data-label="cached">{_share([r])}</td>'
                f'<td class="n" data-label="ms added">{r.added_ms:.1f}</td></tr>')
            if not r.reused:
                seen.update(r.memory_ids)
                if r.memory_ids:
                    blocks.append((turn, i + 1))
        series = [(r.prompt_tokens, r.cached_tokens or 0) for r in rs if r.prompt_tokens is not None]
        f = figures(rs)
        facts = (f'<p class="note" id="session-facts">started {when(rs[0].at) if rs else "-"} · '
                 f'client {escape(_client(rs))} · {f.requests} requests · {f.turns} turns · '
                 f"cached {share(f.cached_share)} · saved {f.saved:,.0f} cost units</p>")
        body = (_nav(ns, "sessions") + f"<h2>Session <code>{escape(sid)}</code></h2>" + facts +
                f"<figure>{share_chart(series, sid)}</figure>"
                '<table id="requests" class="cards"><thead><tr><th class="n">#</th><th>at</th><th>mode</th>'
                '<th>memories injected (new this turn; the others were in an earlier block)</th>'
                '<th class="n">earlier blocks replayed</th><th class="n">block tokens</th>'
                '<th class="n">prompt tokens</th><th class="n">cached</th><th class="n">ms added</th></tr></thead>'
                f'<tbody>{"".join(rows)}</tbody></table>')
        return page_html(f"memwire: session {sid}", body)

    routes = [
        Route("/login", login, methods=["POST"]),
        Route("/memories", page(add, write=True, creates=True), methods=["POST"]),
        Route("/memories/{mid}/edit", page(edit, write=True), methods=["POST"]),
        Route("/memories/{mid}/forget", page(forget, write=True), methods=["POST"]),
        Route("/memories/{mid}/pin", page(pin, write=True), methods=["POST"]),
        Route("/memories/{mid}/keep", page(keep, write=True), methods=["POST"]),
        Route("/memories/{mid}", page(one), methods=["GET"]),
        Route("/inbox/{mid}/{verdict:str}", page(review, write=True), methods=["POST"]),
        Route("/archive", page(archive), methods=["GET"]),
        Route("/archive/{mid}/restore", page(restore, write=True), methods=["POST"]),
        Route("/figures", page(live), methods=["GET"]),
        Route("/sessions", page(sessions), methods=["GET"]),
        Route("/sessions/{sid:path}", page(session), methods=["GET"]),
    ]
    return [Route(UI_PREFIX, page(memories), methods=["GET"]), Mount(UI_PREFIX, routes=routes)]


async def _form(request: Request, timeout: float) -> dict[str, str]:
    """A form post's fields (``application/x-www-form-urlencoded``, what the page's forms send),
    read under the proxy's body time limit and at most ``MAX_FORM_BYTES``."""
    raw = await read_all(request, timeout, MAX_FORM_BYTES)
    return {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}


def _text(form: dict[str, str], done: str) -> str:
    """The memory text of a form; one that looks like it holds a secret is refused, as everywhere."""
    text = form.get("text", "").strip()
    if (secret := find_secret(text)) is not None:
        raise Refusal(400, f"not {done}: the text looks like it holds a secret ({secret})")
    return text


def _get(s: Store, mid: str) -> Memory:
    try:
        return s.get(mid)
    except MemoryNotFoundError as exc:
        raise Refusal(404, public_message(exc)) from None


def _url(path: str, ns: str | None) -> str:
    return UI_PREFIX + path + (("?" + urlencode({"ns": ns})) if ns else "")


def _back(ns: str | None) -> Response:
    return RedirectResponse(_url("", ns), status_code=303)


def _share(rs: list[Record]) -> str:
    return share(figures(rs).cached_share)


def _replayed(r: Record, blocks: list[tuple[int, int]]) -> str:
    """The earlier blocks a request put back (``blocks``: the session's earlier turns that had one,
    as (turn, request #)). The record counts them; when the count is all of them (replay without a
    compaction or a dropped message) they are those turns, linked to their requests; else the count."""
    if not r.replayed:
        return "0"
    if r.replayed != len(blocks):
        return f"{r.replayed}"
    return f"{r.replayed}: " + ", ".join(f'<a href="#req-{req}">turn {t}</a>' for t, req in blocks)


def _tokens(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _client(rs: list[Record]) -> str:
    names = list(dict.fromkeys(r.client for r in rs if r.client))
    return ", ".join(names) or "-"


def _select(name: str, anyone: str, options: Iterable[str], chosen: str) -> str:
    return (f'<select name="{name}" aria-label="{escape(anyone)}"><option value="">{escape(anyone)}</option>'
            + "".join(f'<option{" selected" if o == chosen else ""}>{escape(o)}</option>' for o in options)
            + "</select>")


def _capture_events(s: Store) -> dict[str, dict[str, Any]]:
    """Per memory id, the capture event that wrote or proposed it (kind, session, turn, time)."""
    out: dict[str, dict[str, Any]] = {}
    for e in read_log(s):
        if e.get("event") in _CAPTURED and isinstance(e.get("id"), str):
            out[e["id"]] = {k: e.get(k) for k in ("kind", "session", "turn", "at")}
    return out


def _views(s: Store, mems: list[Memory], records: list[Record], q: str) -> list[MemoryView]:
    """What the page tells of each memory: its lifecycle record (source, created, injected,
    stability), its capture, when a request last injected it, and with a search what it matched."""
    metas: list[Meta | None] = list(s.lifecycle.get_many(mems)) if s.track and mems else [None] * len(mems)
    scoring = s.lifecycle.scoring if s.track else None
    now = time.time()
    captured = _capture_events(s)
    last: dict[str, float] = {}
    turns: dict[str, int] = {}
    for r in records:
        for mid in r.memory_ids:
            last[mid] = max(last.get(mid, 0.0), r.at)
            turns[mid] = turns.get(mid, 0) + (not r.reused)
    out = []
    for m, meta in zip(mems, metas, strict=True):
        stab = scoring.stability(m, meta, now) if scoring is not None and meta is not None else None
        out.append(MemoryView(
            m, meta, stab, scoring.state(stab) if scoring is not None and stab is not None else None,
            meta.cue if meta is not None and meta.recorded else cue_of(m), captured.get(m.id),
            matched_words(q, m) if q else None, last.get(m.id), turns.get(m.id, 0)))
    return out


def _session_row(sid: str, rs: list[Record], ns: str | None) -> str:
    f = figures(rs)
    return (f'<tr data-session="{escape(sid)}"><td><a href="{_url("/sessions/" + quote(sid, safe=""), ns)}">'
            f'<code>{escape(sid)}</code></a></td><td data-label="started">{when(rs[0].at)}</td>'
            f'<td data-label="client">{escape(_client(rs))}</td>'
            f'<td data-label="mode">{escape(rs[-1].mode or "none")}</td>'
            f'<td class="n" data-label="requests">{f.requests}</td><td class="n" data-label="turns">{f.turns}</td>'
            f'<td class="n" data-label="memories / turn">{"-" if f.per_turn is None else f"{f.per_turn:.1f}"}</td>'
            f'<td class="n" data-label="cached">{share(f.cached_share)}</td></tr>')


def _injected(r: Record, known: dict[str, Memory], seen: set[str], ns: str | None) -> str:
    """A request's block as its memories now read (a gone one by its id); those an earlier turn of
    the session already injected are marked, a reused block says so."""
    if not r.memory_ids:
        return f'<span class="note">{escape(r.skipped or "none")}</span>'
    out = []
    for i in r.memory_ids:
        text = escape(known[i].text) if i in known else f'<span class="note">{escape(i[:10])} (gone)</span>'
        link = f'<a href="{_url(f"/memories/{i}", ns)}" data-memory="{i}">{text}</a>'
        out.append(link + (' <span class="note">(earlier)</span>' if i in seen and not r.reused else ""))
    return "<br>".join(out)


def _conflict_row(new: Memory, old: Memory, ns: str | None) -> str:
    def keep(m: Memory, label: str, both: bool = False) -> str:
        return (f'<form method="post" class="inline" action="{_url(f"/memories/{m.id}/keep", ns)}">'
                f'<input type="hidden" name="both" value="{"1" if both else "0"}"><button>{label}</button></form> ')
    return (f'<tr data-id="{new.id}" data-older="{old.id}"><td>{escape(new.text)}<br>'
            f'<s>{escape(old.text)}</s></td>'
            f'<td class="actions">{keep(new, "keep newer")}{keep(old, "keep older")}'
            f'{keep(new, "keep both", True)}</td></tr>')


def _inbox_row(m: Memory, captured: dict[str, Any] | None, ns: str | None) -> str:
    why = f'<span class="meta">said {said(captured, ns)}</span>' if captured else ""
    if (old := replaced(m)) is not None:  # approving it supersedes that memory: its history page
        href = escape(_url(f"/memories/{old}", ns))
        why += f' <span class="meta">replaces <a href="{href}">{escape(old[:8])}</a></span>'
    return (f'<tr data-id="{m.id}"><td><span class="mtext" tabindex="0" role="button" '
            'title="click or Enter: edit, then approve" '
            f'data-edit="{escape(_url(f"/inbox/{m.id}/edit", ns))}">{escape(m.text)}</span>{why}</td>'
            '<td class="actions">'
            + "".join(f'<form method="post" class="inline" action="{_url(f"/inbox/{m.id}/{v}", ns)}">'
                      f"<button>{v}</button></form> " for v in ("approve", "reject")) + "</td></tr>")


def _nav(ns: str | None, here: str) -> str:
    links = "".join(f'<a href="{_url(path, ns)}"{" aria-current=page" if name == here else ""}>{name}</a>'
                    for name, path in (("memories", ""), ("sessions", "/sessions"), ("archive", "/archive")))
    return (f'<header><h1>memwire <span class="note">namespace {escape(ns or "default")}</span></h1>'
            f"<nav>{links}</nav></header>")


def _login(request: Request, failed: bool, tenants: bool = False) -> HTMLResponse:
    which = "the proxy key or your client key" if tenants else "the proxy key"
    wrong = f'<p class="error">That is not {which}.</p>' if failed else ""
    return page_html("memwire: key", f"<h1>memwire</h1>{wrong}<form method=\"post\" action=\"{UI_PREFIX}/login\">"
                     f'<input type="password" name="key" placeholder="{which}" aria-label="{which}" required autofocus>'
                     f" <button>open</button></form>", 401)
