"""The ``memwire`` command."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._config import MODES, _from_toml, load_config, make_config, restrict_project_config
from ._errors import ConfigError, MemwireError
from ._sim import demo_cli
from .adapters.server import _keys as keys_cli  # each registers its own subcommand
from .adapters.server import _mcp_cli as mcp_cli
from .adapters.server import _proxy_cli as proxy_cli

# start-up time: each command imports what it needs when it runs (the function-level imports
# below, each marked), so `memwire --help` stays fast
if TYPE_CHECKING:
    from ._config_model import Config
    from .memory._model import Memory
    from .memory._protocol import Store
    from .middleware._core import Middleware, Prepared

__all__ = ["main"]


def _store(args: argparse.Namespace, cfg: Config, *, alone: bool = False) -> Store:
    """The store a memory command reads or writes: ``--store`` / ``--dir`` / the config's. With
    ``alone``, the scope only (never with the global scope): what a command writes to or moves."""
    from .memory._open import check_dir, open_store  # start-up time

    url = getattr(args, "store", None)
    if url and args.dir:
        raise MemwireError("give --dir (a memory directory) or --store (a PostgreSQL URL), not both")
    if url:
        url = make_config({**cfg.model_dump(), "store": url}).store  # the config's check of the URL
    elif not args.dir and not cfg.store:
        check_dir(cfg.dir)
    if args.dir:
        check_dir(args.dir)
    return open_store(cfg, args.namespace, dir=Path(args.dir) if args.dir else None, alone=alone, store=url)


def _mem_json(m: Memory) -> dict[str, Any]:
    return {"id": m.id, "text": m.text, "tags": list(m.tags), "pinned": m.pinned, "topic": m.topic,
            "date": m.date, "source": m.source}


def _mem_line(m: Memory) -> str:
    tags = "".join(f" #{t}" for t in m.tags)
    return f"{m.id}  {'📌 ' if m.pinned else ''}{m.text}{tags}"


# What a terminal would act on instead of showing: C0 controls but tab and newline (ESC starts
# every escape sequence, CR rewrites the line), DEL, C1 controls, and the bidirectional overrides
# that reorder what is shown. Memory text can hold them when a file was edited by hand.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _printable(text: str) -> str:
    """``text`` with each character a terminal would act on shown as an escape (``\\x1b``)."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_text(data: Any) -> str:
    """JSON for a terminal: json escapes C0 controls, and here C1 controls and the rest as well."""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, ensure_ascii=False, indent=2))


def _out(args: argparse.Namespace, data: Any, lines: Sequence[str]) -> None:
    if args.json:
        print(_json_text(data))
    else:
        for line in lines:
            print(_printable(line))


def cmd_add(args: argparse.Namespace, cfg: Config) -> int:
    store = _store(args, cfg)
    text = " ".join(args.text)
    if args.text == ["-"]:  # `memwire add -`: the text comes from standard input
        text = sys.stdin.read().strip()
        if not text:
            raise MemwireError("add -: standard input was empty; nothing to add")
    mem = store.add(text, tags=args.tag or (), pinned=args.pin, topic=args.topic)
    _out(args, _mem_json(mem), [f"added {mem.id} to {store.location}"])
    return 0


def cmd_list(args: argparse.Namespace, cfg: Config) -> int:
    store = _store(args, cfg)
    mems = [m for m in store if not args.pinned or m.pinned]
    for p in store.problems:
        print(_printable(f"warning: {p}"), file=sys.stderr)
    _out(args, [_mem_json(m) for m in mems], [_mem_line(m) for m in mems] or [f"no memories in {store.location}"])
    return 0


def _k(value: str) -> int:
    k = int(value) if value.lstrip("-").isdigit() else 0
    if not 1 <= k <= 100:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 100, got {value!r}")
    return k


def _share(value: str) -> float:
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {value!r}")
    return share


def cmd_search(args: argparse.Namespace, cfg: Config) -> int:
    store = _store(args, cfg)
    if args.archive:
        store = store.archive
    from .memory._why import explain_hits, why_nothing  # start-up time

    query = " ".join(args.query)
    hits = store.search(query, k=args.k, min_score=args.min_score)
    if not hits:  # one line: why nothing came (on standard error with --json, which stays a list)
        why = f"no relevant memories: {why_nothing(store, query, min_score=args.min_score).text}"
        _out(args, [], [why])
        if args.json:
            print(_printable(why), file=sys.stderr)
        return 0
    whys = explain_hits(store, query, [h.memory for h in hits], k=args.k, min_score=args.min_score)
    _out(args, [{**_mem_json(h.memory), "score": h.score, **w.to_json()} for h, w in zip(hits, whys, strict=True)],
         [line for h, w in zip(hits, whys, strict=True)
          for line in (f"{h.score:7.3f}  {_mem_line(h.memory)}", f"{'':9}{w.line()}")])
    return 0


def cmd_forget(args: argparse.Namespace, cfg: Config) -> int:
    store = _store(args, cfg)
    mem = store.forget(args.id)
    _out(args, _mem_json(mem), [f"forgot {mem.id}: {mem.text} (kept in the archive: memwire restore {mem.id[:8]})"])
    return 0


def cmd_restore(args: argparse.Namespace, cfg: Config) -> int:
    store = _store(args, cfg)
    mem = store.restore(args.id)
    _out(args, _mem_json(mem), [f"restored {mem.id}: {mem.text}"])
    return 0


def cmd_history(args: argparse.Namespace, cfg: Config) -> int:
    from .memory._supersede import history  # start-up time

    steps = history(_store(args, cfg), args.id)
    _out(args, [s.to_json() for s in steps],
         [f"{s.since[:10]} .. {(s.until or 'now')[:10]:<10} {s.state:<10} {s.memory.id[:8]}  {s.memory.text}"
          for s in steps])
    return 0


def cmd_dedupe(args: argparse.Namespace, cfg: Config) -> int:
    from .memory._inbox import approve, propose_merges  # start-up time
    from .memory._supersede import duplicate_clusters  # start-up time

    if args.yes and not args.apply:
        raise MemwireError("dedupe: --yes goes with --apply")
    store = _store(args, cfg)
    clusters = duplicate_clusters(store)
    found = propose_merges(store, clusters) if args.apply else [(c, None) for c in clusters]
    rows, lines = [], []
    for cluster, item in found:
        merged = bool(args.yes and item is not None and approve(store, [item.id]))
        what = ("merged" if merged else f"proposed in the inbox as {item.id[:8]}" if item is not None
                else "not proposed (rejected before)" if args.apply else "would merge")
        lines.append(f"{what}: keep {cluster[0].id[:8]} ({cluster[0].text}), archive "
                     + ", ".join(f"{m.id[:8]} ({m.text})" for m in cluster[1:]))
        rows.append({"keep": _mem_json(cluster[0]), "merge": [_mem_json(m) for m in cluster[1:]],
                     "proposed": None if item is None else item.id, "applied": merged})
    if clusters and not args.apply:
        lines.append("memwire dedupe --apply proposes each merge in the inbox (memwire inbox approve ID merges: "
                     "the others go to the archive as #merged, restorable; reject ID leaves them)")
    elif any(item is not None for _, item in found) and not args.yes:
        lines.append("memwire inbox approve ID merges one (the others go to the archive as #merged, restorable); "
                     "memwire inbox reject ID leaves them")
    _out(args, rows, lines or [f"no duplicates in {store.location}"])
    return 0


def _conflict_lines(store: Store) -> list[str]:
    """What ``memwire conflicts`` would list, in short, for the inbox, stale and stats."""
    from .memory._supersede import conflicts  # start-up time

    pairs = conflicts(store)
    if not pairs:
        return []
    return [f"{len(pairs)} conflict(s) for you to resolve (only the newer of each is injected): memwire conflicts"] + [
        f"  {new.id[:8]} {new.text}  vs  {old.id[:8]} {old.text}" for new, old in pairs[:5]]


def cmd_conflicts(args: argparse.Namespace, cfg: Config) -> int:
    from .memory._supersede import conflicts, resolve  # start-up time

    store = _store(args, cfg)
    if args.keep:
        kept, gone = resolve(store, args.keep, both=args.both)
        _out(args, {"kept": _mem_json(kept), "archived": [_mem_json(m) for m in gone]},
             [f"kept {kept.id[:8]}: {kept.text}"] + [f"archived (superseded) {m.id[:8]}: {m.text}" for m in gone])
        return 0
    pairs = conflicts(store)
    _out(args, [{"newer": _mem_json(new), "older": _mem_json(old)} for new, old in pairs],
         [f"{new.id[:8]} {new.text}\n  vs {old.id[:8]} {old.text}" for new, old in pairs]
         + (["memwire conflicts --keep ID keeps that one (the other is archived as superseded); "
             "--keep ID --both keeps both"] if pairs else [])
         or ["no conflicts"])
    return 0


def cmd_stats(args: argparse.Namespace, cfg: Config) -> int:
    from .memory._lifecycle import STATES  # start-up time
    from .memory._upkeep import stats  # start-up time

    if args.requests or args.url or args.log:
        return _request_stats(args, cfg)

    store = _store(args, cfg)
    rows = stats(store)
    data = [{"category": r.category, "count": r.count, **r.states, "injected": r.injected, "used": r.used,
             "usage_rate": r.usage_rate, "cap": r.cap, "capacity": r.capacity} for r in rows]
    head = (f"{'category':<12}" + "".join(f"{s:>12}" for s in STATES)
            + f"{'injected':>10}{'used':>7}{'usage':>7}  capacity")
    lines = [head] + [
        f"{r.category:<12}" + "".join(f"{r.states[s]:>12}" for s in STATES) + f"{r.injected:>10}{r.used:>7}"
        + f"{'-' if r.usage_rate is None else format(r.usage_rate, '.0%'):>7}  {r.count}/{r.cap}"
        + (" (over: a sweep archives the weakest it may move)" if r.count > r.cap else "")
        for r in rows]
    _out(args, data, (lines if rows else [f"no memories in {store.location}"]) + _conflict_lines(store))
    return 0


def _request_stats(args: argparse.Namespace, cfg: Config) -> int:
    """The cache figures of real traffic, per mode and provider: from a running proxy's /metrics
    (``--url``), a request log (``--log``, default: the configured proxy_request_log), or else
    the store's own log of the requests of the namespace (every worker's and replica's)."""
    from ._sim.figures import from_metrics, from_records  # start-up time
    from .middleware._records import read_records  # start-up time

    if args.url:
        import httpx  # start-up time

        key = args.key or cfg.proxy_key
        url = args.url.rstrip("/") + "/metrics"
        try:
            r = httpx.get(url, headers={"x-memwire-key": key} if key else {}, timeout=10, trust_env=False)
        except httpx.HTTPError as exc:
            raise MemwireError(f"--url: cannot reach {url} ({type(exc).__name__}: {exc})") from None
        if r.status_code == 401:
            raise MemwireError(f"--url: {url} wants the proxy key (--key KEY or MEMWIRE_PROXY_KEY)")
        if r.status_code != 200:
            raise MemwireError(f"--url: {url} answered {r.status_code}; is it a memwire proxy?")
        rows, source = from_metrics(r.text), url
    else:
        log = Path(args.log) if args.log else cfg.proxy_request_log
        if log is None:  # what the proxies kept in the store (see middleware/_records.SharedRecords)
            from .middleware._records import stored_records  # start-up time

            store = _scope(args, cfg)
            rows, source = from_records(stored_records(store)), f"the proxies on {store.location}"
            return _requests_table(args, rows, source)
        if not log.exists():
            raise MemwireError(f"--log {log}: no such file (memwire proxy --request-log {log} writes it)")
        rows, source = from_records(read_records(log)), str(log)
    return _requests_table(args, rows, source)


def _requests_table(args: argparse.Namespace, rows: list[Any], source: str) -> int:
    head = (f"{'mode':<22}{'provider':<11}{'requests':>9}{'injected':>10}{'prompt tokens':>15}{'cached':>8}"
            f"{'cost units':>12}{'vs no cache':>13}")
    lines = [f"requests seen by {source}", head] + [
        f"{f.mode:<22}{f.provider:<11}{f.requests:>9}{f.injected:>10}{f.prompt_tokens:>15,}{f.cached_ratio:>8.1%}"
        f"{f.cost:>12,.0f}{f.vs_uncached:>12.2f}x" for f in rows]
    lines.append("cost units: uncached input 1.0; OpenAI cached 0.5; Anthropic cache read 0.1, write 1.25 "
                 "(as memwire demo)")
    _out(args, [f.as_json() for f in rows], lines if rows else [f"no requests in {source}"])
    return 0


def cmd_stale(args: argparse.Namespace, cfg: Config) -> int:
    from .memory._upkeep import stale, sweep  # start-up time

    store = _store(args, cfg)
    if args.sweep:
        moved = sweep(store)
        _out(args, [{**_mem_json(m), "reason": why} for m, why in moved],
             [f"archived ({why}) {m.id}: {m.text}" for m, why in moved] or ["nothing to archive"])
        return 0
    rows = stale(store)
    what = {"decayed": "a sweep archives it", "capped": "over its category's cap: a sweep archives it",
            "kept": "yours: pin it, or forget it"}
    _out(args, [{**_mem_json(s.memory), "category": s.category, "score": round(s.score, 3), "state": s.state,
                 "cue": s.cue, "days": round(s.days, 1), "action": why} for s, why in rows],
         ([f"{s.memory.id[:8]}  {s.score:5.2f} {s.state:<9} {s.category:<10} {s.days:5.0f}d  {s.memory.text}  "
          f"({what[why]})" for s, why in rows] or ["nothing is fading"]) + _conflict_lines(store))
    return 0


def cmd_pin(args: argparse.Namespace, cfg: Config) -> int:
    store = _store(args, cfg)
    mem = store.pin(args.id, not args.unpin)
    _out(args, _mem_json(mem), [f"{'unpinned' if args.unpin else 'pinned'} {mem.id}: {mem.text}"])
    return 0


def cmd_inbox(args: argparse.Namespace, cfg: Config) -> int:
    """Captured memories waiting for review (capture = "review"): list, approve, reject."""
    from .memory._inbox import approve, inbox_of, is_merge, reject  # start-up time

    store = _store(args, cfg)
    inbox = inbox_of(store)
    if args.action is None:
        if args.ids or args.all:
            raise MemwireError("inbox: IDs and --all go with 'approve' or 'reject'")
        waiting = inbox.memories()
        lines = [_mem_line(m) for m in waiting] or [f"the inbox of {store.location} is empty"]
        _out(args, [_mem_json(m) for m in waiting], lines + _conflict_lines(store))
        return 0
    if bool(args.ids) == args.all:
        raise MemwireError(f"inbox {args.action}: give the IDs to {args.action}, or --all (not both)")
    items = inbox.memories() if args.all else list({m.id: m for m in map(inbox.get, args.ids)}.values())
    done = (approve if args.action == "approve" else reject)(store, [m.id for m in items])
    verb = "approved (injected from now on)" if args.action == "approve" else "rejected (archived, not proposed again)"
    _out(args, [_mem_json(m) for m in done],  # an approved merge gives the memory it kept
         [f"{'merged its duplicates into' if is_merge(item) and args.action == 'approve' else verb}: {m.id}  {m.text}"
          for m, item in zip(done, items, strict=True)] or ["the inbox is empty"])
    return 0


def _counts(r: Any, dry_run: bool) -> str:
    """An import's counts (a file's or the total): added as a fact of its own, merged into an
    active memory that says it (reinforced, nothing added) and added as a new value (the old one
    archived) when there are any, already there, skipped."""
    why = ", ".join(f"{reason} {n}" for reason, n in sorted(r.skipped.items()))
    settled = (f", {'would merge' if dry_run else 'merged'} {r.merged} (said in other words by a memory there)"
               if r.merged else "") + (
        f", {'would replace' if dry_run else 'replaced'} {r.superseded} (new values: the older ones archived)"
        if r.superseded else "")
    return (f"{'would add' if dry_run else 'added'} {r.added}{settled}, already there {r.already}, "
            f"skipped {sum(r.skipped.values())}{f' ({why})' if why else ''}")


def _scope(args: argparse.Namespace, cfg: Config) -> Store:
    """The scope a command writes to or moves, alone (never with the global scope)."""
    return _store(args, cfg, alone=True)


def cmd_export(args: argparse.Namespace, cfg: Config) -> int:
    """A namespace, whole, as one JSON Lines file (``memwire import FILE`` reads it back)."""
    from .memory._transfer import export_store  # start-up time

    store = _scope(args, cfg)
    if args.output in (None, "-"):
        counts = export_store(store, sys.stdout, args.namespace)
    else:
        target = Path(args.output)
        tmp = target.with_name(f".{target.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:  # a file half written never takes the name
            counts = export_store(store, fh, args.namespace)
        os.replace(tmp, target)
    print(f"exported {counts['memory']} memories, {counts['archive']} archived, {counts['inbox']} in the inbox, "
          f"{counts['event']} events from {store.location}", file=sys.stderr)
    return 0


def _import_export(args: argparse.Namespace, store: Store) -> int:
    from .memory._transfer import KINDS, import_export  # start-up time

    with open(args.path, encoding="utf-8") as fh:
        got = import_export(store, fh, args.path, dry_run=args.dry_run)
    if args.json:
        print(json.dumps({"source": args.path, "target": store.location, "dry_run": args.dry_run,
                          "namespace_exported": got.namespace, "added": got.added, "already_there": got.already,
                          "events": got.events}, indent=2))
        return 0
    verb = "would add" if args.dry_run else "added"
    for kind in KINDS:
        print(f"{kind}: {verb} {got.added[kind]}, {got.already[kind]} already there")
    print(f"events: {got.events}; from namespace {got.namespace!r} -> {store.location}"
          f"{' (dry run: nothing written)' if args.dry_run else ''}")
    return 0


def cmd_import(args: argparse.Namespace, cfg: Config) -> int:
    """Other tools' memory files into this scope (the source files are only read), or a
    ``memwire export`` file."""
    from .memory._import import import_path  # start-up time
    from .memory._transfer import is_export  # start-up time

    # The scope written to, alone: "already there" means already in this directory, where the
    # memories would be written (the global scope is another scope).
    store = _scope(args, cfg)
    if os.path.isfile(args.path):
        with open(args.path, encoding="utf-8", errors="replace") as fh:
            if is_export(fh.readline()):
                return _import_export(args, store)
    report = import_path(args.path, store, format=args.format, dry_run=args.dry_run)
    base = Path(report.source)

    def shown(path: str) -> str:
        p = Path(path)
        name = str(p.relative_to(base)) if base.is_dir() and p.is_relative_to(base) else str(p)
        return name + os.sep if path.endswith(os.sep) else name  # a directory left out

    failed = [f for f in report.files if f.format == "?"]
    if args.json:
        files = [{"path": f.path, "format": f.format, "added": f.added, "merged": f.merged,
                  "superseded": f.superseded, "already_there": f.already, "skipped": dict(f.skipped),
                  "imports": f.imports, "problems": f.problems} for f in report.files]
        print(json.dumps({"source": report.source, "target": report.target, "dry_run": report.dry_run,
                          "added": report.added, "merged": report.merged, "superseded": report.superseded,
                          "already_there": report.already, "skipped": dict(report.skipped),
                          "files": files, "ignored": [{"path": p, "why": w} for p, w in report.ignored]},
                         ensure_ascii=False, indent=2))
        return 1 if failed else 0
    for f in report.files:
        if f in failed:
            print(f"{shown(f.path)}: not imported: {'; '.join(f.problems)}")
            continue
        print(f"{shown(f.path)} ({f.format}): {_counts(f, report.dry_run)}")
        for imp in f.imports:
            print(f"  {imp}: an import of CLAUDE.md, not followed (import that file on its own)")
        for problem in f.problems:
            print(f"  warning: {problem}")
    for path, why in report.ignored:
        print(f"{shown(path)}: left out ({why})")
    if not report.files:
        print(f"no memory files in {report.source}")
    total = _counts(report, report.dry_run)
    print(f"total: {total} -> {report.target}{' (dry run: nothing written)' if report.dry_run else ''}")
    return 1 if failed else 0


def cmd_trust(args: argparse.Namespace, cfg: Config) -> int:
    from ._trust import PROJECT_CONFIG, PROJECT_DIR, TrustFile  # start-up time

    trust = TrustFile(cfg.global_dir)
    if args.list:
        entries = trust.entries()
        if trust.problem:
            print(f"memwire: warning: {trust.path} is unreadable ({trust.problem}); nothing is trusted",
                  file=sys.stderr)
        _out(args, entries, [f"{e['status']:<9}  {e['path']}" for e in entries]
             or [f"nothing trusted yet ({trust.path})"])
        return 0
    path = Path(args.path or ".").expanduser()
    if args.revoke:
        removed = trust.revoke(path)
        _out(args, {"revoked": removed}, [f"revoked {r}" for r in removed]
             or [f"{path.resolve()} was not trusted; nothing to revoke"])
        return 0
    if not path.is_dir():
        raise MemwireError(f"trust: {path} is not a directory")
    digest = trust.trust(path)
    project = path.resolve()
    what = [str(PROJECT_DIR)] + ([f"{PROJECT_CONFIG} (sha256 {digest[:12]})"] if digest else [])
    _out(args, {"trusted": str(project), "config_sha256": digest, "trust_file": str(trust.path)},
         [f"trusted {project}: its {' and '.join(what)} are used from now on"
          + (f"; editing {PROJECT_CONFIG} ends the trust" if digest else "")])
    if digest:  # say now what the project config cannot do, rather than on every command
        try:
            kept, refused = restrict_project_config(_from_toml(project / PROJECT_CONFIG), f"{project / PROJECT_CONFIG}")
            make_config(kept, str(project / PROJECT_CONFIG))
        except ConfigError as exc:
            refused = [f"warning: {exc}"]
        for notice in refused:
            print(f"memwire: {notice}", file=sys.stderr)
    return 0


def _load_messages(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise MemwireError(f"{path}: cannot read messages JSON: {exc}") from None


_NO_BUDGET_MS = 24 * 3600 * 1000.0


def cmd_preview(args: argparse.Namespace, cfg: Config) -> int:
    from .middleware._core import Middleware  # start-up time

    if args.messages:
        data = _load_messages(args.messages)
        body = data if isinstance(data, dict) else {"messages": data}
    elif args.prompt:
        body = {"messages": [{"role": "user", "content": " ".join(args.prompt)}]}
    else:
        raise MemwireError("preview needs a prompt or --messages FILE.json")
    if args.model:
        body = {**body, "model": args.model}
    # A preview is a dry run: no replay ledger is written. For one request the output is the same,
    # since a new session has no earlier blocks to replay. Nobody waits on a provider here, so no
    # retrieval budget either: a cold start (loading the store, a token encoding) shows its result.
    mw = Middleware(store=_store(args, cfg), config=cfg, history="drop", timeout_ms=_NO_BUDGET_MS)
    p = mw.prepare_request(body, api=args.api, session_id=args.session, namespace=None)
    inj = p.injection
    why = _preview_why(mw, p)
    if args.json:
        print(_json_text({"body": p.body, "injection": asdict(inj) if inj else None, "why": why}))
        return 0
    print(f"mode: {mw.mode}   api: {args.api}")
    if inj is None or not inj.injected:
        print(_printable(f"nothing injected: {why['text']}"))
    else:
        print(f"injected {len(inj.memory_ids)} memories, {inj.tokens} tokens, {inj.elapsed_ms:.2f} ms "
              f"({inj.placement}{'' if inj.position is None else f' at {inj.position}'})")
        for m in why["memories"] if inj.mode != "startup" else ():
            print(_printable(f"  {m['id']}  {m['line']}"))
        if inj.mode == "startup":
            print(f"  ({_PROFILE})")
    if inj is not None and inj.profile_ids:
        print(f"profile block: {len(inj.profile_ids)} memories, {inj.profile_tokens} tokens "
              f"({_PROFILE})")
    print()
    if args.api == "anthropic.messages" and p.body.get("system"):
        print(f"[system] {_show(p.body['system'], inj)}")
    if args.api == "openai.responses" and p.body.get("instructions"):
        print(f"[instructions] {_show(p.body['instructions'], inj)}")
    items = p.messages if isinstance(p.messages, list) else [{"role": "user", "content": p.messages}]
    for i, m in enumerate(items):
        mark = ">>" if inj and inj.injected and inj.position == i else "  "
        role = m.get("role") or m.get("type") if isinstance(m, dict) else "?"
        print(f"{mark} [{i}] {role}: {_show(m.get('content') if isinstance(m, dict) else m, inj)}")
    return 0


_PROFILE = "the session's profile: pinned first, then by category; shown whatever the prompt"

# why nothing was injected, for each reason the middleware reports (``Injection.skipped``) but
# nothing_relevant, which the search explains (``_why``)
_SKIPPED = {
    "gate": 'the prompt is a social closer ("thanks", "ok", 👍): the gate skips retrieval for it',
    "side_request": "a side request (a client's own call for a title or a summary): memwire leaves it as it is",
    "stateful": "a stateful Responses call: the provider keeps the history, and the block went in with the "
                "session's first call",
}


def _preview_why(mw: Middleware, p: Prepared) -> dict[str, Any]:
    """Why the preview's request got the memories it got, or none: the reason the middleware gave
    (``Injection.skipped``), and for a search, what the search says of its hits or of finding none."""
    from .memory._why import explain_hits, why_nothing  # start-up time

    inj, q, cfg, store = p.injection, p.query, mw.config, mw.store
    if inj is None:
        return {"reason": "no_user_message", "text": "the request has no user message to retrieve for"}
    startup = inj.mode == "startup"
    if inj.injected:
        if startup or q is None:
            return {"memories": [{"id": mid, "line": _PROFILE, "via": "profile"} for mid in inj.memory_ids]}
        mems = store.known(inj.memory_ids)
        whys = explain_hits(store, q.text, mems, k=cfg.top_k, min_score=cfg.min_score, context=q.context,
                            exclude=inj.profile_ids)
        return {"memories": [{"id": w.id, "line": w.line(), **w.to_json()} for w in whys]}
    reason = inj.skipped or "nothing_relevant"
    if reason in _SKIPPED:
        text = _SKIPPED[reason]
    elif reason == "over_budget":
        setting = "startup_max_tokens" if startup else "max_tokens"
        text = f"memories were found, but none fits the block's token budget ({setting} = {getattr(cfg, setting)})"
    elif reason == "timeout":
        text = f"retrieval took longer than its time budget (timeout_ms = {cfg.timeout_ms:g})"
    elif reason == "error":
        text = f"retrieval failed ({inj.error}); the request goes out unchanged"
    elif reason == "nothing_relevant" and startup:
        text = "no memory for the session's profile" + ("" if len(store) else f": {store.location} holds none")
    elif reason == "nothing_relevant" and q is not None:
        nothing = why_nothing(store, q.text, min_score=cfg.min_score, context=q.context, exclude=inj.profile_ids,
                              lower="min_score = {0} (MEMWIRE_MIN_SCORE={0})")
        return {**nothing.to_json(), "skipped": reason}
    else:
        text = reason
    return {"reason": reason, "text": text, "skipped": reason}


def _show(content: Any, inj: Any) -> str:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if inj is not None and inj.text and inj.text in text:
        marked = "\n   ┌─ injected by memwire ─\n   │ " + inj.text.replace("\n", "\n   │ ") + "\n   └─\n"
        text = text.replace(inj.text, marked)
    return _printable(text)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a subcommand reports its unknown arguments itself, with its own usage
    and the nearest of its options ("did you mean --tag?"): argparse hands them back up to
    ``memwire``, which would show its own usage, not the subcommand's."""

    def __init__(self, *args: Any, top_options: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.top_options = tuple(top_options)  # memwire's own options; empty on memwire itself

    def add_subparsers(self, **kwargs: Any) -> Any:
        top = self.top_options or tuple(o for a in self._actions for o in a.option_strings if o.startswith("--"))
        kwargs.setdefault("parser_class", lambda **kw: _Parser(top_options=top, **kw))
        return super().add_subparsers(**kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self.top_options:  # a subcommand (argparse calls this for each): it says it itself
            self.error(self._unknown(extras))
        return parsed, extras

    def _unknown(self, extras: list[str]) -> str:
        known = [o for a in self._actions for o in a.option_strings]
        hints = []
        for arg in extras:
            name = arg.split("=", 1)[0]
            if not name.startswith("-") or name == "-":
                continue
            if name in self.top_options:
                hints.append(f"{name} is memwire's own option: give it before the command, as in "
                             f"memwire {name} ... {self.prog.removeprefix('memwire ')}")
                continue
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hints.append(f"did you mean {near[0]}?" if near else f"{self.prog} --help lists its options")
        return "; ".join([f"unrecognized arguments: {' '.join(extras)}", *hints])


def cmd_embeddings(args: argparse.Namespace, cfg: Config) -> int:
    """Distil (once) and check the static embeddings retrieval = "hybrid" uses (issue 32): stores
    never distil themselves, a request never waits for it."""
    from .memory._embed import load_static, prepare  # start-up time: numpy, tokenizers (this command only)

    model = args.model or cfg.embedding_model
    if not model:
        raise ConfigError("no model: give MODEL or set embedding_model (MEMWIRE_EMBEDDING_MODEL)")

    def progress(done: int, total: int) -> None:
        print(f"\rmemwire: distilling {done}/{total} tokens", end="\n" if done == total else "",
              file=sys.stderr, flush=True)

    static = prepare(model, None, progress, download=True)  # under $MEMWIRE_HOME, where the stores look
    emb = load_static(static)
    print(json.dumps({"model": str(model), "static": str(static), "dims": emb.dims}) if args.json
          else f"{model}: static embeddings in {static} ({emb.dims} dimensions)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memwire", description="Per-turn memory for LLM calls that keeps the prompt cache.")
    parser.add_argument("--config", help="path of your memwire.toml (default: $MEMWIRE_CONFIG, else ./memwire.toml "
                                         "once the directory is trusted: see `memwire trust`)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(
        p: argparse.ArgumentParser, json_flag: bool = True, keep_parent: bool = False,
    ) -> argparse.ArgumentParser:
        # keep_parent: a sub-subcommand's unset options must not overwrite its parent's (argparse would)
        unset: dict[str, Any] = {"default": argparse.SUPPRESS} if keep_parent else {}
        p.add_argument("--dir", help="memory directory (default: $MEMWIRE_DIR or ./.memwire)", **unset)
        p.add_argument("--namespace", help="namespace (its own directory: DIR/namespaces/NAME)", **unset)
        p.add_argument("--store", metavar="URL", help="a PostgreSQL store (postgresql://user@host/db) instead of "
                                                      "the directory (default: $MEMWIRE_STORE)", **unset)
        if json_flag:
            p.add_argument("--json", action="store_true", help="machine-readable output", **unset)
        return p

    p = common(sub.add_parser("add", help="add a memory"))
    p.add_argument("text", nargs="+", help="the memory text; '-' reads it from standard input")
    p.add_argument("--tag", "-t", action="append", help="a tag (repeatable)")
    p.add_argument("--pin", action="store_true", help="pin it (startup mode shows pinned memories first)")
    p.add_argument("--topic", help="the '## Topic' section to put it under")
    p.set_defaults(fn=cmd_add)

    p = common(sub.add_parser("list", help="list memories"))
    p.add_argument("--pinned", action="store_true", help="only pinned memories")
    p.set_defaults(fn=cmd_list)

    p = common(sub.add_parser("search", help="search memories"))
    p.add_argument("query", nargs="+")
    p.add_argument("-k", type=_k, default=5, help="how many memories at most, 1-100 (default 5)")
    p.add_argument("--min-score", type=_share, default=None, help="minimum score, 0-1")
    p.add_argument("--archive", action="store_true", help="search the archive (forgotten, superseded, decayed)")
    p.set_defaults(fn=cmd_search)

    p = common(sub.add_parser("forget", help="move a memory to the archive by id"))
    p.add_argument("id")
    p.set_defaults(fn=cmd_forget)

    p = common(sub.add_parser("restore", help="bring a memory back from the archive by id"))
    p.add_argument("id")
    p.set_defaults(fn=cmd_restore)

    p = common(sub.add_parser("history", help="a memory's values over time (superseded, merged), with dates"))
    p.add_argument("id", help="a memory id (or a unique prefix), current or archived")
    p.set_defaults(fn=cmd_history)

    p = common(sub.add_parser("dedupe", help="find memories that say the same thing; --apply proposes merges "
                                             "in the inbox",
                              description="Near-duplicate clusters of the active memories (the same values and "
                                          "subject in other words). --apply puts one merge per cluster in the "
                                          "review inbox (memwire inbox, the page, the memory API): approving it "
                                          "keeps the first memory and moves the others to the archive as #merged "
                                          "(restorable, linked to it), counted as reinforcements of the one kept; "
                                          "rejecting it leaves them, and that cluster is not proposed again. "
                                          "--apply --yes approves each merge at once (for scripts)."))
    p.add_argument("--apply", action="store_true", help="propose each merge in the inbox")
    p.add_argument("--yes", action="store_true", help="with --apply: approve the merges now (for scripts: "
                                                      "the same merge as an approval in the inbox)")
    p.set_defaults(fn=cmd_dedupe)

    p = common(sub.add_parser("conflicts", help="memories that may contradict each other, for you to resolve",
                              description="Pairs memwire kept both of because it could not tell whether the newer "
                                          "replaces the older. Only the newer is injected meanwhile."))
    p.add_argument("--keep", metavar="ID", help="keep this one: the ones it conflicts with go to the archive")
    p.add_argument("--both", action="store_true", help="with --keep: keep both, no longer in conflict")
    p.set_defaults(fn=cmd_conflicts)

    p = common(sub.add_parser("stats", help="per category: memories by state, injected, used, capacity; "
                                            "--requests: the real cache figures of proxied traffic"))
    p.add_argument("--requests", action="store_true",
                   help="per mode and provider: requests, injected, prompt tokens, cached share, cost units "
                        "(from --url, --log, or the requests the proxies kept in the store)")
    p.add_argument("--url", help="a running memwire proxy (its /metrics: every worker's figures)")
    p.add_argument("--log", help="a request log (memwire proxy --request-log FILE; default: proxy_request_log)")
    p.add_argument("--key", help="the proxy key for --url (default: MEMWIRE_PROXY_KEY / proxy_key)")
    p.set_defaults(fn=cmd_stats)

    p = common(sub.add_parser("stale", help="memories that are fading, for you to decide (--sweep archives)",
                              description="Memories whose stability fell to candidate or dropped, or over their "
                                          "category's cap. --sweep archives those that got in by themselves "
                                          "(captured, distilled, imported); yours are only listed."))
    p.add_argument("--sweep", action="store_true", help="archive what decayed or is over its cap now")
    p.set_defaults(fn=cmd_stale)

    p = common(sub.add_parser("pin", help="pin (or --unpin) a memory by id"))
    p.add_argument("id")
    p.add_argument("--unpin", action="store_true")
    p.set_defaults(fn=cmd_pin)

    p = common(sub.add_parser("inbox", help="captured memories waiting for review: list, approve, reject",
                              description="With capture = \"review\", what memwire captures from the traffic "
                                          "waits here and is never injected until approved. "
                                          "`memwire inbox` lists it."))
    p.set_defaults(fn=cmd_inbox, action=None, ids=[], all=False)
    review = p.add_subparsers(dest="action", metavar="approve|reject")
    for name, what in (("approve", "move to memory: injected from now on"),
                       ("reject", "move to the archive: not proposed again")):
        q = common(review.add_parser(name, help=what), keep_parent=True)
        q.add_argument("ids", nargs="*", metavar="ID", help="memory ids (or unique prefixes)")
        q.add_argument("--all", action="store_true", help="every memory in the inbox")

    p = common(sub.add_parser("import",
                              help="import other tools' memory files (Claude Code, pi) into a scope, read-only",
                              description="Read memory files of Claude Code (CLAUDE.md, ~/.claude/projects/<project>/"
                                          "memory/), pi-memory (MEMORY.md), pi-memory-md and pi's topic files, or "
                                          "another memwire directory, and add what they hold to this scope, tagged "
                                          "#imported; or a file of `memwire export`, whole. The source files are "
                                          "never changed; importing again adds nothing new."))
    p.add_argument("path", help="a memory file or a directory of them")
    p.add_argument("--format", default="auto", choices=["auto", "claude", "pi", "pi-md", "pi-topics", "memwire"],
                   help="the files' format (default: auto, detected per file)")
    p.add_argument("--dry-run", action="store_true", help="report what would be imported; write nothing")
    p.set_defaults(fn=cmd_import)

    p = common(sub.add_parser("export", help="write a namespace, whole, to one file (memwire import reads it back)",
                              description="Write the memories of a namespace, its archive, its inbox, their "
                                          "lifecycle records and its event logs as JSON Lines: to move it between "
                                          "a memory directory and PostgreSQL, or to keep a copy. "
                                          "`memwire import FILE` reads it back."))
    p.add_argument("-o", "--output", help="the file to write (default: standard output)")
    p.set_defaults(fn=cmd_export)

    p = common(sub.add_parser("preview", help="show the request as it would reach the provider"))
    p.add_argument("prompt", nargs="*", help="a user prompt")
    p.add_argument("--messages", help="a JSON file: a message list or a whole request body")
    p.add_argument("--api", default="openai.chat", choices=["openai.chat", "anthropic.messages", "openai.responses"])
    p.add_argument("--mode", help=f"one of {', '.join(MODES)}")
    p.add_argument("--model", help="target model (selects the token encoding)")
    p.add_argument("--session", help="session id")
    p.set_defaults(fn=cmd_preview)

    p = sub.add_parser("trust", help="use this directory's .memwire and memwire.toml (they are ignored until trusted)",
                       description="A project's ./.memwire and ./memwire.toml (a cloned repository's, say) are "
                                   "ignored until you trust the directory. The trust is recorded in "
                                   "trusted.json in the memwire home and ends when memwire.toml changes. "
                                   "See docs/trust.md.")
    p.add_argument("path", nargs="?", help="the project directory (default: the working directory)")
    p.add_argument("--list", action="store_true", help="list trusted directories and their status")
    p.add_argument("--revoke", action="store_true", help="stop trusting PATH (default: the working directory)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(fn=cmd_trust)

    p = sub.add_parser("embeddings", help="distil a model's static embeddings for retrieval = \"hybrid\" (once)",
                       description="retrieval = \"hybrid\" needs static embeddings: a model2vec directory is used as "
                                   "it is; a sentence-transformers model's are distilled once (minutes) and cached "
                                   "under $MEMWIRE_HOME/embeddings. Stores never distil on a request.")
    p.add_argument("model", nargs="?", help="the model directory, or a hub name (owner/name) to download "
                                            "(default: the embedding_model setting)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(fn=cmd_embeddings)

    proxy_cli.register(sub)
    keys_cli.register(sub)  # memwire keys: the proxy's client keys
    mcp_cli.register(sub)
    demo_cli.register(sub)
    return parser


# commands that write to the project directory, creating it when missing
_CREATES_DIR = ("add", "import", "proxy", "mcp")


def _trusted_config(args: argparse.Namespace, overrides: dict[str, Any]) -> Config:
    """The config after the trust check (memwire/trust.py): an untrusted ./.memwire or
    ./memwire.toml is ignored, said in one line. A project directory this command is about to
    create is created now and recorded as memwire's, so later commands use it without `trust`."""
    from ._trust import create_project_dir, resolve_config  # start-up time

    res = resolve_config(args.config, **overrides)
    in_database = (getattr(args, "store", None) or res.config.store) and not getattr(args, "dir", None)
    if (res.missing_dir is not None and args.command in _CREATES_DIR and not getattr(args, "dry_run", False)
            and not in_database):  # a PostgreSQL store needs no directory
        warning = create_project_dir(res.missing_dir, res.config.global_dir)
        res.notices.extend([warning] if warning else [])
    if args.command != "demo":  # the demo uses a memory of its own
        for notice in res.notices:
            print(f"memwire: {notice}", file=sys.stderr)
    return res.config


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 1
    try:
        overrides: dict[str, Any] = {}
        for key in ("mode", "history", "capture", "retrieval"):
            if getattr(args, key, None):
                overrides[key] = getattr(args, key)
        if getattr(args, "dir", None):
            overrides["dir"] = args.dir
        if args.fn is cmd_trust:  # the person's own settings only: a project config cannot break `trust`
            cfg = load_config(args.config, project_config=False, **overrides)
        else:
            cfg = _trusted_config(args, overrides)
        return int(args.fn(args, cfg) or 0)
    except MemwireError as exc:
        print(_printable(f"memwire: error: {exc}"), file=sys.stderr)  # it may quote a file's line or a value
        return 2
    except OSError as exc:  # a full disk, a permission: the person's to fix, in one line
        print(_printable(f"memwire: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
