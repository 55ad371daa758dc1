"""Break important lines on purpose, one at a time, and print which test catches each breakage.

A test is worth what it catches. Each mutation below replaces one line of memwire's source (in a
copy of the committed tree: the working tree is never touched), runs the test suite with ``-x``,
and reports the first failing test, or SURVIVED when the whole suite still passes.

    python benchmarks/mutations.py            # all mutations (about 90 s each on 2 cores)
    python benchmarks/mutations.py --only 3 7 # some of them
    python benchmarks/mutations.py --check    # only that every mutation applies (no tests run)
    python benchmarks/mutations.py --only 5 -- -n 0 tests/policies  # pytest's arguments after --

Every chosen mutation must apply (its line found exactly once in the committed file) before any
test runs: one that does not (the code moved or changed) is named and the script exits 2, since
a breakage that is never made would otherwise count as caught. Likewise a run in which pytest ran
no test (a wrong path or option: exit 3, 4 or 5) is NOT RUN, not caught, and the script exits 1.
The tests first run once with no mutation: those that fail then (work in progress elsewhere) are
named and left out of every mutation's run, so a catch is a failure the mutation caused.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    what: str
    path: str
    old: str
    new: str


MUTATIONS = [
    Mutation("fail-open catch-all re-raises", "memwire/middleware/_core.py",
             "            return _unchanged(body, api, exc, mode or self.config.mode)",
             "            raise"),
    Mutation("inline retrieval budget not checked", "memwire/middleware/_core.py",
             "        if (time.perf_counter() - start) * 1000 > self.config.timeout_ms:",
             "        if False:"),
    Mutation("the caller's session id ignored", "memwire/middleware/_session.py",
             "    if given:\n        return str(given)", "    pass"),
    Mutation("tags in text not escaped", "memwire/memory/_markdown.py",
             '    text = re.sub(r"(^|\\s)#", r"\\1\\\\#", text).replace(', "    text = text.replace("),
    Mutation("block token budget not checked", "memwire/policies/modes/_render.py",
             "        if used + cost <= max_tokens:", "        if True:"),
    Mutation("replay position arithmetic ignores earlier blocks", "memwire/policies/modes/_context.py",
             "        position = view.latest_user + fmt.added_before(",
             "        position = view.latest_user + 0 * fmt.added_before("),
    Mutation("proxy re-serializes an unchanged body", "memwire/adapters/server/_proxy.py",
             "the caller's exact bytes go upstream\n            return raw\n",
             "the caller's exact bytes go upstream\n            return dump_json(body)\n"),
    Mutation("proxy fail-open path raises", "memwire/adapters/server/_proxy.py",
             "            return (*_unchanged(raw, exc), model)", "            raise"),
    Mutation("side requests get memory", "memwire/middleware/_core.py",
             'if self.config.side_requests == "skip" and is_side_request(', "if False and is_side_request("),
    Mutation("harness wrappers not stripped", "memwire/policies/_human_text.py",
             "    kept = [t for t in (strip_wrappers(p) for p in parts) if t]", "    kept = [t for t in parts if t]"),
    Mutation("query not capped", "memwire/policies/_query.py",
             "MAX_QUERY_CHARS = 4000", "MAX_QUERY_CHARS = 10**9"),
    Mutation("memory text not escaped in the block", "memwire/policies/modes/_render.py",
             '    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")', "    return text"),
    Mutation("over_budget reported as nothing_relevant", "memwire/policies/modes/_render.py",
             '        return Block(skipped="over_budget")', '        return Block(skipped="nothing_relevant")'),
    Mutation("lock order reversed for pin/forget", "memwire/memory/_store_write.py",
             "        with d.write_lock():\n            with self._lock:\n"
             "                self.refresh()\n                name = d.find(full)",
             "        with self._lock, d.write_lock():\n            if True:\n"
             "                self.refresh()\n                name = d.find(full)"),
    Mutation("an inline request waits for the store's lock", "memwire/policies/modes/_base.py",
             "exclude=exclude, refresh=fresh, wait=fresh)", "exclude=exclude, refresh=fresh, wait=True)"),
    Mutation("late hand appends not carried over", "memwire/memory/_store_files.py",
             "    done, quiet = read, 0\n", "    return\n    done, quiet = read, 0\n"),
    Mutation("symlinks inside the memory directory are followed", "memwire/_paths.py",
             "        if stat.S_ISLNK(st.st_mode):\n            raise MemoryFileError(at, None, SYMLINK)",
             "        if False:\n            raise MemoryFileError(at, None, SYMLINK)"),
    Mutation("rewrites reset permissions", "memwire/memory/_store_files.py",
             "            os.fchmod(fd, stat.S_IMODE(mode))", "            pass"),
    Mutation("ids back to 40 bits", "memwire/memory/_model.py", "ID_CHARS = 20", "ID_CHARS = 10"),
    Mutation("id collisions hide a memory", "memwire/memory/_store_files.py",
             '            mid = longer_id(mem, out[mid], f"{path}:{e.first_line}")', "            pass"),
    Mutation("a listing is trusted before its files are loaded", "memwire/memory/_store_files.py",
             "        if found != self.sigs:\n            return False\n        if listed is not None:\n"
             "            self._dir_sig = listed\n",
             "        if listed is not None:\n            self._dir_sig = listed\n        if found != self.sigs:\n"
             "            return False\n"),
    Mutation("an empty turn never looks again", "memwire/policies/modes/_render.py",
             "        return self.looked_at is not None and not self.ids and", "        return False and"),
    Mutation("the social-closer gate lets closers through", "memwire/policies/_gate.py",
             '    return GateDecision(True, user_text, "gate")', "    return GateDecision(False, user_text)"),
    Mutation("message identity from raw blocks", "memwire/middleware/formats/_base.py",
             'if isinstance(p, Mapping) and p.get("type") in self.text_types and isinstance(p.get("text"), str):',
             "if False:"),
    Mutation("a stateful Responses call goes through the replay ledger", "memwire/policies/modes/_context.py",
             "        replay = None if stateful else self.replay", "        replay = self.replay"),
    Mutation("startup injects into a stateful call again", "memwire/policies/modes/_startup.py",
             "        if turn.view.stateful:", "        if False:"),
    Mutation("replay never compacts", "memwire/policies/modes/_replay.py",
             "        if total + block.tokens > self.max_tokens:", "        if False:"),
    Mutation("a forgotten memory stays in replayed blocks", "memwire/policies/modes/_replay.py",
             "            if gone.intersection(e.ids):", "            if False:"),
    Mutation("a merged block goes before the tool results", "memwire/middleware/formats/_base.py",
             "        n = self._kept_first(parts)", "        n = 0"),
    Mutation("capture reads every request of a turn", "memwire/middleware/_capture.py",
             "        if self._seen.setdefault(key, mine) is not mine:", "        if False:"),
    Mutation("explicit capture stores secrets", "memwire/middleware/_capture.py",
             '            if (why := screened(" ".join(st.said.split()))) is not None:',
             "            if (why := None) is not None:"),
    Mutation("capture has no cooldown", "memwire/middleware/_capture.py",
             "        if last is not None and now - last <= self.cooldown_s:", "        if False:"),
    Mutation("a near-duplicate is added again", "memwire/middleware/_capture.py",
             "            return hit.memory", "            pass"),
    Mutation("distillation reads memwire's own blocks", "memwire/middleware/_capture.py",
             '            lines.append(f"User: {_without_blocks(human_text(fmt.text_parts(item))).strip()}")',
             '            lines.append(f"User: {human_text(fmt.text_parts(item)).strip()}")'),
    Mutation("distillation has no confidence floor", "memwire/middleware/_distill.py",
             "            if p.action == \"ignore\" or p.confidence < self.min_confidence "
             "or len(p.text) > MAX_TEXT_CHARS:",
             "            if p.action == \"ignore\" or len(p.text) > MAX_TEXT_CHARS:"),
    Mutation("a wrong x-memwire-key is let in (proxy, memory API, page)", "memwire/adapters/server/_keys.py",
             '        raise Refusal(401, WRONG_KEY, "invalid_memwire_key")', "        return Caller()"),
    Mutation("the profile block's budget not checked", "memwire/policies/modes/_profile.py",
             "        if tokens <= max_tokens or not kept:", "        if True:"),
    Mutation("the profile is not memoized: it moves when the store changes", "memwire/policies/modes/_context.py",
             "        profile = self.profile.settle(block.profile) if block.profile is not None else None",
             "        profile = block.profile"),
    Mutation("a turn repeats what the profile shows", "memwire/policies/modes/_context.py",
             "search(f, exclude | shown)", "search(f, exclude)"),
    Mutation("the profile is not read back from the ledger", "memwire/policies/modes/_ledger.py",
             "is skipped, not trusted\n            self._apply(entry)",
             "is skipped, not trusted\n            if entry.key != PROFILE_KEY:\n                self._apply(entry)"),
    Mutation("a pinned memory decays", "memwire/memory/_lifecycle.py",
             "decay = 1.0 if pinned else", "decay = 1.0 if False else"),
    Mutation("the stability prior is not applied", "memwire/memory/_store_base.py",
             "(mid, score * p, h)", "(mid, score, h)"),
    Mutation("forget deletes instead of archiving", "memwire/memory/_store_write.py",
             "                self.archive_copy([m for m in (d.files[name].get(full),) if m], reason)",
             "                pass"),
    Mutation("a sweep moves a person's own memory", "memwire/memory/_upkeep.py",
             '    return s.cue != "explicit" and not s.memory.pinned', "    return not s.memory.pinned"),
    Mutation("a used memory is not reinforced", "memwire/memory/_telemetry.py",
             "                store.lifecycle.reinforce(took, used=True)", "                pass"),
    Mutation("two processes' counts overwrite each other", "memwire/memory/_lifecycle.py",
             "            disk = self._read()\n            now = self.clock()",
             "            disk = {}\n            now = self.clock()"),
    Mutation("background work does not wait for a quiet moment", "memwire/_worker.py",
             "            if self.traffic is not None:\n", "            if False:\n"),
    Mutation("the cache read is left out of Anthropic's prompt", "memwire/middleware/formats/anthropic_messages.py",
             "        return Usage(fresh + read + written, read, written,",
             "        return Usage(fresh + written, read, written,"),
    Mutation("a stream's later usage does not replace message_start's",
             "memwire/middleware/formats/anthropic_messages.py",
             "        out.update({k: v for k, v in later.items() if v is not None})", "        pass"),
    Mutation("an upstream failure is not recorded", "memwire/adapters/server/_proxy.py",
             "            if tap is not None:\n                tap.finish()\n            raise",
             "            raise"),
    Mutation("another process's ledger commit is not read before committing", "memwire/policies/modes/_ledger.py",
             "                if locked is not None:\n                    self._read(*locked)",
             "                if False:\n                    self._read(*locked)"),
    Mutation("the incremental read trusts the whole previous request", "memwire/middleware/_incremental.py",
             "    if all(a[:n] == b[:n] for a, b in zip(new, old",
             "    if True or all(a[:n] == b[:n] for a, b in zip(new, old"),
]


def unapplied(mutation: Mutation, tree: Path) -> str | None:
    """Why ``mutation`` cannot be made in ``tree`` (None: its line occurs exactly once)."""
    path = tree / mutation.path
    if not path.is_file():
        return f"{mutation.path} does not exist"
    found = path.read_text(encoding="utf-8").count(mutation.old)
    return None if found == 1 else f"its line occurs {found} times in {mutation.path}"


def _pytest(tree: Path, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *args],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)


# pytest's summary lines; a test id may hold spaces (parameters); "ERROR    name:" is a log line
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S.*?)(?: - .*)?$", re.M)


def baseline(tree: Path, pytest_args: list[str]) -> list[str]:
    """The tests that fail with no mutation made (another change in progress broke them): each
    mutation's run leaves them out, so that only a failure a mutation causes counts as a catch."""
    out = _pytest(tree, pytest_args, timeout=3600)
    if out.returncode in _NOT_RUN:
        raise SystemExit(f"pytest ran no test (exit {out.returncode}: {_NOT_RUN[out.returncode]}):\n"
                         f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return _FAILED.findall(out.stdout)


def run(mutation: Mutation, tree: Path, pytest_args: list[str]) -> tuple[str, float]:
    path = tree / mutation.path
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace(mutation.old, mutation.new, 1), encoding="utf-8")
    start = time.perf_counter()
    try:
        out = _pytest(tree, ["-x", *pytest_args], timeout=600)
    finally:
        path.write_text(original, encoding="utf-8")
    took = time.perf_counter() - start
    failed = _FAILED.search(out.stdout)
    if failed:
        return failed.group(1), took
    if out.returncode in _NOT_RUN:  # no test ran to catch anything: not a catch
        return f"NOT RUN (pytest exit {out.returncode}: {_NOT_RUN[out.returncode]})", took
    return ("SURVIVED" if out.returncode == 0 else f"pytest exit {out.returncode}"), took


# pytest's exit codes that mean the tests did not run (a wrong path or option, no test collected)
_NOT_RUN = {3: "internal error", 4: "usage error", 5: "no tests collected"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", type=int, nargs="*", help="mutation numbers (1-based) to run")
    ap.add_argument("--check", action="store_true", help="only check that every mutation applies; run no test")
    ap.add_argument("pytest_args", nargs="*", default=["tests"], help="what pytest runs (default: tests)")
    args = ap.parse_args()
    chosen = [(n, m) for n, m in enumerate(MUTATIONS, 1) if not args.only or n in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
        tree.mkdir()
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        missing = [(n, m, why) for n, m in chosen if (why := unapplied(m, tree)) is not None]
        for n, m, why in missing:
            print(f"NOT APPLIED #{n} {m.what}: {why}", file=sys.stderr)
        if missing:
            print(f"{len(missing)} of {len(chosen)} mutations do not apply: point them at where that code is now",
                  file=sys.stderr)
            return 2
        if args.check:
            print(f"all {len(chosen)} mutations apply")
            return 0
        broken = baseline(tree, args.pytest_args)
        for test in broken:
            print(f"left out: {test} (fails with no mutation)")
        pytest_args = [*args.pytest_args, *(f"--deselect={test}" for test in broken)]
        print(f"{'#':>2}  {'breakage':<48} {'caught by':<90} s")
        survived = not_run = 0
        for n, m in chosen:
            result, took = run(m, tree, pytest_args)
            survived += result == "SURVIVED"
            not_run += result.startswith("NOT RUN")
            print(f"{n:>2}  {m.what:<48} {result:<90} {took:.0f}", flush=True)
    print(f"{len(chosen) - survived - not_run} of {len(chosen)} breakages caught"
          + (f" ({not_run} not run: see above)" if not_run else "")
          + (f"; {len(broken)} tests left out that fail with no mutation" if broken else ""))
    return 1 if survived or not_run else 0


if __name__ == "__main__":
    sys.exit(main())
