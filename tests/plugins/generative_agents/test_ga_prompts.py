"""The generative agents' prompts are data: a study's prompts file replaces templates, and a bad
one stops the run at build time with one line naming the file and the prompt."""

from __future__ import annotations

import pytest

from townsquare.api import UsageError
from townsquare.plugins.generative_agents.memory.memory_stream import REQUIRED as MEMORY
from townsquare.plugins.generative_agents.policy.generative_agent import REQUIRED as POLICY
from townsquare.plugins.generative_agents.prompt_files import fill, load_prompts
from townsquare.plugins.generative_agents.reflection.park_reflection import REQUIRED as REFLECTION


@pytest.mark.parametrize("group,required", [("memory", MEMORY), ("reflection", REFLECTION), ("policy", POLICY)])
def test_builtin_prompts_have_their_placeholders(group, required):
    assert set(load_prompts(group, required)) == set(required)


def test_an_override_replaces_a_template(tmp_path):
    (tmp_path / "mine.toml").write_text('importance = "Rate {memory} ({kind}) for {name}, 1-10."\n')
    prompts = load_prompts("memory", MEMORY, "mine.toml", str(tmp_path))
    assert fill(prompts["importance"], memory="a {name} note", kind="observation", name="Ada") == \
        "Rate a {name} note (observation) for Ada, 1-10."


@pytest.mark.parametrize("content,message", [
    ('importance = "Rate {memory}."\n', "prompt 'importance' lacks the placeholder {kind}"),
    ('importanse = "x"\n', "unknown prompt 'importanse'"),
    ('importance = "unclosed\n', "invalid TOML"),
])
def test_a_bad_override_is_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(UsageError) as info:
        load_prompts("memory", MEMORY, str(path))
    assert message in str(info.value) and str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_missing_override_file(tmp_path):
    with pytest.raises(UsageError, match="cannot read prompts file"):
        load_prompts("policy", POLICY, "nope.toml", str(tmp_path))
