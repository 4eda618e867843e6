"""The report's studies section: cocoon entropy curves side by side and AC by number of friends."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_report_plots_sibling_cocoon_runs_and_conformity(tmp_path, run_scenario):
    from townsquare.plugins.report.build import build_report

    small = ["rounds=3", "populations.0.count=6", "platform.synthetic_items=50"]
    mf, _ = run_scenario(EXAMPLES / "cocoon.toml", overrides=small, out=tmp_path / "runs" / "cocoon-mf")
    run_scenario(EXAMPLES / "cocoon.toml", overrides=[*small, "plugins.rec_strategy.enabled=true", "plugins.rec_strategy.from_round=1"],
                 out=tmp_path / "runs" / "cocoon-rec")
    page = build_report(mf.path, with_similarity=False)[0].read_text(encoding="utf-8")
    assert "Information cocoon and conformity" in page
    assert "cocoon-mf (this run)" in page and "cocoon-rec" in page and "end / highest" in page

    offline = ["rounds=3", "plugins.conformity.rater=embedding", "populations.0.slots.policy=embedding_items"]
    conformity, _ = run_scenario(EXAMPLES / "conformity.toml", overrides=offline, out=tmp_path / "conf")
    page = build_report(conformity.path, with_similarity=False)[0].read_text(encoding="utf-8")
    assert "AC(i)" in page and "cocoon-mf" not in page


def test_no_studies_section_without_study_metrics(tmp_path, run_scenario):
    from townsquare.plugins.report.build import build_report

    run, _ = run_scenario(EXAMPLES / "baseline.toml", overrides=["rounds=2", "populations.0.count=4"], out=tmp_path / "b")
    assert "Information cocoon" not in build_report(run.path, with_similarity=False)[0].read_text(encoding="utf-8")
