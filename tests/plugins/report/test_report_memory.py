"""The report's reflections-and-plans section, from memory records (Park et al.'s agents)."""

from __future__ import annotations

import json

from townsquare.plugins.report.memory_section import agent_minds, memory_section


def row(agent, kind, text, created, evidence=()):
    return (agent, "memory.stream", f"{agent}-{text}", kind, text, created, 5.0, json.dumps(list(evidence)))


ROWS = [
    row("a1", "observation", "saw a post", "2024-03-04T08:00:00"),
    row("a1", "reflection", "I like jazz", "2024-03-04T09:00:00", ["m1", "m2"]),
    row("a1", "reflection", "I trust Bo", "2024-03-05T09:00:00", ["m3"]),
    row("a1", "plan", "wake up at 7:00 am", "2024-03-04T06:00:00"),
    row("a1", "plan", "go to work at 9:00 am", "2024-03-05T06:00:00"),
    row("a1", "plan", "read the news online at 8:00 pm", "2024-03-05T06:00:01"),
    row("a2", "observation", "nothing else", "2024-03-04T08:00:00"),
]


def test_latest_reflections_and_the_last_planned_day_per_agent():
    minds = agent_minds(ROWS)
    assert set(minds) == {"a1"}  # a2 has neither reflections nor plans
    assert [(text, n) for _, text, n in minds["a1"]["reflection"]] == [("I like jazz", 2), ("I trust Bo", 1)]
    assert [text for _, text, _ in minds["a1"]["plan"]] == ["go to work at 9:00 am", "read the news online at 8:00 pm"]


def test_section_shows_them_escaped_and_is_absent_without_records():
    page = memory_section(ROWS + [row("a3", "reflection", "<b>bold</b>", "2024-03-04T10:00:00")], {"a1": "Ada"})
    assert "Ada" in page and "I trust Bo (from 1 memories)" in page and "2024-03-05" in page
    assert "&lt;b&gt;bold" in page and "<b>bold" not in page
    assert memory_section(ROWS[-1:], {}) is None
