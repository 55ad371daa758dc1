"""``/memwire/ui``: a page to look at and tend the memories of a namespace, and at what memwire did
in recent sessions, served by the proxy. Plain server-rendered HTML (no script, no CDN: it works
offline); forms post and the page is drawn again.

- ``/memwire/ui?ns=NAME&q=TEXT``: the namespace's memories (searched with ``q``), a form to add one,
  and per memory edit, pin and forget; the capture inbox (approve, reject) when it holds anything.
  Forgetting and editing keep the old text in the archive, as everywhere.
- ``/memwire/ui/sessions?ns=NAME``: the recent sessions of that namespace from the proxy's request
  records; ``/memwire/ui/sessions/ID?ns=NAME``: per request, the memories injected (their text as
  it is now), the tokens, the provider's cached share, and that share as a chart over the session.

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
from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from ..._charts import CHART_CSS, share_chart
from ..._errors import InvalidMemoryError, MemoryNotFoundError, MemwireError, NamespaceError
from ...memory._inbox import approve, inbox_of, reject
from ...memory._model import Memory
from ...memory._protocol import Store
from ...memory._store import validate_namespace
from ...memory._supersede import conflicts, resolve
from ...middleware._core import Middleware
from ...middleware._records import Record, session_records
from ...policies._secrets import find_secret
from .._common import Failures, error_id, public_message
from ._keys import Access, Caller, Denied
from ._limits import NamespaceQuota, Refusal, read_all

__all__ = ["UI_PREFIX", "ui_routes"]

log = logging.getLogger("memwire")

UI_PREFIX = "/memwire/ui"
COOKIE = "memwire_key"
SHOWN = 200  # memories listed at most (search to find the others)
MAX_FORM_BYTES = 64 * 1024

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5rem auto; max-width: 900px; color: #1d1d1f; padding: 0 1rem; }
nav a { margin-right: 1rem; }
table { border-collapse: collapse; width: 100%; margin: .8rem 0; }
th, td { padding: .3rem .4rem; text-align: left; border-bottom: 1px solid #ddd; vertical-align: top; }
td.n { text-align: right; white-space: nowrap; }
form.inline { display: inline; }
input[type=text], input[type=password] { padding: .25rem; }
input.wide { width: 60%; }
.tag { color: #555; font-size: 13px; }
.note { color: #555; font-size: 13px; }
.error { color: #b00020; font-weight: 600; }
code { font-size: 13px; }
""" + CHART_CSS


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def ui_routes(middleware: Middleware, proxy_key: str | None = None, *, access: Access | None = None,
              quota: NamespaceQuota | None = None) -> list[BaseRoute]:
    """The page's routes, mounted at ``UI_PREFIX``. ``access``: the proxy's keys (default:
    ``proxy_key`` alone); ``quota``: the proxy's namespace caps, for adds to a new namespace."""
    access = access if access is not None else Access(proxy_key)
    tenants = access.keys is not None
    failures = Failures("memory page")

    def caller(request: Request) -> Caller | None:
        """Who holds the page's key (None: ask for one)."""
        try:
            return access.caller(request.cookies.get(COOKIE) or request.headers.get("x-memwire-key"))
        except Denied as exc:
            if exc.status == 401:
                return None
            raise _Refused(exc.status, exc.message) from None

    def same_origin(request: Request) -> None:
        """A form post must come from this page: browsers send ``Origin`` with every POST."""
        origin, host = request.headers.get("origin"), request.headers.get("host", "")
        if origin is None or origin.split("://", 1)[-1] != host:
            raise _Refused(403, "this form must be sent from the memwire page itself")

    def namespace(request: Request, who: Caller) -> str | None:
        try:  # a client key's own namespace when ?ns= is not given; another tenant's: 403
            ns = access.namespace(who, request.query_params.get("ns") or None)
        except Denied as exc:
            raise _Refused(exc.status, exc.message) from None
        if ns in (None, "default"):
            return None
        try:
            return validate_namespace(ns)
        except NamespaceError as exc:
            raise _Refused(400, public_message(exc)) from None

    def page(handler: Callable[..., Any], write: bool = False, creates: bool = False) -> Callable[[Request], Any]:
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
                    try:
                        refused = await run_in_threadpool(
                            quota.admit, ns, who.budget(request.client.host if request.client else None))
                    except NamespaceError as exc:  # the name of another namespace but for its case
                        raise _Refused(400, public_message(exc)) from None
                    if refused:
                        raise _Refused(429, refused)
                form = await _form(request, middleware.config.proxy_body_timeout) if write else {}
                response = await run_in_threadpool(handler, request, ns, form)
                failures.ok()
                return response
            except _Refused as exc:
                return _html("memwire: refused", f'<p class="error">{escape(str(exc))}</p>', exc.status)
            except (OSError, MemwireError) as exc:  # the store cannot be used: its details go to the log only
                eid = failures.failed(exc)
                return _html("memwire: unavailable", f'<p class="error">The memory store cannot be used now (error '
                             f"{escape(eid)}; the proxy's log has the details).</p>", 503)
            except Exception as exc:  # a bug: one line, and a page, never a server's path
                eid = error_id()
                log.error("memwire: memory page: %s %s failed: unexpected %s [error %s]", request.method,
                          request.url.path, type(exc).__name__, eid)
                log.debug("memwire: memory page: error %s", eid, exc_info=exc)
                return _html("memwire: error", f'<p class="error">memwire failed on this request (error '
                             f"{escape(eid)}; the proxy's log has the details).</p>", 500)
        return endpoint

    async def login(request: Request) -> Response:
        try:
            given = (await _form(request, middleware.config.proxy_body_timeout)).get("key", "")
        except _Refused as exc:
            return _html("memwire: refused", f'<p class="error">{escape(str(exc))}</p>', exc.status)
        try:
            known = access.guarded and bool(given) and access.caller(given) is not None
        except Denied:
            known = False
        if not known:
            return _login(request, failed=True, tenants=tenants)
        resp = RedirectResponse(UI_PREFIX, status_code=303)
        resp.set_cookie(COOKIE, given, httponly=True, samesite="strict", path=UI_PREFIX)
        return resp

    def store(ns: str | None) -> Store:
        return middleware.store_for(ns)

    def memories(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        s, q = store(ns), request.query_params.get("q", "").strip()
        found = [h.memory for h in s.search(q, SHOWN, min_score=0.0)] if q else s.memories()[:SHOWN]
        total = len(s)
        rows = "".join(_memory_row(m, ns) for m in found)
        inbox = inbox_of(s).memories()
        body = (_nav(ns) +
                f'<form method="get" action="{UI_PREFIX}"><input type="hidden" name="ns" value="{escape(ns or "")}">'
                f'<input type="text" class="wide" name="q" value="{escape(q)}" placeholder="search the memories">'
                f' <button>search</button></form>'
                f'<form method="post" action="{_url("/memories", ns)}" id="add">'
                f'<input type="text" class="wide" name="text" placeholder="a new memory, one statement" required>'
                f' <input type="text" name="tags" placeholder="tags, comma-separated" size="18">'
                f' <label><input type="checkbox" name="pinned" value="1"> pinned</label> <button>add</button></form>'
                f'<p class="note">{len(found)} of {total} memories{" matching " + escape(repr(q)) if q else ""}'
                f'{" (search to see the others)" if not q and total > SHOWN else ""}.</p>'
                f'<table id="memories"><thead><tr><th>memory</th><th></th></tr></thead><tbody>{rows}</tbody></table>')
        if inbox:
            body += ("<h2>Captured, waiting for review</h2><table id=\"inbox\"><tbody>"
                     + "".join(_inbox_row(m, ns) for m in inbox) + "</tbody></table>")
        if pairs := conflicts(s):  # issue 33: only the newer of each is injected until a person decides
            body += ("<h2>May contradict each other</h2><table id=\"conflicts\"><tbody>"
                     + "".join(_conflict_row(new, old, ns) for new, old in pairs) + "</tbody></table>")
        return _html(f"memwire: {ns or 'default'}", body)

    def add(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        text = _text(form, "added")
        tags = [t.strip() for t in str(form.get("tags", "")).split(",") if t.strip()]
        try:
            store(ns).add(text, tags=tags, pinned=bool(form.get("pinned")))
        except InvalidMemoryError as exc:
            raise _Refused(400, public_message(exc)) from None
        return _back(ns)

    def edit(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        s, mid = store(ns), request.path_params["mid"]
        text = _text(form, "changed")
        old = _get(s, mid)
        if text != old.text:
            try:  # the old text goes to the archive, linked to the new one (its history)
                s.add(text, tags=old.tags, pinned=old.pinned, topic=old.topic, replaces=old.id)
            except InvalidMemoryError as exc:
                raise _Refused(400, public_message(exc)) from None
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
        s, mid = store(ns), request.path_params["mid"]
        try:
            (approve if request.path_params["verdict"] == "approve" else reject)(s, [mid])
        except MemoryNotFoundError as exc:
            raise _Refused(404, public_message(exc)) from None
        return _back(ns)

    def keep(request: Request, ns: str | None, form: dict[str, Any]) -> Response:
        s = store(ns)  # this one stays; the other goes to the archive as superseded, or both stay
        resolve(s, _get(s, request.path_params["mid"]).id, both=form.get("both") == "1")
        return _back(ns)

    def sessions(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        records = session_records(store(ns), middleware.records, ns)
        by: dict[str, list[Record]] = {}
        for r in records:
            if r.session:
                by.setdefault(r.session, []).append(r)
        rows = "".join(
            f'<tr><td><a href="{_url("/sessions/" + quote(sid, safe=""), ns)}">{escape(sid)}</a></td>'
            f'<td>{escape(rs[-1].mode)}</td><td class="n">{len(rs)}</td>'
            f'<td class="n">{sum(r.injected for r in rs)}</td><td class="n">{_share(rs)}</td></tr>'
            for sid, rs in sorted(by.items(), key=lambda kv: -kv[1][-1].at))
        body = (_nav(ns) + '<table id="sessions"><thead><tr><th>session</th><th>mode</th><th>requests</th>'
                f'<th>memories injected</th><th>cached</th></tr></thead><tbody>{rows}</tbody></table>'
                '<p class="note">The requests served lately, by every worker and replica on this store '
                "(the newest in its request log).</p>")
        return _html("memwire: sessions", body)

    def session(request: Request, ns: str | None, _: dict[str, Any]) -> Response:
        sid = request.path_params["sid"]
        rs = session_records(store(ns), middleware.records, ns, sid)
        known = {m.id: m for m in store(ns).known({i for r in rs for i in r.memory_ids})}
        rows = "".join(
            f'<tr><td class="n">{i + 1}</td><td>{escape(r.mode)}</td>'
            f'<td>{_injected(r, known)}</td><td class="n">{r.block_tokens}</td>'
            f'<td class="n">{"-" if r.prompt_tokens is None else f"{r.prompt_tokens:,}"}</td>'
            f'<td class="n">{_share([r])}</td><td class="n">{r.added_ms:.1f}</td></tr>' for i, r in enumerate(rs))
        series = [(r.prompt_tokens, r.cached_tokens or 0) for r in rs if r.prompt_tokens is not None]
        body = (_nav(ns) + f"<h2>Session <code>{escape(sid)}</code></h2>"
                f"<figure>{share_chart(series, sid)}</figure>"
                '<table id="requests"><thead><tr><th>#</th><th>mode</th><th>memories injected</th><th>block tokens</th>'
                f'<th>prompt tokens</th><th>cached</th><th>ms added</th></tr></thead><tbody>{rows}</tbody></table>')
        return _html(f"memwire: session {sid}", body)

    routes = [
        Route("/login", login, methods=["POST"]),
        Route("/memories", page(add, write=True, creates=True), methods=["POST"]),
        Route("/memories/{mid}/edit", page(edit, write=True), methods=["POST"]),
        Route("/memories/{mid}/forget", page(forget, write=True), methods=["POST"]),
        Route("/memories/{mid}/pin", page(pin, write=True), methods=["POST"]),
        Route("/memories/{mid}/keep", page(keep, write=True), methods=["POST"]),
        Route("/inbox/{mid}/{verdict:str}", page(review, write=True), methods=["POST"]),
        Route("/sessions", page(sessions), methods=["GET"]),
        Route("/sessions/{sid:path}", page(session), methods=["GET"]),
    ]
    return [Route(UI_PREFIX, page(memories), methods=["GET"]), Mount(UI_PREFIX, routes=routes)]


async def _form(request: Request, timeout: float) -> dict[str, str]:
    """A form post's fields (``application/x-www-form-urlencoded``, what the page's forms send),
    read under the proxy's body time limit and at most ``MAX_FORM_BYTES``."""
    try:
        raw = await read_all(request, timeout, MAX_FORM_BYTES)
    except Refusal as exc:
        raise _Refused(exc.status_code, exc.detail) from None
    return {k: v[-1] for k, v in parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True).items()}


def _text(form: dict[str, str], done: str) -> str:
    """The memory text of a form; one that looks like it holds a secret is refused, as everywhere."""
    text = form.get("text", "").strip()
    if (secret := find_secret(text)) is not None:
        raise _Refused(400, f"not {done}: the text looks like it holds a secret ({secret})")
    return text


def _get(s: Store, mid: str) -> Memory:
    try:
        return s.get(mid)
    except MemoryNotFoundError as exc:
        raise _Refused(404, public_message(exc)) from None


def _url(path: str, ns: str | None) -> str:
    return UI_PREFIX + path + (("?" + urlencode({"ns": ns})) if ns else "")


def _back(ns: str | None) -> Response:
    return RedirectResponse(_url("", ns), status_code=303)


def _share(rs: list[Record]) -> str:
    prompt = sum(r.prompt_tokens or 0 for r in rs)
    return f"{sum(r.cached_tokens or 0 for r in rs) / prompt:.0%}" if prompt else "-"


def _injected(r: Record, known: dict[str, Memory]) -> str:
    if not r.memory_ids:
        return f'<span class="note">{escape(r.skipped or "none")}</span>'
    return "<br>".join(escape(known[i].text) if i in known else f'<span class="note">{escape(i[:10])} (gone)</span>'
                       for i in r.memory_ids)


def _memory_row(m: Memory, ns: str | None) -> str:
    base = f"/memories/{m.id}"
    tags = " ".join(f"#{escape(t)}" for t in m.tags)
    return (f'<tr data-id="{m.id}"><td>{"📌 " if m.pinned else ""}{escape(m.text)} <span class="tag">{tags}</span>'
            f'<form method="post" class="edit" action="{_url(base + "/edit", ns)}">'
            f'<input type="text" class="wide" name="text" value="{escape(m.text)}"> <button>save</button></form></td>'
            f'<td><form method="post" class="inline" action="{_url(base + "/pin", ns)}">'
            f'<input type="hidden" name="pinned" value="{"0" if m.pinned else "1"}">'
            f'<button>{"unpin" if m.pinned else "pin"}</button></form> '
            f'<form method="post" class="inline" action="{_url(base + "/forget", ns)}"><button>forget</button></form></td></tr>')


def _conflict_row(new: Memory, old: Memory, ns: str | None) -> str:
    def keep(m: Memory, label: str, both: bool = False) -> str:
        return (f'<form method="post" class="inline" action="{_url(f"/memories/{m.id}/keep", ns)}">'
                f'<input type="hidden" name="both" value="{"1" if both else "0"}"><button>{label}</button></form> ')
    return (f'<tr data-id="{new.id}" data-older="{old.id}"><td>{escape(new.text)}<br>'
            f'<s>{escape(old.text)}</s></td>'
            f'<td>{keep(new, "keep newer")}{keep(old, "keep older")}{keep(new, "keep both", True)}</td></tr>')


def _inbox_row(m: Memory, ns: str | None) -> str:
    return (f'<tr data-id="{m.id}"><td>{escape(m.text)}</td><td>'
            + "".join(f'<form method="post" class="inline" action="{_url(f"/inbox/{m.id}/{v}", ns)}">'
                      f"<button>{v}</button></form> " for v in ("approve", "reject")) + "</td></tr>")


def _nav(ns: str | None) -> str:
    return (f'<h1>memwire <span class="note">namespace {escape(ns or "default")}</span></h1>'
            f'<nav><a href="{_url("", ns)}">memories</a><a href="{_url("/sessions", ns)}">sessions</a></nav>')


def _html(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
                        f"<style>{_CSS}</style></head><body>{body}</body></html>", status_code=status)


def _login(request: Request, failed: bool, tenants: bool = False) -> HTMLResponse:
    which = "the proxy key or your client key" if tenants else "the proxy key"
    wrong = f'<p class="error">That is not {which}.</p>' if failed else ""
    return _html("memwire: key", f"<h1>memwire</h1>{wrong}<form method=\"post\" action=\"{UI_PREFIX}/login\">"
                 f'<input type="password" name="key" placeholder="{which}" required> <button>open</button></form>',
                 401)
