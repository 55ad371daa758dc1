"""Relative dates written as absolute ones, from the day a statement was said.

"The code freeze starts tomorrow." is wrong from the next day on; stored as "The code freeze
starts tomorrow (2026-11-29)." it stays true and still reads as the person said it. Pure and
deterministic: ``absolute_dates(text, day)`` rewrites against the calendar day it was said (in the
speaker's time zone: ``day_of(at, tz)``); every write path reaches it through the stores'
``_checked`` (the memory's date is that day), capture through its own call first.

What is rewritten (weeks start on Monday, ISO 8601):

| said | written |
|---|---|
| today, tonight, this morning/afternoon/evening | today (2026-11-28) |
| tomorrow, yesterday, last night, the day after tomorrow, the day before yesterday | tomorrow (2026-11-29) |
| this Friday | the next Friday on or after the day said (that day itself when it is a Friday) |
| on/by/until/till/before/after/from Friday, (this) coming Friday | the next Friday strictly after it |
| next Friday | the Friday of next week (said on Thursday 11-26: 12-04, "this Friday" being 11-27) |
| last Friday; since Friday | the latest Friday before it |
| this/next/last week | this week (the week of 2026-11-23): its Monday |
| this/next/last weekend | this weekend (the weekend of 2026-11-28): its Saturday |
| this/next/last month, year | this month (2026-11), next year (2027) |
| in two days, in 3 weeks, in a month; two days ago; 3 weeks from now | in two days (2026-11-30) |
| within 2 weeks | within 2 weeks (by 2026-12-12) |

What is left as it is, where it can be told: code spans, URLs, paths and file names, e-mail
addresses, identifiers (``$TODAY``, ``--today``, ``tomorrow_ts``, ``today-only``); a phrase
already dated (a date in parentheses after it, or an explicit date next to it); a text made
absolute already (one of its phrases followed by a date as written here): every phrase of it, so
a memory restored or copied later is never dated again from that later day (what was left on the
day said, "since Monday" said on a Monday, stays left); idioms and names:
"today's best practice", "yesterday's news" (a possessive of today/tomorrow/yesterday is dated
only before an event: "tomorrow's standup"), "the tomorrow package", "a today view", "no
tomorrow", "the world of tomorrow" ("as of today" is a date), a capitalised "Today" inside a
sentence (a title), "the next week" (relative to something else), "the last week of December";
a bare weekday ("Friday", "Mondays", "every Monday": a weekday alone, or a habit); and "on Friday",
"in a day", "within 2 weeks" in a sentence that speaks of the past or of a habit ("we did it in a
day", "we shipped it in two weeks", "it was on Friday", "orders usually ship in 2 days"): one test,
``_not_ahead``, for every phrase that counts forward from the day said.
"""

from __future__ import annotations

import calendar
import re
import time
from datetime import date, datetime, timedelta, tzinfo
from datetime import timezone as _timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["absolute_dates", "day_of", "might_hold_dates", "said_day", "zone", "zone_named"]

class _Lazy:
    """A pattern compiled on first use: `import memwire` need not pay for these rules (~10 ms)."""

    __slots__ = ("_rx", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags
        self._rx: re.Pattern[str] | None = None

    @property
    def rx(self) -> re.Pattern[str]:
        if self._rx is None:
            self._rx = re.compile(self.pattern, self.flags)
        return self._rx


_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_DAY_SHIFT = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_N = r"\d{1,3}|" + "|".join(_NUMBERS)
_UNIT = r"days?|weeks?|months?|years?"
_WD = "|".join(_WEEKDAYS)
_PART = r"(?:\s+(?P<{}>morning|afternoon|evening|night))?"

_PHRASE = _Lazy(
    r"\b(?:"
    r"(?P<day2>the\s+day\s+(?P<d2dir>after\s+tomorrow|before\s+yesterday))"
    r"|(?P<rel>today|tonight|tomorrow|yesterday)" + _PART.format("part")
    + r"|(?P<partday>this\s+(?:morning|afternoon|evening)|last\s+night)"
    r"|(?P<wmod>this\s+coming|coming|this|next|last|since|on|by|until|till|before|after|from)\s+"
    r"(?P<wd>" + _WD + r")(?!s\b)" + _PART.format("wpart")
    + r"|(?P<pmod>this|next|last)\s+(?P<period>weekend|week|month|year)"
    r"|(?P<inmod>in|within)\s+(?P<n>" + _N + r")\s+(?P<unit>" + _UNIT + r")"
    r"|(?P<n2>" + _N + r")\s+(?P<unit2>" + _UNIT + r")\s+(?P<dir>ago|from\s+(?:now|today))"
    r")\b",
    re.IGNORECASE)

# the cheap test first: most statements hold none of these
_HINTS = ("day", "tonight", "tomorrow", "week", "month", "year", "ago", "morning", "afternoon", "evening", "night")

# where nothing is rewritten: code, URLs, paths and file names, e-mail addresses
_PROTECTED = _Lazy(
    r"```.*?(?:```|$)|`[^`\n]*`|\b[a-z][a-z0-9+.-]*://\S+|\bwww\.\S+|\S+@\S+\.\S+|\S*[/\\]\S*"
    r"|\S+\.[A-Za-z0-9_]{1,10}\b", re.DOTALL | re.IGNORECASE)
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
# an explicit date next to a phrase: the phrase is dated already
_EXPLICIT = _Lazy(
    r"\b\d{4}-\d{2}(?:-\d{2})?\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b" + _MONTHS + r"\s+\d{1,2}(?:st|nd|rd|th)?\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTHS + r"(?![a-z])",
    re.IGNORECASE)
_NEAR = 24  # characters either side looked at for an explicit date
_DATED_AFTER = _Lazy(r"\s*\([^()]*\d[^()]*\)")
# a date as ``absolute_dates`` writes it after a phrase: the text was made absolute already
_NOTE = _Lazy(r"\s*\((?:by\s+|the\s+week(?:end)?\s+of\s+)?\d{4}(?:-\d{2}){0,2}\)")
_POSSESSIVE = _Lazy(r"['’]s\s+(?P<noun>[A-Za-z][\w-]*)")
# what a day's possessive is dated before ("tomorrow's standup"); "today's world" is an idiom
_EVENTS = frozenset(("meeting", "meetings", "standup", "stand-up", "standups", "call", "calls", "sync", "release",
    "releases", "deploy", "deploys", "deployment", "demo", "review", "session", "class", "lecture", "exam", "test",
    "appointment", "interview", "flight", "train", "talk", "presentation", "retro", "retrospective", "planning",
    "sprint", "dinner", "lunch", "breakfast", "party", "match", "game", "event", "launch", "deadline", "freeze",
    "cutover", "migration", "maintenance", "outage", "shift", "on-call", "run", "build", "backup", "job", "workshop",
    "webinar", "date", "schedule", "agenda", "episode", "keynote"))
_BEFORE_CHARS = frozenset(" \t\n(\"'“‘[")
_AFTER_CHARS = frozenset(" \t\n.,;:!?)]\"'”’—–")
_IDIOM_BEFORE = _Lazy(r"(?:\b(?:the|a|an|no|of)\s+)$", re.IGNORECASE)
_AS_OF = _Lazy(r"\b(?:as|end|start|beginning|close)\s+of\s+$", re.IGNORECASE)  # dates all the same
_THE_BEFORE = _Lazy(r"\b(?:the|a|an|every|each)\s+$", re.IGNORECASE)
_OF_AFTER = _Lazy(r"\s+of\b", re.IGNORECASE)
_VAGUE_AFTER = _Lazy(r"\s+or\s+(?:two|so|more|less|three)\b|\s+or\s+\d", re.IGNORECASE)
# a habit: "we deploy on Friday as a rule", "from Monday to Friday": no one day
_HABIT = _Lazy(r"\b(?:always|usually|every|each|normally|typically|generally|often|sometimes|rarely|never)\b"
                    r"|\b(?:" + _WD + r")\s*(?:to|through|thru|till|until|and|-|–)\s*(?:" + _WD + r")\b", re.IGNORECASE)
# a sentence about the past: "on Friday", "in a day" there are not the coming ones
_PAST = _Lazy(r"\b(?:was|were|wasn't|weren't|did|didn't|had|went|happened|yesterday|ago|took|finished|"
                   r"last)\b", re.IGNORECASE)


# a verb in the past tense that no auxiliary makes future or passive: "order 17 shipped on Friday",
# "we deployed on Monday" (not "it will be deployed on Monday", "is scheduled on Friday"); words
# in -eed and a few adjectives in -ed ("red", "hundred", "wicked") are no verbs
_PAST_VERB = _Lazy(r"(?<!\bbe )(?<!\bis )(?<!\bare )(?<!\bbeen )(?<!\bbeing )(?<!\bwill )(?<!\bto )(?<!\bget )"
                   r"(?<!\bgets )(?<!\bgot )(?<!\bwas )(?<!\bwere )(?<!\bll )"
                   r"\b(?!(?:hundred|sacred|naked|wicked|kindred|rugged|beloved|crooked|ragged|wretched)\b)"
                   r"[a-z]{2,}(?<!e)ed\b", re.IGNORECASE)


# what a wish or an order puts before a participle: "we need this fixed in two days" is ahead
_WANTED = _Lazy(r"\b(?:need|needs|want|wants|have|has|get|gets|let's\s+get)\s+(?:it|this|that|these|those|them|"
                r"everything|all\s+of\s+it)\s+$", re.IGNORECASE)


def _about_the_past(sentence: str) -> bool:
    """Whether a sentence speaks of the past: a past-tense word ("was", "went", "yesterday") or a
    past-tense verb in -ed that no auxiliary makes future or passive, nor a wish an order ("need it
    fixed")."""
    return _PAST.rx.search(sentence) is not None or any(
        _WANTED.rx.search(sentence, 0, m.start()) is None for m in _PAST_VERB.rx.finditer(sentence))


def _not_ahead(sentence: str) -> bool:
    """Whether "on Friday", "in two days" in ``sentence`` are no day ahead of the one said: it speaks
    of the past ("we shipped it in two weeks") or of a habit ("it usually ships in 2 days"). The one
    test of every phrase that counts forward from that day."""
    return _about_the_past(sentence) or _HABIT.rx.search(sentence) is not None


def zone(name: str | tzinfo | None) -> tzinfo:
    """The time zone ``name`` (an IANA name: "Europe/Paris", "UTC"); None is UTC. An unknown name
    raises ``ValueError`` naming it."""
    if name is None or (isinstance(name, str) and not name.strip()):
        return _timezone.utc
    if isinstance(name, tzinfo):
        return name
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as Europe/Paris, "
                         "America/New_York or UTC") from exc


def zone_named(text: str) -> str | None:
    """The IANA time zone a statement names ("User's timezone is Europe/Paris."), or None."""
    for m in re.finditer(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*", text):
        word = m.group()
        if ("/" in word or word.upper() in ("UTC", "GMT")) and _known(word):
            return word
    return None


def _known(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def day_of(at: float | datetime | None = None, tz: str | tzinfo | None = None) -> date:
    """The calendar day in ``tz`` (None: UTC) at the instant ``at`` (seconds since the epoch, an
    aware datetime; None: now). 23:30 UTC is already the next day in Europe/Paris."""
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise ValueError("day_of needs an aware datetime (one with a tzinfo) or seconds since the epoch")
        return at.astimezone(zone(tz)).date()
    return datetime.fromtimestamp(time.time() if at is None else at, zone(tz)).date()


def said_day(date_text: str | None, tz: str | tzinfo | None = None) -> date:
    """The day a memory was said, from its date ("2026-11-28", "2026-11-28T22:10+01:00": the
    day written); today in ``tz`` when it has none or it does not read as one."""
    if date_text:
        m = re.match(r"\s*(\d{4})-(\d{2})-(\d{2})", date_text)
        if m:
            try:
                return date(int(m[1]), int(m[2]), int(m[3]))
            except ValueError:
                pass
    return day_of(None, tz)


def might_hold_dates(text: str) -> bool:
    """False when ``text`` surely holds no relative date (a cheap test; True: read it)."""
    low = text.lower()
    return any(h in low for h in _HINTS)


def absolute_dates(text: str, day: date) -> str:
    """``text`` with each relative date followed by the absolute one it meant on ``day``
    ("starts tomorrow" → "starts tomorrow (2026-11-29)"). Idempotent: a dated phrase is left."""
    if not might_hold_dates(text):
        return text
    phrases = list(_PHRASE.rx.finditer(text))
    if not phrases or any(_NOTE.rx.match(text, _end_of(text, m)) for m in phrases):
        return text  # none; or made absolute already (restored, copied): what is left was left on the day said
    protected: list[tuple[int, int]] | None = None  # found once a phrase is: most texts hold none
    out: list[str] = []
    done = 0
    for m in phrases:
        if protected is None:
            protected = [p.span() for p in _PROTECTED.rx.finditer(text)]
        found = _rewrite(text, m, day, protected)
        if found is None:
            continue
        at, note = found
        out.append(text[done:at])
        out.append(f" ({note})")
        done = at
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _end_of(text: str, m: re.Match[str]) -> int:
    """Where a phrase's date goes: after it, or after the noun of its possessive ("tomorrow's standup")."""
    possessive = _POSSESSIVE.rx.match(text, m.end())
    return m.end() if possessive is None else possessive.end()


# complexity over 15: one branch per kind of relative-date phrase (day word, weekday, span, count)
def _rewrite(text: str, m: re.Match[str], day: date, protected: list[tuple[int, int]]) -> tuple[int, str] | None:  # noqa: C901
    """Where to put the date after ``m`` and what it says, or None to leave it."""
    start, end = m.span()
    if any(a < end and start < b for a, b in protected):
        return None
    if start > 0 and text[start - 1] not in _BEFORE_CHARS:
        return None
    before = text[:start]
    g = m.groupdict()
    at = end
    possessive = _POSSESSIVE.rx.match(text, end)
    if possessive is not None:
        if g["rel"] and not g["part"] and possessive["noun"].lower() not in _EVENTS:
            return None  # "today's best practice", "yesterday's news"
        at = possessive.end()
    elif end < len(text) and text[end] not in _AFTER_CHARS:
        return None  # part of an identifier: "today-only", "tomorrow_ts"
    if _DATED_AFTER.rx.match(text, at) or _EXPLICIT.rx.search(text, max(0, start - _NEAR), min(len(text), at + _NEAR)):
        return None  # dated already
    sentence = _sentence_of(text, start)
    if g["rel"]:
        if _IDIOM_BEFORE.rx.search(before) and not _AS_OF.rx.search(before):
            return None  # "the tomorrow package", "no tomorrow", "the world of tomorrow"
        word = g["rel"]
        if word[0].isupper() and not word.isupper() and not _sentence_start(text, start):
            return None  # "the Today show": a name (all capitals is only loud)
        note = (day + timedelta(days=_DAY_SHIFT[g["rel"].lower()])).isoformat()
    elif g["day2"]:
        note = (day + timedelta(days=2 if g["d2dir"].lower().startswith("after") else -2)).isoformat()
    elif g["partday"]:
        note = (day - timedelta(days=1) if g["partday"].lower().startswith("last") else day).isoformat()
    elif g["wd"]:
        if _THE_BEFORE.rx.search(before):
            return None  # "the next Friday": relative to something else
        found = _weekday(day, " ".join(g["wmod"].lower().split()), _WEEKDAYS.index(g["wd"].lower()), sentence)
        if found is None:
            return None
        note = found.isoformat()
    elif g["period"]:
        if _THE_BEFORE.rx.search(before) or _OF_AFTER.rx.match(text, end):
            return None  # "the next week", "the last week of December"
        note = _period(day, g["pmod"].lower(), g["period"].lower())
    else:
        if _OF_AFTER.rx.match(text, end) or _VAGUE_AFTER.rx.match(text, end) or _THE_BEFORE.rx.search(before):
            return None  # "in two days of testing", "in a week or two"
        if g["inmod"] and _not_ahead(sentence):
            return None  # "we did it in a day", "we shipped it in two weeks", "it usually ships in 2 days"
        n = g["n"] or g["n2"]
        count = _NUMBERS[n.lower()] if n.lower() in _NUMBERS else int(n)
        if g["n2"] and g["dir"].lower() == "ago":
            count = -count
        when = _shift(day, count, (g["unit"] or g["unit2"]).lower().rstrip("s"))
        note = f"by {when.isoformat()}" if (g["inmod"] or "").lower() == "within" else when.isoformat()
    return at, note


def _weekday(day: date, mod: str, wd: int, sentence: str) -> date | None:
    ahead = (wd - day.weekday()) % 7  # 0..6 days to the next such weekday (0: today)
    if mod == "this":
        return day + timedelta(days=ahead)
    if mod == "next":
        monday = day - timedelta(days=day.weekday()) + timedelta(days=7)
        return monday + timedelta(days=wd)
    if mod in ("last", "since"):
        if mod == "since" and ahead == 0:
            return None  # "since Monday" said on a Monday: today, or a week ago
        return day - timedelta(days=(day.weekday() - wd) % 7 or 7)
    if mod not in ("coming", "this coming") and _not_ahead(sentence):
        return None  # "it was on Friday": the last one, not the coming one; "always on Friday": none; left as said
    return day + timedelta(days=ahead or 7)


def _period(day: date, mod: str, period: str) -> str:
    step = {"this": 0, "next": 1, "last": -1}[mod]
    if period in ("week", "weekend"):
        monday = day - timedelta(days=day.weekday()) + timedelta(days=7 * step)
        if period == "week":
            return f"the week of {monday.isoformat()}"
        return f"the weekend of {(monday + timedelta(days=5)).isoformat()}"
    if period == "month":
        first = _shift(day.replace(day=1), step, "month")
        return f"{first.year:04d}-{first.month:02d}"
    return f"{day.year + step:04d}"


def _shift(day: date, count: int, unit: str) -> date:
    if unit == "day":
        return day + timedelta(days=count)
    if unit == "week":
        return day + timedelta(days=7 * count)
    months = count * (12 if unit == "year" else 1)
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _sentence_of(text: str, at: int) -> str:
    start = max(text.rfind(c, 0, at) for c in ".!?;\n") + 1
    ends = [i for i in (text.find(c, at) for c in ".!?;\n") if i >= 0]
    return text[start:min(ends) if ends else len(text)]


def _sentence_start(text: str, at: int) -> bool:
    i = at - 1
    while i >= 0 and text[i] in " \t\"'“‘(":
        i -= 1
    return i < 0 or text[i] in ".!?:;\n"
