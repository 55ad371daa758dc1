"""Every write path passes the stores' ``_checked``: relative dates in a new memory become absolute
ones there, from the day it was said (issue 33 item 4), on both backends."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memwire.memory._model import Memory
from memwire.memory._store import _checked
from memwire.policies._dates import zone

from ..stores import StoreSpec


def test_a_dated_memory_is_rewritten_from_its_own_day(make_store: StoreSpec) -> None:
    store = make_store()
    mem = store.add("The code freeze starts tomorrow.", tags=["fact"], date="2026-11-28")
    assert (mem.text, mem.date) == ("The code freeze starts tomorrow (2026-11-29).", "2026-11-28")
    assert [m.text for m in make_store().memories()] == ["The code freeze starts tomorrow (2026-11-29)."]
    again = store.add(mem.text, date="2026-12-05")  # already absolute: the same memory
    assert again.id == mem.id and len(store.memories()) == 1


def test_a_dateless_memory_is_dated_today_in_the_stores_zone(make_store: StoreSpec) -> None:
    store = make_store(timezone="Pacific/Kiritimati")  # +14: its day is rarely the UTC one
    today = datetime.now(timezone.utc).astimezone(zone("Pacific/Kiritimati")).date()
    mem = store.add("The office is closed tomorrow.")
    if mem.date != today.isoformat():  # the day turned between the two lines
        today = datetime.now(timezone.utc).astimezone(zone("Pacific/Kiritimati")).date()
    assert mem.date == today.isoformat()
    assert mem.text == f"The office is closed tomorrow ({(today + timedelta(days=1)).isoformat()})."
    assert store.namespace_store("alice").timezone == "Pacific/Kiritimati"
    assert store.inbox.timezone == "Pacific/Kiritimati"


def test_a_memory_without_relative_dates_stays_dateless(make_store: StoreSpec) -> None:
    mem = make_store().add("The staging database listens on port 5433.")
    assert mem.date is None and mem.text == "The staging database listens on port 5433."


def test_copies_into_the_archive_are_kept_as_they_were(make_store: StoreSpec) -> None:
    store = make_store()
    store.archive_copy([Memory.create("The deploy is tomorrow.")], "forgotten")
    assert [m.text for m in store.archive.memories()] == ["The deploy is tomorrow."]


def test_the_rule_itself_screened_or_not() -> None:
    mem = Memory.create("Ship it next week.", date="2026-11-28")
    assert _checked(mem).text == "Ship it next week (the week of 2026-11-30)."
    assert _checked(mem, screen=False).text == "Ship it next week."


def test_memwire_add_dates_in_the_configured_zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The setting reaches every store a config opens (open_store): `memwire add` with it."""
    from memwire import MemoryStore
    from memwire._config_model import make_config
    from memwire.cli import main
    from memwire.memory._open import open_store

    assert open_store(make_config({"dir": tmp_path, "timezone": "Asia/Tokyo"})).timezone == "Asia/Tokyo"
    monkeypatch.setenv("MEMWIRE_TIMEZONE", "Pacific/Kiritimati")
    monkeypatch.setenv("MEMWIRE_HOME", str(tmp_path / "home"))
    assert main(["add", "--dir", str(tmp_path / "mem"), "The office is closed tomorrow."]) == 0
    [mem] = MemoryStore(tmp_path / "mem").memories()
    today = datetime.now(timezone.utc).astimezone(zone("Pacific/Kiritimati")).date()
    assert mem.date in (today.isoformat(), (today - timedelta(days=1)).isoformat())  # the day may turn meanwhile
    said = datetime.fromisoformat(mem.date or "").date()
    assert mem.text == f"The office is closed tomorrow ({(said + timedelta(days=1)).isoformat()})."
