"""Writing systems: what the rules and the text analysis treat alike in every script."""

from __future__ import annotations

__all__ = ["CJK_CHAR"]

# A character of a script written without spaces: kana, Hangul compatibility jamo, Han (with
# extension A), Hangul syllables, CJK compatibility ideographs, Han extensions B and later
CJK_CHAR = (
    "[\u3040-\u30ff\u3131-\u318e\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0003134f]"
)
