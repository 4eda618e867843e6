"""Platforms declare the action kinds they accept; the engine refuses any other kind with an
error that names the kind and the platform (townsquare.platform.platform_actions)."""

from __future__ import annotations

import pytest

from helpers import scenario_text
from townsquare.api import SOCIAL_ACTIONS, Action, ComponentError, PolicySpec, hookimpl, platform_actions
from townsquare.platforms.recsys import RECSYS_ACTIONS


class Dancer:
    async def step(self, ctx):
        return [Action(ctx.agent.id, "dance")]

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


class DancePlugin:
    @hookimpl
    def townsquare_register_policies(self):
        return [PolicySpec("dancer", lambda config, ctx: Dancer())]


def test_default_vocabulary_is_the_social_one():
    assert platform_actions(object()) == SOCIAL_ACTIONS
    assert platform_actions(type("P", (), {"actions": RECSYS_ACTIONS})()) == RECSYS_ACTIONS


def test_engine_refuses_an_undeclared_kind(make_plugins, write_scenario, run_scenario):
    plugins = make_plugins(DancePlugin(), enable=["townsquare.testing.scripted"])
    path = write_scenario(scenario_text(rounds=1, count=1, policy="dancer"))
    with pytest.raises(ComponentError, match=r"action kind 'dance' is not accepted by platform 'in_memory'"):
        run_scenario(path, plugins=plugins)
