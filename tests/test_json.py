"""JSON on a request's path (memwire._json): orjson writes what it writes as the json module does,
what it refuses or would change is left to the json module, and NaN and infinities are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwire import _json
from memwire._json import NonFinite, dump_json, load_json

pytest.importorskip("orjson")  # memwire[fast] and memwire[test]


def _plain(value: Any) -> bytes:
    """dump_json without orjson (the json module's branch)."""
    fast, _json._orjson = _json._orjson, lambda: None  # type: ignore[method-assign]
    try:
        return dump_json(value)
    finally:
        _json._orjson = fast  # type: ignore[method-assign]


@pytest.mark.parametrize("raw", [
    b'{"a": [1, 2.5, -0.0, 1E2, true, null, "x\\u00e9\\ud83d\\ude00"], "a": {}}',
    '{"caf\u00e9": "\u2028"}', b'\xef\xbb\xbf{"bom": 1}', '{"x": 1}'.encode("utf-16"),
    b'123456789012345678901234567890', b'-9223372036854775809', b'"\\ud800"', b'  [ ]  ',
])
def test_load_json_reads_what_json_loads_reads(raw: bytes | str) -> None:
    assert load_json(raw) == json.loads(raw)
    assert type(load_json(raw)) is type(json.loads(raw))


@pytest.mark.parametrize("raw", [b'{"a": }', b'\xff', '\ufeff{}', b'[1, 2', b'', b'{"a": 1} x'])
def test_load_json_refuses_what_json_loads_refuses_with_its_error(raw: bytes | str) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(raw)
    with pytest.raises(ValueError) as got:
        load_json(raw)
    assert (type(got.value), str(got.value)) == (type(expected.value), str(expected.value))


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_nan_and_infinities_are_read_as_numbers_that_no_writer_writes(number: str) -> None:
    body = load_json(f'{{"temperature": {number}, "top_p": 0.5}}'.encode())
    assert isinstance(body["temperature"], NonFinite) and type(body["top_p"]) is float
    for write in (dump_json, _plain):  # orjson would write null: the caller's request would change
        with pytest.raises(ValueError):
            write(body)


@pytest.mark.parametrize("value", [
    {"text": "lone \ud800 surrogate"},  # not UTF-8: escaped
    {"big": 2**70, "small": -(2**63) - 1},  # beyond 64 bits
    {1: "a key that is not a string"},
    ["deep"],  # nested 300 times below: deeper than orjson writes
])
def test_what_orjson_refuses_is_written_by_the_json_module(value: Any) -> None:
    if value == ["deep"]:
        for _ in range(300):
            value = [value]
    assert dump_json(value) == _plain(value)
    assert json.loads(dump_json(value)) == json.loads(json.dumps(value))


_leaves = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text()
_values = st.recursive(_leaves, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_orjson_writes_strings_integers_and_structure_byte_for_byte_as_the_json_module(value: Any) -> None:
    assert dump_json(value) == _plain(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_float_keeps_its_value(value: float) -> None:
    assert json.loads(dump_json([value])) == json.loads(_plain([value])) == [value]
