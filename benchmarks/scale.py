"""memwire on PostgreSQL at scale: replicas of ``memwire proxy`` on one database of many namespaces.

    python benchmarks/scale.py                  # 3 replicas, 10,000 namespaces x 200 memories (2M)
    python benchmarks/scale.py --quick          # 200 namespaces: checks the script works (a minute)
    python benchmarks/scale.py --keep           # keep the database afterwards; --reuse seeds nothing

What it does, on this machine (every process on 127.0.0.1, sharing its cores):

1. Creates a fresh database (``--db``, default ``memwire_scale``) on the PostgreSQL server
   ``--server`` and seeds it: ``--namespaces`` namespaces of ``--memories`` memories each,
   varied developer facts from benchmarks/scale_data.py (fixed seed), written by ``--seeders``
   processes calling ``PgStore.add_many`` once per namespace (then its metadata): the seeding rate.
2. Starts a fake OpenAI upstream (benchmarks/proxy.py's, with an echo for the propagation probe)
   and ``--replicas`` real ``memwire proxy --workers 1`` processes with ``MEMWIRE_STORE`` set to
   the database, in contextPerTurn mode with replay. Requests go round-robin over the replicas, as
   a load balancer without sticky sessions would send them: one conversation's turns land on
   different replicas. Every request is a new turn (retrieval runs), in a random namespace and
   session. A namespace is *warm* on a replica that holds it: one of the ``--hot`` namespaces,
   loaded on every replica first (a process caches the 256 namespaces it used last, so keep
   ``--hot`` well under that). It is *cold* on its first request there: the replica then loads its
   memories and metadata from the database.
3. Prints: the added latency (p50/p99, proxied minus the same requests sent straight to the
   upstream) with 1 and ``--clients`` concurrent clients, warm and cold apart; requests/s across
   the replicas (warm, and cold: every request a namespace the replica never served) with the CPU
   the replicas and the PostgreSQL server spent per request; the time from a memory added on one
   replica (memory API) until a request on another injects it; the RSS a replica grows by per
   namespace it holds, and its RSS as it serves ever more namespaces (``--fill``); what the
   database holds per memory, and how its ledgers and events grew with the requests.

Nothing is asserted. The PostgreSQL server is shared with whatever else runs on it: its CPU figure
counts every database on the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_data as data  # noqa: E402
from proxy import (MODEL, SYSTEM, TURNS, _read_response, cpu_seconds, free_port, pct, request_body, stop,  # noqa: E402
                   upstream_app, wait_ready)

SEED = 7
PROBE = b"scale-probe"  # a request asking for the propagation probe's memory
SEEN = re.compile(rb"seen-[0-9a-f]+")  # the probe memory's mark, as the upstream finds it in a request
# in every session id: a database kept from an earlier run (--keep, --reuse) holds that run's
# ledgers, and a turn found there is replayed, not retrieved
RUN = secrets.token_hex(3)


def ns_name(number: int) -> str:
    return f"team{number:05d}"


# -------------------------------------------------------------------- the upstream (child process)


async def echo_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """benchmarks/proxy.py's canned upstream; a propagation probe is answered with the marks of
    probe memories found in the request (what memwire injected)."""
    if scope["type"] != "http":
        return
    body = await request_body(receive)
    if PROBE not in body:
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await upstream_app(scope, replay, send)
        return
    seen = " ".join(m.decode() for m in SEEN.findall(body)) or "none"
    payload = json.dumps({"id": "chatcmpl-probe", "object": "chat.completion", "created": 1_700_000_000,
                          "model": MODEL, "choices": [{"index": 0, "finish_reason": "stop",
                                                       "message": {"role": "assistant", "content": seen}}],
                          "usage": {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


def serve_upstream(port: int) -> None:
    import uvicorn

    uvicorn.run(echo_upstream, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


# -------------------------------------------------------------------- the database


def admin(server: str) -> Any:
    import psycopg

    return psycopg.connect(f"{server}/postgres", autocommit=True)


def create_database(server: str, db: str, reuse: bool) -> bool:
    """A fresh database ``db`` (dropped first), or the one there with ``reuse``: whether it existed."""
    with admin(server) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone() is not None
        if exists and reuse:
            return True
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')
    return False


def drop_database(server: str, db: str) -> None:
    with admin(server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def seed_namespaces(url: str, numbers: list[int], count: int) -> int:
    """In a seeding process: each namespace's memories in one ``add_many``, then its metadata."""
    from memwire.memory._model import Memory
    from memwire.memory.postgres._store import PgStore

    for n in numbers:
        store = PgStore(url, ns_name(n))
        store.add_many([Memory.create(text, (tag,), i < 2, topic)  # two pinned, as people pin a few
                        for i, (text, topic, tag) in enumerate(data.facts(SEED, n, count))])
        store.lifecycle.flush()
    return len(numbers) * count


def seed(url: str, namespaces: int, memories: int, processes: int) -> tuple[int, float]:
    """Seed the database with ``processes`` processes: (memories written, seconds)."""
    import psycopg

    from memwire.memory.postgres import _pg

    with psycopg.connect(url) as conn:  # the schema first, so the seeders do not queue on its lock
        _pg.migrate(conn)
    chunk = 25
    batches = [list(range(i, min(i + chunk, namespaces))) for i in range(0, namespaces, chunk)]
    done, shown, start = 0, 0, time.perf_counter()
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        for future in as_completed([pool.submit(seed_namespaces, url, b, memories) for b in batches]):
            done += future.result()
            if done * 10 // (namespaces * memories) > shown:
                shown = done * 10 // (namespaces * memories)
                rate = done / (time.perf_counter() - start)
                print(f"  seeded {done:,} memories ({rate:,.0f}/s)", file=sys.stderr, flush=True)
    took = time.perf_counter() - start
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")  # what autovacuum would do soon after such a load
    return done, took


def count_memories(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM memwire_memories WHERE kind = 'memories' AND NOT deleted").fetchone()
    return int(row[0]) if row else 0


def table_sizes(url: str) -> list[tuple[str, int, int, int]]:
    """(table, rows, table bytes, index bytes) of every memwire table."""
    import psycopg

    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = 'public' AND c.relname LIKE 'memwire%' ORDER BY 1").fetchall()]
        out = []
        for t in tables:
            rows, tbytes, ibytes = conn.execute(f"SELECT (SELECT count(*) FROM {t}), pg_table_size('{t}'), "
                                                f"pg_indexes_size('{t}')").fetchone() or (0, 0, 0)
            out.append((t, rows, tbytes, ibytes))
        return out


def server_info(server: str) -> tuple[str, int]:
    """PostgreSQL's version, and the pid of its postmaster (every server process is under it)."""
    with admin(server) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    stat = Path(f"/proc/{backend}/stat").read_text()
    return version, int(stat.rsplit(")", 1)[1].split()[1])


# -------------------------------------------------------------------- the replicas


def start_replica(workdir: Path, url: str, upstream: str, port: int, number: int) -> subprocess.Popen[bytes]:
    """The real ``memwire proxy`` command on the database (``MEMWIRE_STORE``), one worker."""
    home = workdir / f"replica{number}"
    home.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMWIRE_")},
           "MEMWIRE_HOME": str(home / "home"), "MEMWIRE_STORE": url, "MEMWIRE_HISTORY": "replay"}
    with open(workdir / f"replica{number}.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "memwire.cli", "proxy", "--port", str(port), "--openai-upstream", upstream,
             "--mode", "contextPerTurn", "--workers", "1"], cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -------------------------------------------------------------------- requests

Item = tuple[int, bytes, str, int]  # (port, request bytes, "warm" or "cold", namespace number)


def raw_request(body: dict[str, Any], namespace: str, session: str) -> bytes:
    data_ = json.dumps(body).encode()
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-upstream-fake\r\n"
            f"Content-Type: application/json\r\nx-memwire-namespace: {namespace}\r\nx-memwire-session: {session}\r\n"
            f"Content-Length: {len(data_)}\r\n\r\n").encode() + data_


class Client:
    """One client's conversations, one open per namespace at most: each request is the next turn
    of one (a new conversation after ``TURNS`` turns, or one time in four)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.r = random.Random(f"{SEED}:{name}")
        self.chats: dict[int, tuple[str, list[dict[str, Any]]]] = {}
        self.sessions = 0

    def request(self, number: int) -> bytes:
        chat = self.chats.get(number)
        if chat is None or len(chat[1]) > 2 * TURNS or self.r.random() < 0.25:
            self.sessions += 1
            chat = self.chats[number] = (f"{RUN}-{self.name}-{self.sessions}", [{"role": "system", "content": SYSTEM}])
        session, messages = chat
        _, projects, _ = data.team(SEED, number)
        messages.append({"role": "user", "content": f"{data.question(self.r, projects)} (#{len(messages) // 2 + 1})"})
        out = raw_request({"model": MODEL, "messages": list(messages)}, ns_name(number), session)
        messages.append({"role": "assistant", "content": self.r.choice(data.REPLIES)})
        return out


class Tenants:
    """Which namespaces each replica holds: ``hot`` ones are loaded on every replica by the warm-up;
    ``fresh[i]`` are the ones replica ``i`` has not loaded yet (each taken once, for a cold request)."""

    def __init__(self, namespaces: int, hot: int, replicas: int) -> None:
        self.hot = list(range(hot))
        self.fresh = []
        for i in range(replicas):
            rest = list(range(hot, namespaces))
            random.Random(f"{SEED}:fresh:{i}").shuffle(rest)
            self.fresh.append(deque(rest))
        self.loaded = [hot] * replicas

    def unload(self, replica: int, number: int) -> None:
        self.fresh[replica].appendleft(number)
        self.loaded[replica] -= 1

    def cold(self, replica: int) -> int | None:
        if not self.fresh[replica]:
            return None
        self.loaded[replica] += 1
        return self.fresh[replica].popleft()


def plans(clients: list[Client], ports: list[int], tenants: Tenants, per_client: int, cold_share: float,
          offset: int = 0) -> list[list[Item]]:
    """Each client's next ``per_client`` requests, round-robin over the replicas; a share of them
    cold (a namespace the replica has not loaded), the rest in the hot namespaces."""
    out = []
    for c, client in enumerate(clients):
        items: list[Item] = []
        for i in range(per_client):
            replica = (c + i + offset) % len(ports)
            number = tenants.cold(replica) if client.r.random() < cold_share else None
            kind = "cold" if number is not None else "warm"
            if number is None:
                number = client.r.choice(tenants.hot)
            items.append((ports[replica], client.request(number), kind, number))
        out.append(items)
    return out


async def _run(work: list[list[Item]], deadline: float | None) -> list[tuple[Item, float]]:
    async def one(items: list[Item]) -> list[tuple[Item, float]]:
        conns: dict[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        out = []
        try:
            for item in items:
                port, raw = item[:2]
                if deadline is not None and time.perf_counter() > deadline:
                    break
                if port not in conns:
                    conns[port] = await asyncio.open_connection("127.0.0.1", port)
                reader, writer = conns[port]
                start = time.perf_counter()
                writer.write(raw)
                status = await _read_response(reader)
                if status != 200:
                    raise RuntimeError(f"port {port}: HTTP {status}")
                out.append((item, (time.perf_counter() - start) * 1000))
        finally:
            for _, writer in conns.values():
                writer.close()
        return out

    return [x for part in await asyncio.gather(*(one(items) for items in work)) for x in part]


def run(work: list[list[Item]], seconds: float | None = None) -> tuple[list[tuple[Item, float]], float]:
    """Send each client's items on its own keep-alive connections (for ``seconds`` at most): each
    item sent with its ms, and the seconds it took."""
    start = time.perf_counter()
    got = asyncio.run(_run(work, start + seconds if seconds else None))
    return got, time.perf_counter() - start


def to(port: int, work: list[list[Item]]) -> list[list[Item]]:
    """The same requests, all sent to ``port`` (the upstream ignores memwire's headers)."""
    return [[(port, *item[1:]) for item in items] for items in work]  # type: ignore[misc]


# -------------------------------------------------------------------- the measurements


def latency(clients: list[Client], ports: list[int], direct: int, tenants: Tenants, requests: int,
            cold_share: float, rounds: int) -> tuple[list[float], dict[str, list[float]]]:
    """Direct and proxied latency of the same requests, in interleaved rounds."""
    straight: list[float] = []
    proxied: dict[str, list[float]] = {"warm": [], "cold": []}
    per_client = max(1, requests // len(clients) // rounds)
    for r in range(rounds):
        work = plans(clients, ports, tenants, per_client, cold_share, offset=r)
        order = ["direct", "proxy"] if r % 2 == 0 else ["proxy", "direct"]
        for which in order:
            got, _ = run(to(direct, work) if which == "direct" else work)
            for item, took in got:
                (straight.append(took) if which == "direct" else proxied[item[2]].append(took))
    return straight, proxied


def throughput(clients: list[Client], ports: list[int], tenants: Tenants, seconds: float, cold: bool,
               pids: list[int], postmaster: int, rate_cap: int) -> tuple[int, float, float, float]:
    """Requests/s for ``seconds`` across ``ports``: (requests, seconds, replica CPU ms/request,
    PostgreSQL CPU ms/request)."""
    per_client = max(1, int(seconds * rate_cap / len(clients)))
    work = plans(clients, ports, tenants, per_client, 1.0 if cold else 0.0)
    if cold:  # only the cold ones (a replica out of fresh namespaces gives warm ones)
        work = [[item for item in items if item[2] == "cold"] for items in work]
    c0 = sum(cpu_seconds(p) for p in pids)
    g0 = cpu_seconds(postmaster)
    got, took = run(work, seconds)
    sent = {id(item) for item, _ in got}
    for items in work:  # cold namespaces planned but not sent are still fresh on their replica
        for item in reversed(items):
            if item[2] == "cold" and id(item) not in sent:
                tenants.unload(ports.index(item[0]), item[3])
    cpu = (sum(cpu_seconds(p) for p in pids) - c0) * 1000
    pg = (cpu_seconds(postmaster) - g0) * 1000
    return len(got), took, cpu / max(1, len(got)), pg / max(1, len(got))


def propagation(bases: list[str], tenants: Tenants, trials: int, timeout: float) -> tuple[list[float], list[float]]:
    """Add a memory on replica A (memory API), then ask replica B (a new turn each time, sent back
    to back) until the upstream sees the memory in a request: ms from A's answer to B's, and ms of
    A's add."""
    took, adds = [], []
    with httpx.Client(timeout=30, trust_env=False) as http:
        for t in range(trials):
            a, b = t % len(bases), (t + 1) % len(bases)
            number = tenants.hot[t % len(tenants.hot)]
            tag = secrets.token_hex(4)
            headers = {"x-memwire-namespace": ns_name(number), "authorization": "Bearer sk-upstream-fake"}
            for base in (bases[a], bases[b]):  # both hold the namespace (an evicted one would load whole)
                http.post(base + "/v1/chat/completions", headers={**headers, "x-memwire-session": f"warm-{tag}"},
                          json={"model": MODEL, "messages": [{"role": "user", "content": f"warm up {base}"}]})
            text = f"The release train of project zq{tag} leaves from platform seen-{tag}"
            question = f"{PROBE.decode()}: where does the release train of project zq{tag} leave from?"
            start = time.perf_counter()
            r = http.post(bases[a] + "/memwire/v1/memories", json={"text": text}, headers=headers)
            acked = time.perf_counter()
            if r.status_code not in (200, 201):
                raise RuntimeError(f"add on replica {a}: HTTP {r.status_code}: {r.text[:300]}")
            adds.append((acked - start) * 1000)
            polls = 0
            while True:
                polls += 1
                body = {"model": MODEL, "messages": [{"role": "system", "content": SYSTEM},
                                                     {"role": "user", "content": f"{question} ({polls})"}]}
                reply = http.post(bases[b] + "/v1/chat/completions", json=body,
                                  headers={**headers, "x-memwire-session": f"probe-{tag}-{polls}"})
                if reply.status_code != 200:
                    raise RuntimeError(f"probe on replica {b}: HTTP {reply.status_code}: {reply.text[:300]}")
                if f"seen-{tag}" in reply.json()["choices"][0]["message"]["content"]:
                    took.append((time.perf_counter() - acked) * 1000)
                    break
                if time.perf_counter() - acked > timeout:
                    raise RuntimeError(f"replica {b} did not inject a memory added on replica {a} "
                                       f"within {timeout:g} s")
    return took, adds


def fill(clients: list[Client], port: int, replica: int, tenants: Tenants, pid: int, steps: list[int]) -> list[tuple[int, float, float]]:
    """Replica ``replica`` serves namespaces it never served, one cold request each, until it has
    served ``steps[0]``, then ``steps[1]``...: (namespaces served, RSS MB, seconds of the step) at
    the start and after each step."""
    out = [(tenants.loaded[replica], rss_mb(pid), 0.0)]
    for target in steps:
        work: list[list[Item]] = [[] for _ in clients]
        i = 0
        while tenants.loaded[replica] < target:
            number = tenants.cold(replica)
            if number is None:
                break
            work[i % len(clients)].append((port, clients[i % len(clients)].request(number), "cold", number))
            i += 1
        if not i:
            break
        _, took = run(work)
        out.append((tenants.loaded[replica], rss_mb(pid), took))
    return out


# -------------------------------------------------------------------- report


def ms(values: list[float]) -> str:
    return f"{pct(values, 0.5):7.2f} {pct(values, 0.99):8.2f}" if values else f"{'-':>7} {'-':>8}"


def latency_table(label: str, straight: list[float], proxied: dict[str, list[float]]) -> None:
    d50, d99 = pct(straight, 0.5), pct(straight, 0.99)
    print(f"{label}")
    print(f"  {'':<18} {'n':>5} {'p50 ms':>7} {'p99 ms':>8} {'added p50':>10} {'added p99':>10}")
    print(f"  {'direct (upstream)':<18} {len(straight):>5} {ms(straight)}")
    for kind in ("warm", "cold"):
        v = proxied[kind]
        if v:
            print(f"  {'memwire ' + kind:<18} {len(v):>5} {ms(v)} {pct(v, 0.5) - d50:>+10.2f} {pct(v, 0.99) - d99:>+10.2f}")


def size_table(rows: list[tuple[str, int, int, int]], memories: int) -> None:
    print(f"  {'table':<26} {'rows':>11} {'table MB':>9} {'index MB':>9} {'B/memory':>9}")
    total = 0
    for name, count, tbytes, ibytes in rows:
        total += tbytes + ibytes
        print(f"  {name:<26} {count:>11,} {tbytes / 2**20:>9.1f} {ibytes / 2**20:>9.1f} "
              f"{(tbytes + ibytes) / max(1, memories):>9.0f}")
    print(f"  {'all memwire tables':<26} {'':>11} {'':>9} {total / 2**20:>9.1f} {total / max(1, memories):>9.0f}")


# -------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432", help="the PostgreSQL server")
    parser.add_argument("--db", default="memwire_scale", help="the database to create (dropped first)")
    parser.add_argument("--keep", action="store_true", help="keep the database at the end")
    parser.add_argument("--reuse", action="store_true", help="use the database as it is, when it exists (no seeding)")
    parser.add_argument("--namespaces", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=200, help="memories per namespace")
    parser.add_argument("--seeders", type=int, default=4, help="seeding processes")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--hot", type=int, default=128,
                        help="namespaces loaded on every replica before measuring (a replica keeps 256 at most)")
    parser.add_argument("--requests", type=int, default=600, help="requests per latency scenario")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (latency and requests/s)")
    parser.add_argument("--cold-share", type=float, default=0.2, help="share of latency requests that are cold")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds, direct and proxied")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load per requests/s figure")
    parser.add_argument("--trials", type=int, default=20, help="propagation trials")
    parser.add_argument("--fill", type=int, default=2000,
                        help="namespaces one replica has served at the end, for its RSS (0: skip)")
    parser.add_argument("--quick", action="store_true", help="200 namespaces and short runs: does the script work")
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)  # child process mode
    if "--quick" in sys.argv:  # smaller defaults; flags given still win
        parser.set_defaults(namespaces=200, hot=20, requests=120, seconds=3.0, trials=5, rounds=2, fill=200)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return 0
    if args.namespaces <= args.hot:
        parser.error("--namespaces must be more than --hot")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    url = f"{args.server}/{args.db}"
    version, postmaster = server_info(args.server)
    print(f"$ {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, "
          f"Python {sys.version.split()[0]}, PostgreSQL {version}; every process (client, upstream, replicas, "
          f"PostgreSQL) on these cores; load average {os.getloadavg()[0]:.1f} at the start\n")

    existed = create_database(args.server, args.db, args.reuse)
    try:
        if existed:
            print(f"seeding: skipped (--reuse: {count_memories(url):,} memories in {args.db})")
        else:
            done, took = seed(url, args.namespaces, args.memories, args.seeders)
            print(f"seeding: {done:,} memories in {args.namespaces:,} namespaces in {took:.1f} s = {done / took:,.0f} "
                  f"memories/s ({args.seeders} processes, PgStore.add_many once per namespace, then its metadata)")
        memories = count_memories(url)
        print("database after seeding:")
        size_table(table_sizes(url), memories)
        print()
        return measure(args, url, memories, postmaster)
    finally:
        if not args.keep:
            drop_database(args.server, args.db)


def measure(args: argparse.Namespace, url: str, memories: int, postmaster: int) -> int:
    with tempfile.TemporaryDirectory(prefix="memwire-scale-") as tmp:
        workdir = Path(tmp)
        upstream_port = free_port()
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs.append(subprocess.Popen([sys.executable, __file__, "--serve-upstream", str(upstream_port)]))
            wait_ready(f"http://127.0.0.1:{upstream_port}/health", procs[-1], 30)
            ports = [free_port() for _ in range(args.replicas)]
            replicas = [start_replica(workdir, url, f"http://127.0.0.1:{upstream_port}", p, i) for i, p in enumerate(ports)]
            procs += replicas
            for proc, port in zip(replicas, ports):
                wait_ready(f"http://127.0.0.1:{port}/health", proc, 90)
            pids = [p.pid for p in replicas]
            started = [rss_mb(p) for p in pids]
            tenants = Tenants(args.namespaces, args.hot, args.replicas)
            one = [Client("one")]
            many = [Client(f"c{i}") for i in range(args.clients)]
            t0 = time.perf_counter()
            run([[(port, one[0].request(n), "cold", n) for n in tenants.hot] for port in ports])  # the warm-up
            took = time.perf_counter() - t0
            grown = [rss_mb(p) - m for p, m in zip(pids, started)]
            print(f"{args.replicas} replicas (`memwire proxy --workers 1` each: on {os.cpu_count()} cores one "
                  f"process per replica, as a replica per machine would be); {args.hot} hot namespaces loaded on "
                  f"each in {took:.1f} s (one request each, every replica in turn)")
            print(f"replica RSS: {', '.join(f'{m:.0f}' for m in started)} MB at start, "
                  f"{', '.join(f'{rss_mb(p):.0f}' for p in pids)} MB with {args.hot} namespaces loaded: "
                  f"{sum(grown) / len(grown) * 1024 / args.hot:.0f} KB per namespace of {args.memories} memories "
                  f"(memories, BM25 index, metadata, one conversation's ledger view)\n")

            print(f"added latency: every request a new turn (retrieval runs) of a random conversation in a random "
                  f"namespace, round-robin over the replicas; {args.cold_share:.0%} cold (the namespace's first "
                  f"request on that replica), the rest in the {args.hot} hot namespaces; the same requests sent "
                  f"straight to the fake upstream for 'direct'; {args.rounds} interleaved rounds")
            latency_table("1 client", *latency(one, ports, upstream_port, tenants, args.requests, args.cold_share,
                                              args.rounds))
            latency_table(f"{args.clients} concurrent clients",
                          *latency(many, ports, upstream_port, tenants, args.requests * 2, args.cold_share, args.rounds))
            print()

            print(f"requests/s: {args.clients} clients on keep-alive connections for {args.seconds:g} s, every request "
                  f"a new turn; CPU per request of the {args.replicas} replicas together and of the PostgreSQL server")
            print(f"  {'':<34} {'req/s':>7} {'replicas CPU ms/req':>20} {'PostgreSQL CPU ms/req':>22}")
            n, took, _, _ = throughput(many, [upstream_port], tenants, args.seconds, False, [], postmaster, 4000)
            print(f"  {'direct (fake upstream)':<34} {n / took:>7.0f}")
            for cold in (False, True):
                n, took, cpu, pg = throughput(many, ports, tenants, args.seconds, cold, pids, postmaster,
                                              800 if not cold else 300)
                label = "memwire, cold namespaces" if cold else "memwire, hot namespaces"
                print(f"  {label:<34} {n / took:>7.0f} {cpu:>20.2f} {pg:>22.2f}")
            print()

            bases = [f"http://127.0.0.1:{p}" for p in ports]
            took_ms, adds = propagation(bases, tenants, args.trials, 30.0)
            print(f"propagation: a memory added on replica A (POST /memwire/v1/memories), then requests to replica "
                  f"B back to back until one injects it; {args.trials} trials, hot namespaces")
            print(f"  add on A: p50 {pct(adds, 0.5):.1f} ms, p99 {pct(adds, 0.99):.1f} ms; from A's answer until B's "
                  f"request carried it: p50 {pct(took_ms, 0.5):.1f} ms, p99 {pct(took_ms, 0.99):.1f} ms, "
                  f"max {max(took_ms):.1f} ms\n")

            if args.fill:
                steps = list(range(tenants.loaded[0] + 500, args.fill, 500)) + [args.fill]
                series = fill(many[:4], ports[0], 0, tenants, pids[0], steps)
                print("one replica serving namespaces it never served (4 clients, one cold request each): "
                      "namespaces served -> its RSS")
                print("  " + ", ".join(f"{n:,} -> {m:.0f} MB" for n, m, _ in series)
                      + f"; {sum(t for *_, t in series[1:]):.1f} s for {series[-1][0] - series[0][0]:,} namespaces")
            print(f"replica RSS at the end: {', '.join(f'{rss_mb(p):.0f}' for p in pids)} MB, having served "
                  f"{', '.join(f'{x:,}' for x in tenants.loaded)} namespaces\n")
        finally:
            for proc in reversed(procs):
                stop(proc)
    print(f"database at the end ({memories:,} memories at the start; the ledgers and events grew with the requests):")
    size_table(table_sizes(url), count_memories(url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
