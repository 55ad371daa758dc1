"""JSON on a request's path: the request bodies memwire reads and rewrites, the ledger's lines.

Writing uses orjson where it installs (``memwire[fast]``): a 12 KB request body in 5 µs against
the standard library's 60-70. It writes every string and integer as the standard library does
(``ensure_ascii=False``, compact); a float keeps its value, only small ones are spelled otherwise
(``1e-7`` for ``1e-07``). What orjson refuses (a lone surrogate, an integer beyond 64 bits, a key
that is not a string, nesting deeper than 255, a ``NonFinite``) the standard library writes, as
before.

Reading stays with the standard library: orjson reads an integer beyond 64 bits as a float, and
finding such numbers in a body first costs more than orjson saves. ``load_json`` reads NaN and
infinities (Python's JSON has them, JSON does not) as ``NonFinite``, which orjson refuses: else it
would write them as ``null``, changing the caller's request instead of refusing it.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

__all__ = ["NonFinite", "dump_json", "load_json"]


class NonFinite(float):
    """NaN or an infinity that ``load_json`` read (``NaN``, ``-Infinity``, ``1e400``)."""


def _float(text: str) -> float:
    value = float(text)
    return value if value - value == 0.0 else NonFinite(value)  # inf - inf and nan - nan are nan


_DECODER = json.JSONDecoder(parse_float=_float, parse_constant=NonFinite)


def load_json(raw: bytes | str) -> Any:
    """``json.loads(raw)`` (the same values and errors), NaN and infinities read as ``NonFinite``."""
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode(json.detect_encoding(raw), "surrogatepass")  # as json.loads does
    elif raw.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
    return _DECODER.decode(raw)


@cache
def _orjson() -> Any:
    try:
        import orjson
    except ImportError:
        return None
    return orjson


def dump_json(value: Any) -> bytes:
    """Compact JSON that keeps non-ASCII text as UTF-8, not as \\uXXXX escapes: the same JSON in
    fewer bytes. A lone surrogate (valid JSON, not valid UTF-8) is escaped. NaN or an infinity
    raises ValueError rather than becoming ``NaN`` (not JSON): callers then send the caller's own
    bytes. (A float NaN that ``load_json`` did not read would become ``null`` with orjson.)"""
    fast = _orjson()
    if fast is not None:
        try:
            return fast.dumps(value)  # type: ignore[no-any-return]
        except TypeError:  # orjson.JSONEncodeError: left to the standard library
            pass
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
