"""Relative dates written as absolute ones (issue 33 item 4): the phrase stays, the date follows it."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from memwire.policies._dates import absolute_dates, day_of, might_hold_dates, said_day, zone, zone_named

SAT = date(2026, 11, 28)  # a Saturday
THU = date(2026, 11, 26)  # a Thursday

REWRITTEN = [
    # (said on, what was said, what is stored)
    (SAT, "The code freeze starts tomorrow.", "The code freeze starts tomorrow (2026-11-29)."),
    (SAT, "The office is closed today", "The office is closed today (2026-11-28)"),
    (SAT, "Today we ship the beta.", "Today (2026-11-28) we ship the beta."),
    (SAT, "The migration ran yesterday.", "The migration ran yesterday (2026-11-27)."),
    (SAT, "The deploy is tonight.", "The deploy is tonight (2026-11-28)."),
    (SAT, "Standup moved to tomorrow morning at 9.", "Standup moved to tomorrow morning (2026-11-29) at 9."),
    (SAT, "The outage was last night.", "The outage was last night (2026-11-27)."),
    (SAT, "The audit is the day after tomorrow.", "The audit is the day after tomorrow (2026-11-30)."),
    (SAT, "We released the day before yesterday.", "We released the day before yesterday (2026-11-26)."),
    (SAT, "The billing bug appeared last week.", "The billing bug appeared last week (the week of 2026-11-16)."),
    (SAT, "The team offsite is next week.", "The team offsite is next week (the week of 2026-11-30)."),
    (SAT, "Budgets close this week", "Budgets close this week (the week of 2026-11-23)"),
    (SAT, "Invoices are due this month.", "Invoices are due this month (2026-11)."),
    (SAT, "The price goes up next month.", "The price goes up next month (2026-12)."),
    (SAT, "We switched to pnpm last month.", "We switched to pnpm last month (2026-10)."),
    (SAT, "The contract ends next year.", "The contract ends next year (2027)."),
    (SAT, "On-call is Ana this weekend.", "On-call is Ana this weekend (the weekend of 2026-11-28)."),
    (SAT, "The cert expires in two days.", "The cert expires in two days (2026-11-30)."),
    (SAT, "The beta ends in 3 weeks.", "The beta ends in 3 weeks (2026-12-19)."),
    (SAT, "The trial ends in a month", "The trial ends in a month (2026-12-28)"),
    (SAT, "The index was rebuilt two days ago.", "The index was rebuilt two days ago (2026-11-26)."),
    (SAT, "Renew the domain 10 days from now.", "Renew the domain 10 days from now (2026-12-08)."),
    (SAT, "Ship the fix within 2 weeks.", "Ship the fix within 2 weeks (by 2026-12-12)."),
    (SAT, "The freeze starts in two days.", "The freeze starts in two days (2026-11-30)."),
    (SAT, "It will be released in two weeks.", "It will be released in two weeks (2026-12-12)."),  # -ed, not past
    (SAT, "The patch is expected within 3 days.", "The patch is expected within 3 days (by 2026-12-01)."),
    (SAT, "We need this fixed in two days.", "We need this fixed in two days (2026-11-30)."),  # a wish: ahead
    (SAT, "Get this merged in a week.", "Get this merged in a week (2026-12-05)."),
    (SAT, "Tomorrow's standup is cancelled.", "Tomorrow's standup (2026-11-29) is cancelled."),
    (SAT, "Next week's release is 4.2.", "Next week's release (the week of 2026-11-30) is 4.2."),
    (SAT, "The API is frozen as of today.", "The API is frozen as of today (2026-11-28)."),
    (SAT, "Finish it by the end of today.", "Finish it by the end of today (2026-11-28)."),
    # weekdays: "this" is on or after the day said, "next" is in next week, "on"/"by" the coming one
    (THU, "The demo is this Friday.", "The demo is this Friday (2026-11-27)."),
    (THU, "The demo is next Friday.", "The demo is next Friday (2026-12-04)."),
    (THU, "The review is on Monday.", "The review is on Monday (2026-11-30)."),
    (THU, "It will be deployed on Monday.", "It will be deployed on Monday (2026-11-30)."),  # -ed, not past
    (THU, "The release is scheduled on Friday.", "The release is scheduled on Friday (2026-11-27)."),
    (THU, "Have it fixed by Friday.", "Have it fixed by Friday (2026-11-27)."),  # an order, not the past
    (THU, "Send the report by Thursday.", "Send the report by Thursday (2026-12-03)."),
    (THU, "Send the report this Thursday.", "Send the report this Thursday (2026-11-26)."),
    (THU, "We upgraded the cluster last Tuesday.", "We upgraded the cluster last Tuesday (2026-11-24)."),
    (THU, "We upgraded the cluster last Thursday.", "We upgraded the cluster last Thursday (2026-11-19)."),
    (THU, "CI has been red since Monday.", "CI has been red since Monday (2026-11-23)."),
    (THU, "The launch is this coming Sunday evening.", "The launch is this coming Sunday evening (2026-11-29)."),
    (SAT, "Deploy next Friday.", "Deploy next Friday (2026-12-04)."),
    # month and year rollover, month ends, a leap day
    (date(2026, 12, 31), "The freeze ends tomorrow.", "The freeze ends tomorrow (2027-01-01)."),
    (date(2026, 12, 15), "Taxes are due next month.", "Taxes are due next month (2027-01)."),
    (date(2027, 1, 10), "We hired Ana last month.", "We hired Ana last month (2026-12)."),
    (date(2026, 12, 30), "The office reopens next week.", "The office reopens next week (the week of 2027-01-04)."),
    (date(2027, 1, 31), "The audit is in a month.", "The audit is in a month (2027-02-28)."),
    (date(2028, 2, 29), "Renew it in a year.", "Renew it in a year (2029-02-28)."),
    (date(2027, 1, 1), "We migrated yesterday.", "We migrated yesterday (2026-12-31)."),
    (date(2026, 3, 2), "The backup ran 3 days ago.", "The backup ran 3 days ago (2026-02-27)."),
]


@pytest.mark.parametrize(("day", "said", "stored"), REWRITTEN)
def test_a_relative_date_gets_the_absolute_one_after_it(day: date, said: str, stored: str) -> None:
    assert absolute_dates(said, day) == stored
    assert absolute_dates(stored, day + (day - date(2000, 1, 1))) == stored  # dated: never again, whenever


LEFT = [
    "Today's best practice is to pin dependencies.",     # idioms, not dates
    "That is yesterday's news.",
    "Tomorrow's world is electric.",
    "Install the tomorrow package for scheduling.",      # a name
    "The app has a today view.",
    "Code like there is no tomorrow.",
    "Build the tools of tomorrow.",
    "Watch the Today show.",                             # a title inside a sentence
    "Run `deploy --when tomorrow` to schedule it.",      # code
    "```\ntoday = date.today()\n```",
    "Docs at https://example.com/releases/next-week/today.",   # a URL
    "The cron file is /etc/cron.d/tomorrow.",           # a path
    "See notes/today.md for the plan.",                 # a file name
    "Set $TODAY before the build.",                      # identifiers
    "Pass --tomorrow to the CLI.",
    "The column is tomorrow_ts.",
    "Use the today-only discount code.",
    "The freeze starts tomorrow (2026-11-29).",         # dated already
    "The freeze starts tomorrow, Nov 29.",
    "The freeze starts on 2026-11-29, tomorrow.",
    "Standups are on Mondays.",                          # a habit, not a day
    "Every Monday we rotate on-call.",
    "Friday is the deploy day.",                         # a bare weekday
    "It was on Friday that we saw it.",                 # the past: not the coming Friday
    "Order 1700000000000 shipped on Friday.",           # a past-tense verb in -ed
    "We deployed on Monday and nothing broke.",
    "We always deploy on Friday.",                      # a habit
    "The office is open from Monday to Friday.",        # a range of weekdays
    "Support answers between Monday and Friday.",
    "Orders usually ship in 2 days.",
    "We did the migration in a day.",
    "The build failed in two days.",                    # a past-tense verb in -ed: "in N days" counts
    "We shipped the rewrite in two weeks.",             # no day ahead, as "on Friday" (one test for both)
    "The team migrated the database in 3 days.",
    "The fix landed within 2 weeks.",
    "It crashed on Friday.",
    "The last week of December is quiet.",              # not relative to the day said
    "The next week was hard.",
    "Results come in a week or two.",                   # vague
    "In two days of testing nothing failed.",
    "Weekly reports go out on time.",                    # look-alike words
    "The monthly invoice is due.",
    "The Yearly plan is cheaper.",
    "Keep in mind the date format.",
]


@pytest.mark.parametrize("said", LEFT)
def test_look_alikes_code_urls_paths_and_dated_text_are_left(said: str) -> None:
    assert absolute_dates(said, SAT) == said


@pytest.mark.parametrize(("said", "later"), [
    # "since Monday" said on a Monday is left (today, or a week ago?); on any later day it would get
    # a date that was never meant: a text made absolute already is left whole
    ("CI has been red since Monday; the freeze starts tomorrow.", date(2026, 11, 25)),
    ("Since Monday the queue is slow, and the fix lands in two days.", date(2026, 12, 2)),
])
def test_a_text_made_absolute_is_never_dated_again_from_a_later_day(said: str, later: date) -> None:
    monday = date(2026, 11, 23)
    stored = absolute_dates(said, monday)
    assert "since Monday (" not in stored.replace("Since", "since") and stored != said
    assert absolute_dates(stored, later) == stored


def test_a_phrase_in_parentheses_that_is_no_date_of_ours_does_not_stop_the_others() -> None:
    assert absolute_dates("We ship tomorrow (v2.3) and the docs next week.", SAT) == (
        "We ship tomorrow (v2.3) and the docs next week (the week of 2026-11-30).")


def test_several_phrases_in_one_statement_each_get_their_date() -> None:
    assert absolute_dates("Freeze from tomorrow until next Friday; the retro was yesterday.", THU) == (
        "Freeze from tomorrow (2026-11-27) until next Friday (2026-12-04); the retro was yesterday (2026-11-25).")


@pytest.mark.parametrize(("at", "tz", "day"), [
    # late evening UTC is already tomorrow in Paris; early morning UTC is still yesterday in New York
    (datetime(2026, 11, 28, 23, 30, tzinfo=timezone.utc), "Europe/Paris", date(2026, 11, 29)),
    (datetime(2026, 11, 28, 23, 30, tzinfo=timezone.utc), "UTC", date(2026, 11, 28)),
    (datetime(2026, 11, 28, 23, 30, tzinfo=timezone.utc), None, date(2026, 11, 28)),
    (datetime(2026, 11, 29, 3, 0, tzinfo=timezone.utc), "America/New_York", date(2026, 11, 28)),
    (datetime(2026, 12, 31, 23, 15, tzinfo=timezone.utc), "Europe/Paris", date(2027, 1, 1)),
    (datetime(2026, 12, 31, 12, 0, tzinfo=timezone.utc), "Pacific/Kiritimati", date(2027, 1, 1)),
    (datetime(2026, 7, 31, 22, 30, tzinfo=timezone.utc), "Europe/Paris", date(2026, 8, 1)),  # summer time: +2
    (datetime(2026, 11, 28, 22, 30, tzinfo=timezone.utc), "Europe/Paris", date(2026, 11, 28)),  # winter: +1
])
def test_the_day_said_is_the_speakers_calendar_day(at: datetime, tz: str | None, day: date) -> None:
    assert day_of(at, tz) == day
    assert day_of(at.timestamp(), tz) == day


def test_tomorrow_said_at_half_past_eleven_utc_in_paris_is_the_day_after_the_utc_one() -> None:
    at = datetime(2026, 11, 28, 23, 30, tzinfo=timezone.utc).timestamp()
    said = "The code freeze starts tomorrow."
    assert absolute_dates(said, day_of(at, "Europe/Paris")) == "The code freeze starts tomorrow (2026-11-30)."
    assert absolute_dates(said, day_of(at, None)) == "The code freeze starts tomorrow (2026-11-29)."


def test_a_naive_datetime_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="aware datetime"):
        day_of(datetime(2026, 11, 28, 12, 0))


def test_zones_by_name_and_an_unknown_one_named_in_the_error() -> None:
    assert zone(None) is timezone.utc and zone("") is timezone.utc
    assert str(zone("Europe/Paris")) == "Europe/Paris"
    with pytest.raises(ValueError, match="'Mars/Olympus'"):
        zone("Mars/Olympus")


@pytest.mark.parametrize(("text", "tz"), [
    ("User's timezone is Europe/Paris.", "Europe/Paris"),
    ("User's time zone is America/New_York", "America/New_York"),
    ("User's timezone is UTC.", "UTC"),
    ("User's timezone is CET or so.", None),      # not an IANA area/city name
    ("User's timezone is Mars/Olympus.", None),
    ("User's editor is vim.", None),
])
def test_the_zone_a_statement_names(text: str, tz: str | None) -> None:
    assert zone_named(text) == tz


def test_the_day_a_memory_was_said_comes_from_its_date() -> None:
    assert said_day("2026-11-28") == date(2026, 11, 28)
    assert said_day("2026-11-28T23:50+01:00") == date(2026, 11, 28)
    at_paris = datetime.now(timezone.utc).astimezone(zone("Pacific/Kiritimati")).date()
    assert said_day(None, "Pacific/Kiritimati") == at_paris
    assert said_day("someday", "Pacific/Kiritimati") == at_paris
    assert said_day("2026-13-45", "Pacific/Kiritimati") == at_paris


def test_the_cheap_test_says_no_for_text_without_any_hint() -> None:
    assert not might_hold_dates("The staging database listens on port 5433.")
    assert might_hold_dates("It starts TOMORROW")
    assert absolute_dates("It starts TOMORROW", SAT) == "It starts TOMORROW (2026-11-29)"


def test_the_configured_timezone_is_checked_by_name() -> None:
    from memwire._config_model import make_config
    from memwire._errors import ConfigError

    assert make_config({"timezone": " Europe/Paris "}).timezone == "Europe/Paris"
    assert make_config({}).timezone is None and make_config({"timezone": ""}).timezone is None
    with pytest.raises(ConfigError, match="timezone: unknown time zone 'Mars/Olympus'"):
        make_config({"timezone": "Mars/Olympus"})
