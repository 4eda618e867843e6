"""One test asserts the whole lifecycle order of a 2-agent, 2-round run (tox's rule)."""

from __future__ import annotations

from helpers import scenario_text
from townsquare import hookimpl


class OrderRecorder:
    plugin_name = "order_recorder"

    def __init__(self):
        self.events = []

    @hookimpl
    def townsquare_on_run_start(self, run):
        self.events.append("run_start")

    @hookimpl
    def townsquare_on_round_start(self, round):
        self.events.append(f"round_start {round}")

    @hookimpl
    def townsquare_on_llm_call(self, call):
        self.events.append(f"llm {call.agent_id} {call.purpose}")

    @hookimpl
    def townsquare_on_action_applied(self, round, action):
        self.events.append(f"action {round} {action.agent_id} {action.kind}")

    @hookimpl
    def townsquare_on_round_end(self, round):
        self.events.append(f"round_end {round}")

    @hookimpl
    def townsquare_on_run_end(self):
        self.events.append("run_end")


def test_whole_lifecycle_order(make_plugins, write_scenario, run_scenario):
    recorder = OrderRecorder()
    plugins = make_plugins(recorder, enable=["townsquare.testing.scripted"])
    # Agents always active, concurrency 1 so LLM calls come in agent order; every agent posts.
    extra = "[engine]\nconcurrency = 1\n[plugins.scripted]\npolicy_post_probability = 1.0\nfirst_label_share = 1.0\n"
    run_scenario(write_scenario(scenario_text(rounds=2, count=2, policy="scripted_feed", llm=True, extra=extra)), plugins=plugins)
    assert recorder.events == [
        "run_start",
        "round_start 0",
        # round 0: the feed is empty, so each agent only writes a post
        "llm users-0001 post",
        "llm users-0002 post",
        "action 0 users-0001 post",
        "action 0 users-0002 post",
        "round_end 0",
        "round_start 1",
        # round 1: each agent sees the other's post, likes it (first label), posts again
        "llm users-0001 like",
        "llm users-0001 post",
        "llm users-0002 like",
        "llm users-0002 post",
        "action 1 users-0001 browse",
        "action 1 users-0001 like",
        "action 1 users-0001 post",
        "action 1 users-0002 browse",
        "action 1 users-0002 like",
        "action 1 users-0002 post",
        "round_end 1",
        "run_end",
    ]
