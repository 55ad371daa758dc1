"""What a whole-file edit does to memories (``Store.edit_file``, the Anthropic memory tool's way of
writing): the memories a file lost and gained, which lost one a gained one rewrote in place, and
the report the store gives back (``_model.FileEdit``) so the tool can tell Claude what left for the archive.

A file is compared as memories, not as text: a memory's id comes from its words, so a line whose
tags, pin or place changed is the same memory, and one whose words changed is another. A removed
memory and an added one at the same place of the edit (a block ``difflib`` sees replaced) are one
line rewritten: the edit is an explicit replacement, whatever the words (like ``add(..., replaces=)``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from ._model import Memory
from ._supersede import compare

__all__ = ["Diff", "diff"]


@dataclass(frozen=True, slots=True)
class Diff:
    """``diff``'s answer: memories in file order."""

    removed: list[Memory]
    added: list[Memory]
    rewritten: list[tuple[Memory, Memory]]  # (removed, added): one line rewritten in place


def _unique(mems: Sequence[Memory]) -> list[Memory]:
    return list({m.id: m for m in reversed(mems)}.values())[::-1]  # the first of each id, in order


def diff(old: Sequence[Memory], new: Sequence[Memory]) -> Diff:
    """The memories a file's ``new`` memories lost and gained against its ``old`` ones (each in
    file order), and the removed ones an added one rewrote in place (see the module)."""
    before, after = _unique(old), _unique(new)
    old_ids, new_ids = {m.id for m in before}, {m.id for m in after}
    rewritten: list[tuple[Memory, Memory]] = []
    seq = difflib.SequenceMatcher(None, [m.id for m in before], [m.id for m in after], autojunk=False)
    for tag, i1, i2, j1, j2 in seq.get_opcodes():
        if tag == "replace":
            rewritten += _paired([m for m in before[i1:i2] if m.id not in new_ids],
                                 [m for m in after[j1:j2] if m.id not in old_ids])
    return Diff([m for m in before if m.id not in new_ids], [m for m in after if m.id not in old_ids], rewritten)


def _paired(gone: list[Memory], came: list[Memory]) -> list[tuple[Memory, Memory]]:
    """Each removed memory of one place of the edit with the added one that rewrote it: first the
    one the words say is about the same thing (``compare`` is not ``separate``), else the next one
    in order; a removed one left over was removed, an added one left over is new."""
    free = list(came)
    found: dict[str, Memory] = {}
    for old in gone:
        new = next((n for n in free if compare(n.text, old.text) != "separate"), None)
        if new is not None:
            found[old.id] = new
            free.remove(new)
    for old in gone:
        if old.id not in found and free:
            found[old.id] = free.pop(0)
    return [(old, found[old.id]) for old in gone if old.id in found]
