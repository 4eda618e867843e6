"""Zhou et al. corrections checked against the paper: the smoothed eq. 1 in the example, the
planner's Pareto parameters per population, and which knowledge component is "w/o KB"."""

from __future__ import annotations

import pytest

from helpers import ROOT
from townsquare.components import BuildContext
from townsquare.plugins.social_agent.knowledge import no_knowledge, unbounded_knowledge
from townsquare.plugins.social_agent.planning.activity_plan import ActivityPlanConfig, build_activity_plan, pareto_parameters
from townsquare.recommenders.mastodon_digest import digest_score
from townsquare.launch.scenario_files import load_scenario


def test_the_social_media_example_smooths_eq_1(make_plugins):
    """Literal eq. 1 leaves the feed chronological until a post has a like, a reblog and a
    comment; the example turns smoothing on, so one like already ranks a post up."""
    scenario = load_scenario(ROOT / "examples" / "social_media.toml", [], make_plugins())
    assert scenario.recommender.spec.name == "mastodon_digest" and scenario.recommender.config.smoothing is True
    # a liked post by an author with no followers vs a fresh one by the same author
    assert digest_score(1, 0, 0, 0) == digest_score(0, 0, 0, 0) == 0.0  # literal: a tie, left to recency
    assert digest_score(1, 0, 0, 0, smoothing=True) == pytest.approx(2 ** (1 / 3))
    assert digest_score(0, 0, 0, 0, smoothing=True) == pytest.approx(1.0)
    # the planner's activity: the regular population's Pareto (alpha 2, x_min 1, §4.1)
    regular = next(p for p in scenario.populations if p.config.name == "regular")
    assert pareto_parameters(BuildContext(services=None, seed=0, scenario=scenario.model, population="regular")) == (2.0, 1.0)
    assert regular.config.activity is None


def test_the_planner_reads_its_populations_pareto(make_plugins):
    from townsquare.scenario import resolve

    data = {"name": "p", "rounds": 1, "activity": {"alpha": 3.0, "x_min": 0.5},
            "populations": [{"name": "a", "count": 1, "personas": {"name": "synthetic"}},
                            {"name": "b", "count": 1, "personas": {"name": "synthetic"}, "activity": {"alpha": 1.5, "x_min": 2.0}}]}
    model = resolve(data, "inline", ".", make_plugins()).model
    assert pareto_parameters(BuildContext(services=None, seed=0, scenario=model, population="a")) == (3.0, 0.5)
    assert pareto_parameters(BuildContext(services=None, seed=0, scenario=model, population="b")) == (1.5, 2.0)
    assert pareto_parameters(BuildContext(services=None, seed=0)) == (2.0, 1.0)
    # x_0.99 for alpha 1.5, x_min 2 is 2 * 100 ** (2/3) = 43.09: a level of 4.309 reads 0.10
    agent = type("Agent", (), {"activity": 2 * 100 ** (2 / 3) / 10, "persona": None, "id": "b-1"})()
    planner = build_activity_plan(ActivityPlanConfig(), BuildContext(services=None, seed=0, scenario=model, population="b", agent=agent))
    assert planner.activity == pytest.approx(0.10)


def test_w_o_kb_is_the_unbounded_knowledge():
    """Appendix G's "w/o KB" removes the knowledge boundary, not the knowledge."""
    (unbounded,) = unbounded_knowledge.townsquare_register_persona_components()
    (none,) = no_knowledge.townsquare_register_persona_components()
    assert "w/o KB" in unbounded.description and "w/o KB" in unbounded_knowledge.__doc__
    assert "not the paper's w/o KB" in none.description
    assert "*not* Zhou et al.'s \"w/o KB\"" in no_knowledge.__doc__
