"""A second scripted provider for PersonaGym's judge-ensemble tests (TESTS ONLY): it grades
every answer 2 and otherwise answers like the scripted model."""

import json
import re

from townsquare.api import LLMProviderSpec, hookimpl
from townsquare.testing.scripted import ScriptedConfig, ScriptedLLM


class StrictJudge(ScriptedLLM):
    name = "strict_judge"
    model = "strict-judge-test-model"

    def _reply(self, request, prompt, digest):
        graded = re.search(r"Below are (\d+) rubrics", prompt)
        if graded:
            return json.dumps({"evaluations": [{"evaluation": "Not convincing. Therefore, the final score is 2", "score": 2}]
                               * int(graded.group(1))})
        return super()._reply(request, prompt, digest)


@hookimpl
def townsquare_register_llm_providers():
    return [LLMProviderSpec("strict_judge", StrictJudge, config_model=ScriptedConfig, description="TEST ONLY: grades 2")]
