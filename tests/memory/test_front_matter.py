"""YAML front matter of memory files (PyYAML, BaseLoader): values stay the strings written, and a
broken block is reported with its line while the rest of the file still loads."""

from __future__ import annotations

from memwire.memory._markdown import parse_text


def memories(text: str) -> list[tuple[str, tuple[str, ...], str | None, str | None]]:
    return [(e.memory.text, e.memory.tags, e.memory.date, e.memory.topic) for e in parse_text(text).entries]


def test_values_stay_strings_and_tags_come_in_every_spelling() -> None:
    text = "---\ndescription: no\ndate: 2024-01-05\ntags: [yes, 1.0]\n---\nDeploys on Tuesdays.\n\nSecond.\n"
    assert memories(text) == [("Deploys on Tuesdays.", ("yes", "1-0"), "2024-01-05", "no"),
                               ("Second.", ("yes", "1-0"), "2024-01-05", "no")]
    assert memories("---\ntags: a, B c\n---\nPara\n") == [("Para", ("a", "b-c"), None, None)]
    block = "---\nTags:\n  - x\n  - 'y z'\ndescription: 'Quoted: yes'\n---\n- bullet\n"
    assert memories(block) == [("bullet", ("x", "y-z"), None, "Quoted: yes")]


def test_yaml_the_old_line_parser_misread() -> None:
    text = "---\ndescription: >\n  Deployment\n  notes\ntags: [\"ops, infra\", deploy]\n---\n- Roll back with undo\n"
    assert memories(text) == [("Roll back with undo", ("ops-infra", "deploy"), None, "Deployment notes")]


def test_unclosed_front_matter_is_read_as_body_with_the_same_problem() -> None:
    parsed = parse_text("---\ndescription: x\n- a memory\n")
    assert [str(p) for p in parsed.problems] == ["<memory>:1: front matter is not closed with '---'; read as body"]
    assert [e.memory.text for e in parsed.entries] == ["a memory"]


def test_invalid_yaml_is_reported_with_its_line_and_the_memories_still_load() -> None:
    parsed = parse_text("---\ntags: [a]\ndescription: Use when: deploying\n---\nDeploys on Tuesdays.\n")
    assert [(p.line, p.problem) for p in parsed.problems] == [
        (3, "front matter is not valid YAML (mapping values are not allowed here); its fields are ignored")]
    assert [e.memory.text for e in parsed.entries] == ["Deploys on Tuesdays."]
    parsed = parse_text("---\njust a sentence\n---\n- a bullet\n")
    assert parsed.problems[0].line == 2 and [e.memory.text for e in parsed.entries] == ["a bullet"]


def test_an_empty_block_is_no_front_matter() -> None:
    assert memories("---\n---\n- a bullet\nA paragraph is not a memory here\n") == [("a bullet", (), None, None)]
