"""What ``/memwire/ui`` draws: its style and script (inline: the page asks nothing of any other
origin, and its Content-Security-Policy says so), the figures of its header, and one memory's row.
The routes and their store calls are in ``_ui``.

Figures come from the request records (``middleware._records``): the providers' own usage as the
proxy read it from each reply. Cost units are the demo's (``memwire demo``, ``_sim.cache``): an
uncached input token 1.0; a cached one 0.5 at OpenAI, 0.1 at Anthropic, where a cache write costs
1.25 (the server may not import the simulator: a test holds the two tables equal).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from starlette.responses import HTMLResponse

from ..._charts import CHART_CSS
from ...memory._lifecycle import Meta
from ...memory._model import Memory
from ...memory._text import analyze
from ...middleware._records import Record

__all__ = ["CSP", "CSS", "HEADERS", "PRICES", "SCRIPT", "Figures", "MemoryView", "figures", "figures_header",
           "matched_words", "memory_row", "page_html", "said", "share", "turn_of", "url", "when"]

UI_PREFIX = "/memwire/ui"

#: (cached read, cache write) price per token, uncached input being 1.0 (the demo's cost model)
PRICES: Mapping[str, tuple[float, float]] = {"openai": (0.5, 1.0), "anthropic": (0.1, 1.25)}

#: nothing but this origin: no CDN, no font, no beacon (a page an operator keeps open leaks nothing)
CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src 'self' data:; "
       "form-action 'self'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")

# same-origin referrer: with no-referrer Chromium posts forms with "Origin: null" (refused)
HEADERS = {"content-security-policy": CSP, "referrer-policy": "same-origin", "x-content-type-options": "nosniff"}

CSS = """
:root { --fg: #1d1d1f; --muted: #5b5b60; --line: #dedee3; --accent: #0a58ca; --bg2: #f5f5f7; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; color: var(--fg);
  padding: .5rem 1rem 2rem; }
h1 { font-size: 1.25rem; margin: .4rem 0; } h2 { font-size: 1.05rem; margin: 1.4rem 0 .3rem; }
nav { display: flex; flex-wrap: wrap; gap: .2rem 1rem; margin: .2rem 0 .6rem; }
nav a[aria-current] { font-weight: 700; text-decoration: none; color: var(--fg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(130px, 1fr)); gap: .5rem;
  margin: .4rem 0 .8rem; padding: 0; }
.figures div { background: var(--bg2); border-radius: 6px; padding: .35rem .6rem; }
.figures dt { font-size: 12px; color: var(--muted); } .figures dd { margin: 0; font-size: 1.15rem; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0; }
th, td { padding: .35rem .4rem; text-align: left; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 13px; color: var(--muted); font-weight: 600; }
td.n, th.n { text-align: right; white-space: nowrap; }
td.actions { white-space: nowrap; text-align: right; }
form.inline { display: inline; }
form.bar { display: flex; flex-wrap: wrap; gap: .4rem; align-items: center; margin: .4rem 0; }
form.bar input[type=search], form.bar input.grow { flex: 1 1 16rem; min-width: 0; }
input, select, button { font: inherit; padding: .25rem .45rem; }
button { cursor: pointer; border: 1px solid #b9b9c0; border-radius: 5px; background: #fff; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
.mtext { cursor: text; border-radius: 4px; padding: 0 .15rem; display: block; }
.mtext:hover { background: var(--bg2); }
.mtext form { display: flex; gap: .3rem; } .mtext input { flex: 1; min-width: 0; }
.meta { display: block; font-size: 12.5px; color: var(--muted); margin-top: .15rem; }
.tag { display: inline-block; font-size: 12px; background: #e8eefc; color: #23408e; border-radius: 4px;
  padding: 0 .3rem; margin-right: .2rem; }
.tag.pin { background: #fde7c8; color: #7a4100; }
.why { font-size: 12.5px; } mark { background: #fff1a8; }
.state-active { color: #1b7f3b; } .state-provisional { color: #8a6100; }
.state-candidate, .state-dropped { color: #b00020; }
.note { color: var(--muted); font-size: 13px; }
figure { margin: .5rem 0; max-width: 760px; }
time { white-space: nowrap; }
.error { color: #b00020; font-weight: 600; }
code { font-size: 13px; word-break: break-all; }
@media (max-width: 640px) {
  body { padding: .4rem .6rem 2rem; font-size: 14px; }
  table.cards thead { display: none; }
  table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; }
  table.cards tr { border-bottom: 1px solid var(--line); padding: .3rem 0; }
  table.cards td { border: 0; padding: .15rem 0; text-align: left; }
  table.cards td.actions { text-align: left; }
  table.cards td[data-label] { display: inline-block; width: auto; margin-right: .9rem; }
  table.cards td[data-label=injected] { display: block; }
  .figures { grid-template-columns: repeat(3, 1fr); gap: .3rem; }
  .figures div { padding: .2rem .4rem; } .figures dd { font-size: 1rem; }
  table.cards td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); font-size: 12px; }
}
""" + CHART_CSS

# Click or Enter on a text opens it for editing in its place; Enter saves (the form posts),
# Escape puts the text back. Without script the page still lists, searches and acts (forms).
SCRIPT = """
(function () {
  function open(t) {
    if (t.querySelector('form')) return;
    var text = t.textContent, f = document.createElement('form'), i = document.createElement('input');
    f.method = 'post'; f.action = t.dataset.edit; f.className = 'edit';
    i.name = 'text'; i.value = text; i.setAttribute('aria-label', 'new text; Enter saves, Escape cancels');
    f.appendChild(i); t.textContent = ''; t.appendChild(f); t.removeAttribute('tabindex'); i.focus(); i.select();
    i.addEventListener('keydown', function (e) {
      if (e.key === 'Escape') { e.preventDefault(); t.textContent = text; t.tabIndex = 0; t.focus(); }
    });
  }
  document.addEventListener('click', function (e) {
    var t = e.target.closest && e.target.closest('.mtext[data-edit]'); if (t) open(t);
  });
  document.addEventListener('keydown', function (e) {
    var t = e.target;
    if (e.key === 'Enter' && t.classList && t.classList.contains('mtext') && t.dataset.edit) {
      e.preventDefault(); open(t);
    }
  });
  // the header's figures: redrawn from the page's own origin while the page is open and shown
  var figs = document.getElementById('figures');
  if (figs && figs.dataset.src && window.fetch) {
    setInterval(function () {
      if (document.hidden) return;
      fetch(figs.dataset.src, {credentials: 'same-origin'}).then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          var fresh = html && new DOMParser().parseFromString(html, 'text/html').getElementById('figures');
          if (fresh) figs.innerHTML = fresh.innerHTML;
        }).catch(function () {});
    }, 1000 * Number(figs.dataset.refresh));
  }
})();
"""


def page_html(title: str, body: str, status: int = 200) -> HTMLResponse:
    """A whole page: ``body`` (HTML) under ``title``, with the page's style, script and headers."""
    return HTMLResponse(f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
                        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
                        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>{body}"
                        f"<script>{SCRIPT}</script></body></html>", status_code=status,
                        headers=HEADERS)


def when(t: float | None) -> str:
    """A UTC time as a person reads it, in a ``<time>`` element ("-" when unknown)."""
    if t is None:
        return "-"
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    return f'<time datetime="{iso}">{time.strftime("%Y-%m-%d %H:%M", time.gmtime(t))}</time>'


def url(path: str, ns: str | None, **params: str) -> str:
    query = {k: v for k, v in {"ns": ns or "", **params}.items() if v}
    return UI_PREFIX + path + ("?" + urlencode(query) if query else "")


@dataclass
class Figures:
    """A namespace's traffic as the proxy recorded it, for the header."""

    requests: int = 0
    turns: int = 0                 # requests that computed a block (a tool loop's repeats reuse it)
    injected: int = 0              # memories in those turns' blocks
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0              # cost units (the demo's) of the requests with usage
    uncached: float = 0.0          # what the same prompts would cost without a cache

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    @property
    def saved(self) -> float:
        return self.uncached - self.cost

    @property
    def per_turn(self) -> float | None:
        return self.injected / self.turns if self.turns else None


def turn_of(r: Record) -> bool:
    """Whether a record is a turn of its own: its block was computed, not reused from its turn's
    memo (a tool loop sends one turn as several requests) or the request was skipped."""
    return bool(r.mode) and r.mode != "none" and not r.reused and r.skipped != "side_request"


def figures(records: Iterable[Record]) -> Figures:
    f = Figures()
    for r in records:
        f.requests += 1
        if turn_of(r):
            f.turns += 1
            f.injected += r.injected
        if r.prompt_tokens is not None:
            cached, write = r.cached_tokens or 0, r.cache_write_tokens or 0
            read_price, write_price = PRICES.get(r.provider, PRICES["openai"])
            f.prompt_tokens += r.prompt_tokens
            f.cached_tokens += cached
            f.cost += (r.prompt_tokens - cached - write) + cached * read_price + write * write_price
            f.uncached += r.prompt_tokens
    return f


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def figures_header(f: Figures, memories: int, inbox: int, captures: int, conflicts: int, src: str = "",
                   refresh: float = 0) -> str:
    """The header's figures; ``src``: where the page's script fetches them again every ``refresh`` s."""
    saved = f"{f.saved:,.0f}" + (f" ({f.saved / f.uncached:.0%})" if f.uncached else "")
    items = [("requests", f"{f.requests:,}", "requests served (the newest in the request log)"),
             ("cached share", share(f.cached_share), "of prompt tokens, as the providers reported"),
             ("saved by caching", saved, "cost units: uncached input token 1.0 (as memwire demo counts)"),
             ("memories / turn", "-" if f.per_turn is None else f"{f.per_turn:.1f}",
              "memories injected per turn (a tool loop's requests are one turn)"),
             ("memories", f"{memories:,}", "active memories"),
             ("captured", f"{captures:,}", "memories capture wrote or proposed"),
             ("inbox", f"{inbox:,}", "captured, waiting for review"),
             ("conflicts", f"{conflicts:,}", "pairs that may contradict each other")]
    live = f' data-src="{escape(src)}" data-refresh="{refresh:g}"' if src and refresh > 0 else ""
    return f'<dl class="figures" id="figures"{live} aria-live="polite">' + "".join(
        f'<div title="{escape(tip)}" data-figure="{escape(name)}"><dt>{escape(name)}</dt><dd>{value}</dd></div>'
        for name, value, tip in items) + "</dl>"


def matched_words(query: str, mem: Memory) -> list[str]:
    """The query's words the memory matched on (as retrieval reads them: folded, stemmed), each
    once, in the query's order; a word found only in a tag or the topic is marked so."""
    body, extra = set(analyze(mem.text)), set(analyze(" ".join([*mem.tags, mem.topic or ""])))
    out: list[str] = []
    for word in dict.fromkeys(query.split()):
        terms = set(analyze(word))
        if terms & body:
            out.append(word.strip(".,;:!?\"'()"))
        elif terms & extra:
            out.append(word.strip(".,;:!?\"'()") + " (tag)")
    return out


@dataclass
class MemoryView:
    """One memory with what the page tells of it."""

    memory: Memory
    meta: Meta | None
    stability: float | None
    state: str | None
    cue: str
    captured: Mapping[str, Any] | None = None  # its capture event (kind, session, turn, at)
    matched: Sequence[str] | None = None       # with a search: the words it matched on
    last_injected: float | None = None         # the newest request record that injected it
    recent_turns: int = 0                      # turns of the recent request records that injected it


def memory_row(v: MemoryView, ns: str | None) -> str:
    m, meta = v.memory, v.meta
    base = f"/memories/{m.id}"
    tags = "".join(f'<span class="tag">#{escape(t)}</span>' for t in m.tags)
    facts = [f'<span data-k="source">{escape(v.cue)}</span>']
    if meta is not None:
        facts.append(f"created {when(meta.created)}")
        if meta.reinforced > meta.created + 1:
            facts.append(f"reinforced {when(meta.reinforced)}")
        # the lifecycle's count is saved every few seconds; the request records are at once
        facts.append(f'<span data-k="injected">injected {max(meta.injected, v.recent_turns):,}×</span>')
    if v.last_injected is not None:
        facts.append(f'<span data-k="last-used">last injected {when(v.last_injected)}</span>')
    if v.stability is not None:
        facts.append(f'<span data-k="stability" class="state-{escape(v.state or "")}">stability {v.stability:.2f} '
                     f'({escape(v.state or "")})</span>')
    if v.captured:
        facts.append(f'<span data-k="why">captured {said(v.captured, ns)}</span>')
    why = ""
    if v.matched is not None:
        why = ('<span class="why" data-k="matched">matched: '
               + (", ".join(f"<mark>{escape(w)}</mark>" for w in v.matched) or "related words") + "</span>")
    pin_label = "unpin" if m.pinned else "pin"
    pinned = '<span class="tag pin">pinned</span>' if m.pinned else ""
    return (f'<tr data-id="{m.id}"><td><span class="mtext" tabindex="0" role="button" '
            f'title="click or Enter: edit" data-edit="{escape(url(base + "/edit", ns))}">{escape(m.text)}</span>'
            f'<span class="meta">{pinned}{tags} {" · ".join(facts)}</span>{why}</td>'
            f'<td class="actions"><a href="{escape(url(base, ns))}">history</a> '
            f'<form method="post" class="inline" action="{escape(url(base + "/pin", ns))}">'
            f'<input type="hidden" name="pinned" value="{"0" if m.pinned else "1"}">'
            f'<button>{pin_label}</button></form> '
            f'<form method="post" class="inline" action="{escape(url(base + "/forget", ns))}">'
            f'<button>forget</button></form></td></tr>')


def said(c: Mapping[str, Any], ns: str | None) -> str:
    """Where a captured memory was said, from its capture event: session (linked), which message of
    the request's conversation (1 = its first item), time, and the kind of statement capture took it
    for. Never the message itself (capture does not record it)."""
    parts = []
    if c.get("session"):
        sid = str(c["session"])
        parts.append(f'in session <a href="{escape(url("/sessions/" + _q(sid), ns))}">{escape(sid)}</a>')
    if c.get("turn") is not None:
        index = str(c["turn"]).split(":")[0]  # the turn key: the user message's index, then its hash
        parts.append(f"message {int(index) + 1}" if index.isdigit() else "")
    if c.get("at"):
        parts.append(f"at {escape(str(c['at']))[:16].replace('T', ' ')}")
    if c.get("kind"):
        parts.append(f"as a {escape(str(c['kind']))}")
    return ", ".join(p for p in parts if p) or "(no record of where)"


def _q(s: str) -> str:
    return quote(s, safe="")
