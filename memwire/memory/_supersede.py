"""Memory that stays true: is a new memory a new value of an active one, the same thing in other
words, or a fact of its own? Decided without a model, on the write path (issue 33).

``compare(new, old)`` reads both texts into a few word sets (``Reading``):

- the *subject*: the content words (stemmed as retrieval stems them), and everything before the
  sentence's linking verb ("is", "listens", "runs", "uses", "prefer", ...): names and numbers there
  say *which* thing it is ("the staging Redis port", "Alice's phone");
- the *values*: what comes after that verb and looks like a value: numbers, versions, ports,
  dates, paths and zones (``Europe/Paris``), file names (``ship.sh``), identifiers
  (``release-2026``, ``snake_case``), quoted or backticked text, names (capitalized words),
  number words, and alternatives of a known choice (npm / pnpm, tabs / spaces, pytest /
  unittest, ...); values after "over", "instead of", "rather than", "not", "from" are *rejected*
  ("I prefer pnpm over npm now" chooses pnpm, rejects npm);
- whether it is negated ("we no longer use Docker").

Then, in this order:

- ``duplicate``: the same values and the same subject (or one subject inside the other, when they
  hold values: "the ledger runs on PostgreSQL 15" / "the ledger database is PostgreSQL 15");
- ``supersede``: another choice of the same alternatives in a compatible context ("I prefer npm for
  installing packages" -> "I prefer pnpm over npm now"), or the same subject with other values
  ("the staging database listens on port 5433" -> "... now listens on port 6543"), or the same
  statement negated;
- ``conflict``: unsure (the subjects differ only by words one side adds, or one side has no value):
  both are kept and a person decides; the newer one is what is injected meanwhile;
- ``separate``: everything else, look-alikes included ("the staging Redis port is 6380" / "the
  production database port is 5432": the subjects differ on both sides).

A false supersession loses a true fact from what is injected (it stays in the archive), so every
doubtful case falls to ``conflict`` or ``separate``.

Where it acts: both stores' add path (``plan``, under the store's write lock or in the write
transaction, on ``candidates``: the active memories the index finds most similar) archives what a
new memory supersedes (``#superseded``) and records the links in the lifecycle (``links_of``:
supersedes / superseded_by / conflicts). ``injected`` shows a conflict pair in a block as its newer
memory saying what it may replace; ``conflicts`` and ``resolve`` list and settle the pairs;
``history`` follows the links into a memory's chain of values; ``duplicate_clusters`` and ``merge``
are ``memwire dedupe`` (the others archived as ``#merged``). Nothing is deleted: every memory that
stops being current is in the archive, restorable.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from .._errors import MemoryNotFoundError
from ._model import Hit, Memory, normalized
from ._text import STOPWORDS, analyze

if TYPE_CHECKING:
    from ._protocol import Store

log = logging.getLogger("memwire")

# why a memory is in the archive (``_store.ARCHIVE_REASONS``, which imports this module)
ARCHIVE_REASONS = ("forgotten", "superseded", "rejected", "decayed", "capped", "merged")

__all__ = [
    "ALTERNATIVES",
    "ARCHIVE_REASONS",
    "CANDIDATES",
    "CANDIDATE_SCORE",
    "Decision",
    "Plan",
    "Reading",
    "Step",
    "Verdict",
    "compare",
    "conflicts",
    "decide",
    "duplicate_clusters",
    "history",
    "injected",
    "links_of",
    "merge",
    "pinned_on",
    "plan",
    "read",
    "resolve",
]

Verdict = Literal["separate", "duplicate", "supersede", "conflict"]

CANDIDATES = 8  # the active memories most similar to a new one that are compared with it
CANDIDATE_SCORE = 0.0  # any shared word: a new value is an unseen word, most of the query's weight, so the share is low

def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: choices between alternatives: a preference or instruction naming another one of a group
#: replaces the one before (each group a set of words as written, lower case)
ALTERNATIVES: tuple[frozenset[str], ...] = tuple(_words(g) for g in (
    "npm pnpm yarn bun",
    "pip pipenv poetry uv conda pdm hatch",
    "tabs spaces tab space",
    "pytest unittest nose nose2 jest vitest mocha jasmine ava",
    "vim neovim nvim emacs vscode nano helix zed sublime",
    "bash zsh fish sh powershell nushell",
    "black ruff yapf autopep8",
    "eslint biome oxlint",
    "prettier dprint",
    "mypy pyright pyre pytype",
    "webpack vite rollup esbuild parcel turbopack",
    "docker podman",
    "postgres postgresql mysql mariadb sqlite mongodb",
    "light dark",
    "concise brief short terse detailed verbose long thorough",
    "celsius fahrenheit",
    "metric imperial",
    "single double",
    "camelcase snake_case kebab-case pascalcase",
    "merge rebase squash",
    "main master trunk",
    "github gitlab bitbucket",
    "aws gcp azure",
    "kubernetes k8s nomad",
    "chrome firefox safari edge",
    "macos linux windows",
    "morning afternoon evening night",
))
_GROUP = {w: i for i, g in enumerate(ALTERNATIVES) for w in g}

# the linking verb of a statement: what comes before it says which thing, after it what value
_PIVOTS = _words("""
    is are was were be been being 's = equals becomes became
    listen listens listening run runs running ran live lives living sit sits located hosted stored kept
    use uses using used prefer prefers preferred like likes love loves want wants favor favors favour
    favours choose chooses chose pick picks go goes stick sticks has have had points point set
    starts start begins begin ends end falls lands moves moved changed switched happen happens take takes took
    called named default defaults
    target targets require requires need needs support supports depend depends expect expects return returns
    contain contains include includes cost costs last lasts hold holds serve serves send sends point points
""")
# words that carry no subject: changes of mind, framing, people, relative days (dates are written
# out by the capture rules), and the pivots themselves
_FILLER = _words("""
    now actually currently instead anymore longer new newly changed change changes switched switch switching
    moved move moving updated update remember note keep mind please always user users user's also still
    called named call name today tomorrow yesterday tonight going forward henceforth rather than over
    different another other
    default defaults setting settings i we our us my me you your team's correction fyi okay ok
""") | _PIVOTS
_NEGATIONS = _words("not no never don't doesn't isn't aren't won't can't cannot didn't wasn't without "
                       "dont doesnt isnt arent wont cant didnt stop stopped")
_REJECTING = _words("over instead than not no from without vs versus never replacing replaced")
_CHOOSING = _words("to with use uses using prefer prefers for but now")
_IMPERATIVE = _words("always never please")  # an instruction: the next word is its verb
_NUMBER_WORDS = _words("""
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million billion once twice half first second third fourth fifth sixth seventh eighth ninth tenth
""")
_FRAME = re.compile(
    r"^\s*(?:(?:please\s+)?(?:remember|note|keep\s+in\s+mind|don't\s+forget|fyi|for\s+the\s+record|"
    r"just\s+so\s+you\s+know)(?:\s+that)?\s*[,:]?\s+|(?:actually|correction|update|ok|okay|so|also)\s*[,:]\s*|"
    r"from\s+now\s+on\s*,?\s+)", re.IGNORECASE)
_TOKEN = re.compile(r"""
    `[^`]+`                                   # backticked: one value
  | "[^"]{1,80}"                              # quoted: one value
  | [A-Za-z][A-Za-z0-9+.-]*://[^\s,;)]+       # a URL
  | ~?[\w.@+-]*[/\\][\w./\\@+:~-]*\w          # a path or a zone: src/app.py, Europe/Paris, /var/lib/x
  | [\w@+#]+(?:[.:_\-'’][\w@+#]+)*           # words, versions, file names, identifiers
  | =
""", re.VERBOSE)
_SUBJECT_SHARE = 0.6  # Jaccard of two subjects that are one (same values, no value at all)
_CONTEXT_SHARE = 0.5  # Jaccard of two contexts of a choice between alternatives


@dataclass(frozen=True, slots=True)
class Reading:
    """What ``compare`` sees of one text."""

    subject: frozenset[str]
    values: frozenset[str]
    rejected: frozenset[str]
    negated: bool
    statement: bool  # it has a linking verb: "X is / listens on / uses / prefers Y"
    order: tuple[str, ...] = ()  # every value-like word in the order written ("process 1 ... 0" is not "0 ... 1")
    tail: frozenset[str] = frozenset()  # the subject's content words after the linking verb ("is blue")


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a new memory: ``old`` is the active memory it duplicates, supersedes or
    conflicts with (None when ``separate``)."""

    verdict: Verdict
    old: Memory | None = None


def _is_value(tok: str, first: bool) -> bool:
    """Whether a word of a statement is a value (see the module); ``first``: the sentence's first."""
    if _MARKED.search(tok):
        return True  # quoted, a URL, a path, a number, deploy.sh, snake_case, user@host
    low = tok.lower()
    if low in _NUMBER_WORDS or low in _GROUP:
        return True
    if "-" in tok and not tok.replace("-", "").isalpha():
        return True  # release-v2
    if low == tok:
        return False  # most words: lower case, no digit, no mark
    if _MIXED.search(tok) or (len(tok) > 1 and tok.isupper()):
        return True  # PostgreSQL, GitHub, macOS; AWS, GCP
    return tok[0].isupper() and not first  # a name (not the sentence's first word)


_MARKED = re.compile(r"^[`\"#]|[\d/\\._@]|://")  # "#sev": a channel, an issue
_MIXED = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")


def _value(tok: str) -> str:
    low = tok.lower()
    if low[0] in "`\"":
        low = low.strip("`\"").strip()
    return low[:-2] if low.endswith(("'s", "’s")) else low


@lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """The subject, values, rejected values and negation of ``text`` (see the module)."""
    body = text.strip()
    while (m := _FRAME.match(body)) is not None and m.end() > 0:
        body = body[m.end():]
    toks = _TOKEN.findall(body)
    lows = [_value(t) for t in toks]
    pivot = next((i for i, w in enumerate(lows) if w in _PIVOTS), None)
    if pivot is None and len(lows) > 2 and lows[0] in _IMPERATIVE:
        pivot = 1  # "Always write commit messages in English": the instruction's verb links it
    subject: set[str] = set()
    values: set[str] = set()
    rejected: set[str] = set()
    negated = False
    rejecting = False
    kinds = [_is_value(tok, i == 0) for i, tok in enumerate(toks)]  # each word's, once
    words: list[str] = []  # the subject's content words, stemmed at the end in one go
    after: list[str] = []  # those after the linking verb
    for i, (tok, low) in enumerate(zip(toks, lows, strict=True)):
        if low in _NEGATIONS or low == "longer":
            # "not X" rejects X; "we do not use X" / "no longer" negate the statement
            nxt = i + 1 < len(toks) and (kinds[i + 1] or _is_value(toks[i + 1], False))
            if low in _REJECTING and nxt and pivot is not None and i > pivot:
                rejecting = True
            else:
                negated = True
            continue
        if low in _REJECTING:
            rejecting = True
            continue
        if low in _CHOOSING:
            rejecting = False
        before = pivot is not None and i < pivot
        if kinds[i] and not before:
            (rejected if rejecting else values).add(low)
            continue
        if low in _FILLER or low in STOPWORDS:
            continue
        if before and kinds[i]:
            subject.add(low)  # a name or number that says which thing ("Alice's phone", "the v2 API")
            continue
        (after if pivot is not None and i > pivot else words).append(tok)
    tail = frozenset(analyze(" ".join(after)))
    subject.update(analyze(" ".join(words)), tail)
    order = tuple(dict.fromkeys(low for low, value in zip(lows, kinds, strict=True) if value and low not in _FILLER))
    return Reading(frozenset(subject), frozenset(values), frozenset(rejected - values), negated, pivot is not None,
                   order, tail)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _nested(a: frozenset[str], b: frozenset[str]) -> bool:
    return bool(a & b) and (a <= b or b <= a)


def _is_number(value: str) -> bool:
    """A number or a dotted version ("5433", "3.11")."""
    return value.replace(".", "").isdigit()


def _shape(values: frozenset[str]) -> tuple[int, bool]:
    """How many values, and whether they are all numbers: two values of one thing look alike."""
    return len(values), all(_is_number(v) for v in values)


_DATE_VALUE = re.compile(r"\d{4}-\d{2}(?:-\d{2})?$")


def _kinds(values: frozenset[str]) -> frozenset[str]:
    """The kinds of ``values``: dates, numbers (and versions), other (names, paths, words)."""
    return frozenset("date" if _DATE_VALUE.match(v) else "number" if _is_number(v) else "other"
                     for v in values)


def _choice(new: Reading, old: Reading) -> Verdict | None:
    """Another choice of the same alternatives (npm -> pnpm): its verdict, else None."""
    groups = {_GROUP[v] for v in new.values if v in _GROUP} & {_GROUP[v] for v in old.values if v in _GROUP}
    if not groups:
        return None
    if all({v for v in new.values if _GROUP.get(v) == g} == {v for v in old.values if _GROUP.get(v) == g}
           for g in groups):
        return None  # the same choice: the general rules say duplicate or not
    alts = set().union(*(ALTERNATIVES[g] for g in groups))
    if (new.values - alts - old.values - old.subject) and (old.values - alts - new.values - new.subject):
        return "separate"  # tabs in Python files, spaces in YAML files: two rules
    ctx_new = new.subject | (new.values - alts)
    ctx_old = old.subject | (old.values - alts)
    if not ctx_new or not ctx_old or _nested(ctx_new, ctx_old) or _jaccard(ctx_new, ctx_old) >= _CONTEXT_SHARE:
        return "supersede"
    return "separate"  # frontend tests with jest, backend tests with pytest: two rules


# complexity over 15: the verdicts in the module docstring's order (duplicate, values, kinds, conflict): one decision
def compare(new: str, old: str) -> Verdict:  # noqa: C901
    """What ``new`` is to ``old``, an active memory (see the module)."""
    if normalized(new).rstrip(".!") == normalized(old).rstrip(".!"):
        return "duplicate"
    a, b = read(new), read(old)
    choice = _choice(a, b)
    if choice is not None:
        return choice
    same = a.subject == b.subject and bool(a.subject)
    share = _jaccard(a.subject, b.subject)
    in_order = a.order == b.order
    if in_order and a.negated == b.negated and a.values | b.values and a.subject | a.values == b.subject | b.values:
        return "duplicate"  # the same words, a name on either side of the verb
    if a.values == b.values and (in_order or not a.values):
        if a.negated != b.negated:
            return "supersede" if same else "conflict" if share >= _SUBJECT_SHARE else "separate"
        said = a.statement and b.statement  # labels ("fact 1", "new fact 1") only when their words are the same
        if a.values and (same or (said and (_nested(a.subject, b.subject) or share >= _SUBJECT_SHARE))):
            return "duplicate"
        head_a, head_b = a.subject - a.tail, b.subject - b.tail  # what comes before the verb: which thing
        if not a.values and said and in_order and (a.tail == b.tail or _nested(a.tail, b.tail)) and (
                head_a == head_b or _nested(head_a, head_b)) and (
                same or (share >= _SUBJECT_SHARE and len(a.subject & b.subject) >= 2)):
            return "duplicate"  # no value to tell them apart: the same words (what follows the verb above all)
        if (a.statement and b.statement and a.negated == b.negated and a.subject - a.tail
                and a.subject - a.tail == b.subject - b.tail and len(a.tail - b.tail) == 1 == len(b.tail - a.tail)):
            return "conflict"  # "my favorite color is blue" / "... is green": a value in plain words, maybe
        return "separate"
    if not (a.statement and b.statement):
        return "separate"  # "memory number 1", "memory number 2": labels, not a thing and its value
    if a.values and b.values:
        if not _kinds(a.values) & _kinds(b.values):
            return "separate"  # "the password is in 1Password" / "... was changed yesterday (a date)": other facts
        if same or (a.subject == b.subject and a.values & b.values):
            return "supersede"  # "Python 3.11 in CI" -> "Python 3.12 in CI": the shared values say which
        if b.values <= a.rejected and share >= _CONTEXT_SHARE:
            return "supersede"  # "moved from port 5433 to 6543" names the value it replaces
        if (_nested(a.subject, b.subject) and len(a.subject & b.subject) >= 2
                and len(a.subject ^ b.subject) == 1 and _shape(a.values) == _shape(b.values)):
            return "conflict"  # "the API" / "the API gateway": the same thing, or one inside the other
        return "separate"
    if same and len(a.subject) >= 2:
        return "conflict"  # one side has no value: a person says which holds
    return "separate"


def decide(new: Memory, others: Iterable[Memory]) -> Decision:
    """The verdict on ``new`` against the active memories most like it, the strongest one first:
    a duplicate before a supersession before a conflict (each with the best-ranked of its kind)."""
    found: dict[str, Memory] = {}
    for old in others:
        if old.id == new.id:
            continue
        verdict = compare(new.text, old.text)
        if verdict != "separate":
            found.setdefault(verdict, old)
    for verdict in ("duplicate", "supersede", "conflict"):
        if verdict in found:
            return Decision(verdict, found[verdict])
    return Decision("separate")


def candidates(search: Callable[..., Sequence[Hit]]) -> Callable[[str], Sequence[Hit]]:
    """``plan``'s search: the store's ``search`` for the ``CANDIDATES`` active memories most like a
    text, as last read (the store re-read its memories under its write lock just before). A
    search that fails gives none: the new memory is added as it is (one log line, no text), never
    lost for want of a comparison."""

    def found(text: str) -> Sequence[Hit]:
        try:
            return search(text, CANDIDATES, min_score=CANDIDATE_SCORE, refresh=False)
        except Exception as exc:  # fail open: the write matters more than settling it
            log.warning("memwire: a new memory was not compared with the others (%s); it is added as it is",
                        type(exc).__name__)
            return []

    return found


@dataclass
class Plan:
    """What the store does with the new memories of one write (``plan``), by new memory id."""

    duplicates: dict[str, Memory]  # the active memory it says again: reinforced, the new one not added
    replaced: dict[str, list[Memory]]  # the active memories it supersedes: archived, linked both ways
    conflicts: dict[str, list[Memory]]  # the active memories it may contradict: both kept, marked

    def removed(self) -> list[Memory]:
        return list({m.id: m for olds in self.replaced.values() for m in olds}.values())


def plan(items: Sequence[Memory], search: Callable[[str], Sequence[Hit]],
         removable: Callable[[Memory], bool]) -> Plan:
    """Decide for each new memory of a write (not already stored) against the active memories
    ``search`` finds for its text (the store's own search, under its write lock). A memory the
    store cannot remove here (another scope's), or one dated later than the new one (an import of
    older memories), is not superseded: the two are in conflict instead."""
    out = Plan({}, {}, {})
    taken: set[str] = set()  # an old memory goes once, to the first new one that supersedes it
    for mem in items:
        verdicts = [(compare(mem.text, h.memory.text), h.memory) for h in search(mem.text) if h.memory.id != mem.id]
        dup = next((old for verdict, old in verdicts if verdict == "duplicate"), None)
        if dup is not None:
            out.duplicates[mem.id] = dup
            continue
        for verdict, old in verdicts:
            if verdict == "supersede" and removable(old) and not _older(mem, old) and old.id not in taken:
                out.replaced.setdefault(mem.id, []).append(old)
                taken.add(old.id)
            elif verdict in ("supersede", "conflict"):
                out.conflicts.setdefault(mem.id, []).append(old)
    return out


def pinned_on(plan: Plan, items: Sequence[Memory]) -> list[Memory]:
    """``items`` with the pin of what each supersedes: a person pinned the subject, not one value."""
    return [replace(m, pinned=True) if not m.pinned and any(o.pinned for o in plan.replaced.get(m.id, ())) else m
            for m in items]


def _older(new: Memory, old: Memory) -> bool:
    """``new`` is dated before ``old`` (both dated as days): it cannot be the newer value."""
    return bool(new.date and old.date and new.date[:10] < old.date[:10]
                and new.date[:4].isdigit() and old.date[:4].isdigit())


def links_of(plan: Plan, added: Iterable[Memory], conflicts_now: Callable[[str], Sequence[str]]
             ) -> dict[str, dict[str, Any]]:
    """The lifecycle links a write records (``Lifecycle.link``): each supersession both ways, each
    conflict on both sides (``conflicts_now``: an old memory's conflicts as recorded)."""
    changes: dict[str, dict[str, Any]] = {}
    ids = {m.id for m in added}
    for new, olds in plan.replaced.items():
        if new in ids:  # current again if it had been replaced before (a restore): not superseded by anything
            changes.setdefault(new, {}).update(supersedes=[o.id for o in olds], superseded_by=None)
            for o in olds:
                changes.setdefault(o.id, {})["superseded_by"] = new
    for new, olds in plan.conflicts.items():
        if new in ids:
            changes.setdefault(new, {})["conflicts"] = [o.id for o in olds]
            for o in olds:
                have = list(conflicts_now(o.id))
                changes.setdefault(o.id, {})["conflicts"] = [*have, new] if new not in have else have
    return changes


# ---------------------------------------------------------------- history and duplicates of a store

HISTORY_MAX = 200  # memories one history shows at most (a chain of values, its merged twins)


@dataclass(frozen=True, slots=True)
class Step:
    """One value in a memory's history: the memory, whether it is ``current`` (active) or where it
    went (``superseded``, ``merged``, or the archive's other reasons), since when it was known and
    until when it held (UTC times, ISO 8601), and its links."""

    memory: Memory
    state: str
    since: str
    until: str | None
    links: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.memory.id, "text": self.memory.text, "tags": list(self.memory.tags),
                "state": self.state, "since": self.since, "until": self.until, "date": self.memory.date,
                **dict(self.links)}


def _linked_ids(links: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in ("supersedes", "superseded_by", "merged", "merged_into"):
        value = links.get(key)
        out.extend([value] if isinstance(value, str) else value or [])
    return out


def history(store: Store, mid: str) -> list[Step]:
    """The chain of values of memory ``mid`` (an id or a unique prefix, active or archived), oldest
    first: every memory linked to it by a supersession or a merge, each with its dates. Raises
    ``MemoryNotFoundError`` when neither the store nor its archive holds ``mid``."""
    start = _find(store, mid, prefix=True)
    if start is None:
        raise MemoryNotFoundError(f"no memory with id {mid!r} in {store.location} or its archive")
    lc = store.lifecycle
    found: dict[str, tuple[Memory, bool]] = {start[0].id: start}
    todo = [start[0].id]
    while todo and len(found) < HISTORY_MAX:
        for other in _linked_ids(lc.links(todo.pop())):
            if other not in found and (hit := _find(store, other)) is not None:
                found[other] = hit
                todo.append(other)
    steps = []
    for mem, active in found.values():
        meta = lc.get(mem)
        state = "current" if active else next((t for t in reversed(mem.tags) if t in ARCHIVE_REASONS), "archived")
        ended = None if active else meta.forgotten
        step = Step(mem, state, _iso(meta.created), None if ended is None else _iso(ended), lc.links(mem.id))
        steps.append(((ended is None, ended or 0.0, meta.created, mem.id), step))
    return [step for _, step in sorted(steps, key=lambda s: s[0])]  # by when each stopped holding




def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _find(store: Store, mid: str, *, prefix: bool = False) -> tuple[Memory, bool] | None:
    """The memory ``mid`` and whether it is active (else archived), or None."""
    for where, active in ((store, True), (store.archive, False)):
        try:
            mem = where.get(mid) if prefix or mid in where else None
        except MemoryNotFoundError:
            mem = None
        if mem is not None:
            return mem, active
    return None


def duplicate_clusters(store: Store) -> list[list[Memory]]:
    """Groups of active memories that say the same thing (``compare`` says ``duplicate`` for some
    pair of the group), each in store order: the first is the one a merge keeps."""
    mems = store.memories()
    order = {m.id: i for i, m in enumerate(mems)}
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for mem in mems:
        for hit in store.search(mem.text, CANDIDATES, min_score=CANDIDATE_SCORE):
            other = hit.memory
            if other.id != mem.id and other.id in order and compare(mem.text, other.text) == "duplicate":
                a, b = sorted((root(mem.id), root(other.id)), key=order.__getitem__)
                if a != b:
                    parent[b] = a
    groups: dict[str, list[Memory]] = {}
    for mem in mems:
        groups.setdefault(root(mem.id), []).append(mem)
    return [g for g in groups.values() if len(g) > 1]


def merge(store: Store, cluster: Sequence[Memory]) -> Memory:
    """Merge a cluster of duplicates into its first memory: the others go to the archive as
    ``merged`` (restorable), linked (``merged_into`` / ``merged``), and count as reinforcements of
    the one kept."""
    keep, rest = cluster[0], list(cluster[1:])
    store.archive_copy(rest, "merged")
    for mem in rest:
        store.forget(mem.id, reason=None)
    lc = store.lifecycle
    if not lc.get(keep).recorded:  # written by hand: its own saying counts first
        lc.added([keep])
    lc.reinforce([keep.id] * len(rest))
    lc.forgotten([m.id for m in rest])
    lc.link_merges([(m.id, keep.id) for m in rest])
    return keep


def conflicts(store: Store) -> list[tuple[Memory, Memory]]:
    """The active pairs marked in conflict, each as (newer, older), newest first."""
    mems = store.memories()
    by_id = {m.id: m for m in mems}
    lc = store.lifecycle
    # newer: created later (saved to the second), then written later (the store's order)
    age = {m.id: (-meta.created, -i) for i, (m, meta) in enumerate(zip(mems, lc.get_many(mems), strict=True))}
    pairs: dict[frozenset[str], tuple[Memory, Memory]] = {}
    for mem in mems:
        for other in lc.links(mem.id).get("conflicts", ()):
            if other in by_id and other != mem.id:
                a, b = sorted((mem, by_id[other]), key=lambda m: age[m.id])
                pairs.setdefault(frozenset((a.id, b.id)), (a, b))
    return sorted(pairs.values(), key=lambda p: age[p[0].id])


def resolve(store: Store, mid: str, *, both: bool = False) -> tuple[Memory, list[Memory]]:
    """Settle the conflicts of memory ``mid`` (an id or a unique prefix) in one action: it is kept
    and the active ones it conflicts with go to the archive as ``superseded`` by it (restorable,
    linked), or with ``both`` they all stay, no longer in conflict. Returns it and what left."""
    kept = store.get(mid)
    lc = store.lifecycle
    others = [o for o in lc.links(kept.id).get("conflicts", ()) if o != kept.id]
    active = {m.id: m for m in store.known(others)}
    changes: dict[str, dict[str, Any]] = {kept.id: {"conflicts": None}}
    gone: list[Memory] = []
    for other in others:
        rest = [c for c in lc.links(other).get("conflicts", ()) if c != kept.id]
        changes[other] = {"conflicts": rest or None}
        if not both and other in active:
            gone.append(store.forget(other, reason="superseded"))
            changes[other]["superseded_by"] = kept.id
    if gone:
        changes[kept.id]["supersedes"] = [*lc.links(kept.id).get("supersedes", []), *(m.id for m in gone)]
    lc.link(changes)
    return kept, gone


def injected(store: Store, memories: Sequence[Memory]) -> list[Memory]:
    """What a block shows of ``memories`` (a search's, best first): a memory in conflict with a newer
    active one gives its place to that one (once), which says what it replaced; so a conflict pair
    is never shown as two equal facts. The memories' ids are kept (the text shown is a copy's)."""
    if not store.track or not memories:
        return list(memories)
    try:
        return _injected(store, memories)
    except Exception as exc:  # the block goes on as found: a conflict note is never worth the memory
        log.warning("memwire: conflicts not looked at for this block (%s)", type(exc).__name__)
        return list(memories)


def _injected(store: Store, memories: Sequence[Memory]) -> list[Memory]:
    links = store.lifecycle.links_many([m.id for m in memories])
    if not any(ls.get("conflicts") for ls in links.values()):
        return list(memories)
    shown: dict[str, Memory] = {}
    hidden: set[str] = set()
    for mem in memories:
        if mem.id in hidden:
            continue
        others = [o for o in links.get(mem.id, {}).get("conflicts", ()) if o != mem.id]
        rivals = store.known(others) if others else []
        if not rivals:
            shown.setdefault(mem.id, mem)
            continue
        group = [mem, *rivals]
        created = [meta.created for meta in store.lifecycle.get_many(group)]
        new = group[max(range(len(group)), key=lambda i: (created[i], group[i].id))]
        older = [m for m in group if m.id != new.id]
        hidden.update(m.id for m in older)
        for m in older:
            shown.pop(m.id, None)
        if new.id not in shown:
            said = "; ".join(f'"{m.text}"' for m in older)
            shown[new.id] = Memory(new.id, f"{new.text} (newer than an earlier note it may replace: {said})",
                                   new.tags, new.pinned, new.topic, new.date, new.source)
    return list(shown.values())
