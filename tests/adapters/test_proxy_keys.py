"""Client keys bound to namespaces (``memwire proxy --keys-file``), over real HTTP: the real proxy
server with the openai and anthropic SDKs and httpx in front of the fake provider. A key decides
its namespace on the LLM routes, the memory API and the page; a header may narrow it, never reach
another tenant; a revoked key is refused without a restart; the file never holds a key."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from memwire import MemoryStore, Middleware
from memwire._errors import ConfigError
from memwire._sim.fake_provider import FakeProvider, serve_in_thread
from memwire.adapters.server import _keys
from memwire.adapters.server._keys import add_key, read_keys, revoke_keys
from memwire.adapters.server._proxy import create_app
from memwire.cli import main

ADMIN = "admin-key-1"
QUESTION = "Where are the notes kept, which laptop OS, how do deploys go out, which database port?"
ALICE, ALICE_WORK, BOB = ("Alice keeps her notes in Obsidian", "The work laptop of Alice runs Fedora 40",
                          "Bob deploys with Kubernetes on Fridays")
DEFAULT = "The staging database is Postgres 15 on port 5433"  # the default namespace's (conftest)


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    return tmp_path / "keys.json"


@pytest.fixture
def tenants(keys_file: Path) -> dict[str, str]:
    """Two client keys: alice's and bob's."""
    return {ns: add_key(keys_file, ns, label=f"{ns}-laptop")[0] for ns in ("alice", "bob")}


@pytest.fixture
def served(mw: Middleware, keys_file: Path, tenants: dict[str, str]) -> Iterator[tuple[FakeProvider, str]]:
    mw.store_for("alice").add(ALICE)
    mw.store_for("alice.work").add(ALICE_WORK)
    mw.store_for("bob").add(BOB)
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(
            mw, openai_upstream=upstream.base_url, anthropic_upstream=upstream.base_url, proxy_key=ADMIN,
            keys_file=keys_file)) as proxy:
        yield fake, proxy.base_url


def chat(base: str, key: str | None, namespace: str | None = None) -> Any:
    headers = {k: v for k, v in (("x-memwire-key", key), ("x-memwire-namespace", namespace)) if v is not None}
    with openai.OpenAI(base_url=base + "/v1", api_key="sk-fake", max_retries=0, default_headers=headers) as c:
        return c.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])


def sent(fake: FakeProvider) -> str:
    """What reached the provider in the last request, as text."""
    return json.dumps(fake.last.body, ensure_ascii=False)


def seen(fake: FakeProvider) -> set[str]:
    """Which of the test's memories went into the last request."""
    return {m for m in (ALICE, ALICE_WORK, BOB, DEFAULT) if m in sent(fake)}


def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)


# ------------------------------------------------------------------------------ LLM routes


def test_no_key_or_an_unknown_key_is_401_and_nothing_goes_upstream(served: tuple[FakeProvider, str]) -> None:
    fake, base = served
    for key in (None, "mwk_not-a-key", ""):
        with pytest.raises(openai.AuthenticationError) as err:
            chat(base, key)
        assert err.value.status_code == 401 and "x-memwire-key" in str(err.value)
    assert httpx.get(base + "/v1/models", headers={"x-memwire-key": "mwk_nope"}).status_code == 401
    assert fake.requests == []


def test_a_bound_key_uses_its_own_namespace(served: tuple[FakeProvider, str], tenants: dict[str, str]) -> None:
    fake, base = served
    r = chat(base, tenants["alice"])
    assert r.headers["x-memwire-injected"] != "0" and seen(fake) == {ALICE}
    assert "x-memwire-key" not in fake.last.headers  # the client key stays with memwire
    chat(base, tenants["alice"], "alice")
    assert seen(fake) == {ALICE}
    chat(base, tenants["bob"])
    assert seen(fake) == {BOB}
    a = anthropic.Anthropic(base_url=base, api_key="sk-ant-fake", max_retries=0,
                            default_headers={"x-memwire-key": tenants["bob"]})
    a.messages.create(model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": QUESTION}])
    assert fake.last.path == "/v1/messages" and seen(fake) == {BOB}
    assert httpx.get(base + "/v1/models", headers={"x-memwire-key": tenants["bob"]}).status_code == 200


def test_a_header_may_narrow_to_a_sub_namespace(served: tuple[FakeProvider, str], tenants: dict[str, str]) -> None:
    fake, base = served
    chat(base, tenants["alice"], "alice.work")
    assert seen(fake) == {ALICE_WORK}


def test_another_namespace_is_403_never_another_tenants_memory(served: tuple[FakeProvider, str],
                                                              tenants: dict[str, str]) -> None:
    fake, base = served
    for asked in ("bob", "default", "alicex", "alice-work", "bob.alice", "alice."):
        with pytest.raises(openai.PermissionDeniedError) as err:
            chat(base, tenants["alice"], asked)
        assert err.value.status_code == 403 and "bound to namespace 'alice'" in str(err.value), asked
        assert err.value.body["code"] == "namespace_forbidden"  # type: ignore[index]
    a = anthropic.Anthropic(base_url=base, api_key="sk-ant-fake", max_retries=0,
                            default_headers={"x-memwire-key": tenants["alice"], "x-memwire-namespace": "bob"})
    with pytest.raises(anthropic.PermissionDeniedError) as refused:
        a.messages.create(model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": QUESTION}])
    assert refused.value.body["error"]["type"] == "permission_error"  # type: ignore[index]
    assert fake.requests == []


def test_the_proxy_key_may_name_any_namespace(served: tuple[FakeProvider, str]) -> None:
    fake, base = served
    chat(base, ADMIN)
    assert seen(fake) == {DEFAULT}
    chat(base, ADMIN, "bob")
    assert seen(fake) == {BOB}
    chat(base, ADMIN, "alice.work")
    assert seen(fake) == {ALICE_WORK}


def test_new_namespaces_spend_the_client_keys_budget(mw: Middleware, keys_file: Path, tenants: dict[str, str]) -> None:
    mw.config.proxy_new_namespaces_per_minute = 1
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(
            mw, openai_upstream=upstream.base_url, keys_file=keys_file)) as proxy:
        chat(proxy.base_url, tenants["alice"], "alice.a")
        with pytest.raises(openai.RateLimitError):  # the same client address, the same key: its minute is spent
            chat(proxy.base_url, tenants["alice"], "alice.b")
        chat(proxy.base_url, tenants["bob"], "bob.a")  # the same address, another key: a budget of its own
        assert len(fake.requests) == 2
        # the memory API and the page start namespaces on the same budget
        api = httpx.post(proxy.base_url + "/memwire/v1/memories", json={"text": "Alice plays chess"},
                         headers={"x-memwire-key": tenants["alice"], "x-memwire-namespace": "alice.c"})
        assert api.status_code == 429 and api.json()["error"]["code"] == "memwire_namespace_limit"
        page = httpx.post(proxy.base_url + "/memwire/ui/memories", params={"ns": "alice.d"},
                          data={"text": "Alice plays go"},
                          headers={"x-memwire-key": tenants["alice"], "origin": proxy.base_url})
        assert page.status_code == 429 and "new namespaces" in page.text
        assert not mw.store_for("alice.c").memories() and not mw.store_for("alice.d").memories()


# ------------------------------------------------------------------------------ memory API, page, metrics


def test_the_memory_api_serves_the_keys_namespace_only(served: tuple[FakeProvider, str], mw: Middleware,
                                                      tenants: dict[str, str]) -> None:
    _, base = served
    alice = httpx.Client(base_url=base + "/memwire/v1", headers={"x-memwire-key": tenants["alice"]})
    assert [m["text"] for m in alice.get("/memories").json()["data"]] == [ALICE]
    added = alice.post("/memories", json={"text": "Alice reviews pull requests on Mondays"})
    assert added.status_code == 201 and added.json()["id"] in mw.store_for("alice")
    assert added.json()["id"] not in mw.store
    narrowed = alice.post("/memories", json={"text": "Alice's team meets on Thursdays"},
                          headers={"x-memwire-namespace": "alice.work"})
    assert narrowed.status_code == 201 and narrowed.json()["id"] in mw.store_for("alice.work")
    for ns in ("bob", "default"):
        r = alice.get("/memories", headers={"x-memwire-namespace": ns})
        assert r.status_code == 403 and r.json()["error"]["code"] == "namespace_forbidden"
        r = alice.post("/memories", json={"text": "planted"}, headers={"x-memwire-namespace": ns})
        assert r.status_code == 403
    bob_id = mw.store_for("bob").memories()[0].id
    assert alice.delete(f"/memories/{bob_id}").status_code == 404  # looked up in alice's store only
    assert bob_id in mw.store_for("bob") and not any("planted" in m.text for m in mw.store_for("bob").memories())
    r = httpx.get(base + "/memwire/v1/memories", headers={"x-memwire-key": "mwk_unknown"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_memwire_key"
    admin = httpx.get(base + "/memwire/v1/memories", headers={"x-memwire-key": ADMIN, "x-memwire-namespace": "bob"})
    assert [m["text"] for m in admin.json()["data"]] == [BOB]


def test_the_page_opens_the_keys_namespace_only(served: tuple[FakeProvider, str], mw: Middleware,
                                                tenants: dict[str, str]) -> None:
    _, base = served
    ui = base + "/memwire/ui"
    assert httpx.get(ui).status_code == 401  # asks for a key
    page = httpx.Client(base_url=base)
    wrong = page.post("/memwire/ui/login", data={"key": "mwk_wrong"})
    assert wrong.status_code == 401 and "not the proxy key or your client key" in wrong.text
    assert page.post("/memwire/ui/login", data={"key": tenants["alice"]}).status_code == 303  # the cookie is set
    own = page.get("/memwire/ui")
    assert own.status_code == 200 and ALICE in own.text and BOB not in own.text and "Postgres" not in own.text
    assert ALICE_WORK in page.get("/memwire/ui", params={"ns": "alice.work"}).text
    for ns in ("bob", "default"):
        r = page.get("/memwire/ui", params={"ns": ns})
        assert r.status_code == 403 and BOB not in r.text and "bound to namespace" in r.text
    r = page.post("/memwire/ui/memories", params={"ns": "bob"}, data={"text": "planted by alice"},
                  headers={"origin": base})
    assert r.status_code == 403 and not any("planted" in m.text for m in mw.store_for("bob").memories())
    r = page.post("/memwire/ui/memories", data={"text": "Alice drinks green tea"}, headers={"origin": base})
    assert r.status_code == 303 and any("green tea" in m.text for m in mw.store_for("alice").memories())
    assert page.get("/memwire/ui/sessions", params={"ns": "bob"}).status_code == 403
    admin = httpx.get(ui, params={"ns": "bob"}, headers={"x-memwire-key": ADMIN})
    assert admin.status_code == 200 and BOB in admin.text


def test_metrics_are_the_operators(served: tuple[FakeProvider, str], tenants: dict[str, str]) -> None:
    _, base = served
    assert httpx.get(base + "/metrics").status_code == 401
    tenant = httpx.get(base + "/metrics", headers={"x-memwire-key": tenants["alice"]})
    assert tenant.status_code == 403 and "proxy key" in tenant.text
    assert httpx.get(base + "/metrics", headers={"authorization": f"Bearer {tenants['alice']}"}).status_code == 403
    assert httpx.get(base + "/metrics", headers={"authorization": f"Bearer {ADMIN}"}).status_code == 200
    assert httpx.get(base + "/metrics", headers={"x-memwire-key": ADMIN}).status_code == 200
    assert httpx.get(base + "/memwire/healthz").status_code == 200


# ------------------------------------------------------------------------------ the file, live


def test_a_revoked_key_is_refused_and_a_new_one_works_without_a_restart(
        served: tuple[FakeProvider, str], keys_file: Path, tenants: dict[str, str]) -> None:
    fake, base = served
    carol, _ = add_key(keys_file, "carol", label="carol")

    def status(key: str) -> int:
        return httpx.get(base + "/memwire/v1/memories", headers={"x-memwire-key": key}).status_code

    until(lambda: status(carol) == 200)
    revoke_keys(keys_file, "alice-laptop")
    until(lambda: status(tenants["alice"]) == 401)
    with pytest.raises(openai.AuthenticationError):
        chat(base, tenants["alice"])
    assert status(tenants["bob"]) == 200 and fake.requests == []


def test_a_broken_or_missing_file_refuses_client_keys_not_the_proxy_key(
        served: tuple[FakeProvider, str], keys_file: Path, tenants: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, base = served
    monkeypatch.setattr(_keys, "RELOAD_SECONDS", 0.0)  # re-read on every request: no waiting here
    good = keys_file.read_bytes()

    def status(key: str) -> int:
        return httpx.get(base + "/memwire/v1/memories", headers={"x-memwire-key": key}).status_code

    keys_file.write_text('{"version": 1, "keys": [', encoding="utf-8")
    r = httpx.get(base + "/memwire/v1/memories", headers={"x-memwire-key": tenants["bob"]})
    assert r.status_code == 503 and r.json()["error"]["code"] == "keys_unavailable"  # never the keys of before
    assert status(ADMIN) == 200
    keys_file.write_bytes(good)
    assert status(tenants["bob"]) == 200
    os.chmod(keys_file, 0o622)  # anyone may write it now: whoever does could give themselves a key
    assert status(tenants["bob"]) == 503
    os.chmod(keys_file, 0o600)
    assert status(tenants["bob"]) == 200
    keys_file.unlink()
    assert status(tenants["bob"]) == 401 and status(ADMIN) == 200


def test_a_hand_written_file_cannot_put_one_tenant_inside_another(mw: Middleware, keys_file: Path,
                                                                  tenants: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="overlaps 'alice'"):
        add_key(keys_file, "alice.team")
    # written by hand all the same: alice may not narrow into the namespace bound to another key
    data = json.loads(keys_file.read_text())
    team = "mwk_team-key"
    data["keys"].append({"sha256": _keys.hash_key(team), "namespace": "alice.team", "label": "", "created": ""})
    keys_file.write_text(json.dumps(data))
    mw.store_for("alice.team").add("The team keeps its notes in Notion")
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(
            mw, openai_upstream=upstream.base_url, keys_file=keys_file)) as proxy:
        with pytest.raises(openai.PermissionDeniedError):
            chat(proxy.base_url, tenants["alice"], "alice.team")
        with pytest.raises(openai.PermissionDeniedError):
            chat(proxy.base_url, tenants["alice"], "alice.team.sub")
        chat(proxy.base_url, team)
        assert "Notion" in sent(fake)


def test_the_file_holds_hashes_only_privately(keys_file: Path, tenants: dict[str, str], tmp_path: Path) -> None:
    raw = keys_file.read_bytes()
    for key in tenants.values():
        assert key.startswith("mwk_") and len(key) > 40
        assert key.encode() not in raw and key[4:24].encode() not in raw
    assert os.stat(keys_file).st_mode & 0o777 == 0o600
    assert {e.namespace for e in read_keys(keys_file)} == {"alice", "bob"}
    assert not list(tmp_path.glob(".keys.json.*.tmp"))  # no temporary file left behind
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"version": 1, "keys": []}')
    link = tmp_path / "link.json"
    link.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="symbolic link"):
        add_key(link, "carol")
    assert elsewhere.read_text() == '{"version": 1, "keys": []}'
    os.chmod(keys_file, 0o666)
    with pytest.raises(ConfigError, match="writable by other users"):
        _keys.KeyRing(keys_file)


# ------------------------------------------------------------------------------ memwire keys


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_keys_add_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(tmp_path / "keys.json")
    code, out, err = run(capsys, "keys", "add", "alice", "--label", "alice-laptop", "--keys-file", f)
    key = out.strip()
    assert code == 0 and key.startswith("mwk_") and "shown this once" in err
    code, out, _ = run(capsys, "keys", "add", "bob", "--keys-file", f, "--json")
    bob = json.loads(out)
    assert code == 0 and bob["namespace"] == "bob" and bob["key"].startswith("mwk_")
    code, out, _ = run(capsys, "keys", "list", "--keys-file", f)
    assert code == 0 and "alice-laptop" in out and bob["fingerprint"] in out and key not in out
    assert bob["key"] not in out
    code, out, _ = run(capsys, "keys", "list", "--keys-file", f, "--json")
    listed = json.loads(out)
    assert [(k["namespace"], k["label"]) for k in listed] == [("alice", "alice-laptop"), ("bob", "")]
    assert all(set(k) == {"fingerprint", "namespace", "label", "created"} for k in listed)
    code, out, _ = run(capsys, "keys", "revoke", "alice-laptop", "--keys-file", f)
    assert code == 0 and "revoked" in out and "'alice'" in out
    code, out, _ = run(capsys, "keys", "revoke", bob["fingerprint"][:8], "--keys-file", f)
    assert code == 0 and bob["fingerprint"] in out
    code, out, _ = run(capsys, "keys", "list", "--keys-file", f)
    assert out.startswith("no keys in")


@pytest.mark.parametrize("args, problem", [
    (["keys", "add", "alice"], "no keys file"),
    (["keys", "add", "../etc", "--keys-file", "{f}"], "invalid namespace"),
    (["keys", "add", "default", "--keys-file", "{f}"], "default namespace"),
    (["keys", "add", "carol", "--label", "taken", "--keys-file", "{f}"], "label 'taken' is taken"),
    (["keys", "add", "taken.sub", "--keys-file", "{f}"], "overlaps"),
    (["keys", "add", "x", "--keys-file", "{d}/no/such/dir/keys.json"], "does not exist"),
    (["keys", "revoke", "nobody", "--keys-file", "{f}"], "no key with fingerprint or label 'nobody'"),
    (["keys", "list", "--keys-file", "{bad}"], "not valid JSON"),
    (["keys", "list", "--keys-file", "{d}"], "is a directory"),
    (["keys"], "say add, list or revoke"),
])
def test_keys_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                  problem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no project directory around to be told about
    f, bad = tmp_path / "keys.json", tmp_path / "bad.json"
    add_key(f, "taken", label="taken")
    bad.write_text("{not json")
    code, _, err = run(capsys, *[a.format(f=f, d=tmp_path, bad=bad) for a in args])
    assert code == 2 and problem in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_proxy_command_checks_its_keys_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    def serve(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the proxy would have started (its workers would fail on the file, one by one)")

    monkeypatch.setattr(uvicorn, "run", serve)
    code, _, err = run(capsys, "proxy", "--dir", str(tmp_path / "mem"), "--workers", "2",
                       "--keys-file", str(tmp_path / "none.json"))
    assert code == 2 and "not found" in err and "memwire keys add" in err
    from memwire.adapters.server._proxy_cli import check_bind

    check_bind("0.0.0.0", True, None, tmp_path / "keys.json")  # a keys file is a key: remote clients may come
    with pytest.raises(ConfigError, match="--keys-file"):
        check_bind("0.0.0.0", True, None, None)


def test_a_proxy_without_keys_is_as_before(mw: Middleware) -> None:
    mw.store_for("bob").add(BOB)
    fake = FakeProvider(reply=lambda body, api: "Noted.")
    with serve_in_thread(fake) as upstream, serve_in_thread(create_app(mw, openai_upstream=upstream.base_url)) as p:
        chat(p.base_url, None, "bob")
        assert seen(fake) == {BOB}
        chat(p.base_url, "anything")
        assert seen(fake) == {DEFAULT}

