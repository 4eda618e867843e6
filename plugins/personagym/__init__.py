"""PersonaGym (Samuel et al., "PersonaGym: Evaluating Persona Agents and LLMs") over townsquare
agents: ``townsquare eval personagym``. The plugin adds the command; the steps are in
:mod:`.evaluation` and :mod:`.llm_steps`, PersonaScore in :mod:`.persona_score`, the released
data in :mod:`.benchmark_data`. See docs/personagym.md.
"""

from townsquare.api import hookimpl


@hookimpl
def townsquare_register_commands(cli):
    from .personagym_command import register

    register(cli)
