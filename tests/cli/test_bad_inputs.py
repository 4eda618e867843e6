"""Every malformed input is one line on stderr, exit status 2, and nothing written: no run
directory (not even an empty one), no slot table, no empty ``events.sqlite``, no manifest change.

The cases (a scenario that is not UTF-8, ``seed = -1``, ``count = 10**9``,
an unwritable ``--out``, a manifest that is ``[]`` or ``{}``, click usage errors, round ranges
that make no sense, path-like or huge persona names, huge personas, ``count = 0``, unbounded
``rounds``) plus a broken persona, knowledge, prompts and key file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from helpers import PERSONAS, scenario_text
from townsquare.cli import main
from townsquare.plugin_manager import make_plugin_manager
from townsquare.launch.scenario_files import load_scenario

SCRIPTED = ["-p", "townsquare.testing.scripted"]
POLICY = 'slots = { policy = "embedding_baseline" }'


@pytest.fixture(autouse=True)
def quiet_logs(monkeypatch):
    """Warnings (the scripted model's banner) are not errors: only the error line is shown."""
    monkeypatch.setenv("TOWNSQUARE_LOG_LEVEL", "error")


@pytest.fixture(scope="module")
def plugins():
    return make_plugin_manager(autoload=False)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("finished")
    (tmp / "s.toml").write_text(scenario_text(rounds=1))
    assert townsquare("run", str(tmp / "s.toml"), "--out", str(tmp / "run"), "--quiet")[0] == 0
    return tmp / "run"


def townsquare(*args: str) -> tuple[int, str]:
    """Run the CLI in this process; (exit status, stderr)."""
    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0), ""
    return 0, ""


def inline(name: str, sentences: str = '"I like tea."') -> str:
    """A population whose one inline persona is named ``name``."""
    return scenario_text(rounds=2).split("[[populations]]")[0] + f"""
[[populations]]
name = "users"
count = 2
{POLICY}
[populations.personas]
name = "inline"
items = [{{ name = {json.dumps(name)}, sentences = [{sentences}] }}]
"""


def jsonl_personas(line: str) -> tuple[str, dict[str, str]]:
    head = scenario_text(rounds=2).split("[[populations]]")[0]
    return head + f"""
[[populations]]
name = "users"
count = 2
{POLICY}
[populations.personas]
name = "jsonl"
path = "personas.jsonl"
""", {"personas.jsonl": line}


def with_population(fields: str) -> str:
    """The base scenario with extra keys in its population table."""
    return scenario_text(rounds=3).replace('name = "users"\n', f'name = "users"\n{fields}\n', 1)


BIG_PERSONA = json.dumps({"name": "Big", "sentences": ["x" * (20 * 2**20)]})

# (id, scenario text or (text, {file: content}), extra CLI args, expected fragment of the one line)
RUN_CASES = [
    ("not-utf8", b"name = \"t\"\xff\xfe\nrounds = 2\n", [], "not UTF-8 text"),
    ("seed-negative", scenario_text().replace("seed = 11", "seed = -1"), [], "seed: input should be greater than or equal to 0"),
    ("count-1e9", scenario_text(count=10**9), [], "1000000000 agents in all is above limits.max_agents = 100000"),
    ("count-above-lowered-limit", scenario_text(count=5, top="[limits]\nmax_agents = 4"), [], "above limits.max_agents = 4"),
    ("count-0", scenario_text(count=0), [], "populations[0].count: input should be greater than or equal to 1"),
    ("rounds-unbounded", scenario_text(rounds=10**9), [], "rounds: 1000000000 is above limits.max_rounds = 100000"),
    ("end-before-start", with_population("start_round = 2\nend_round = 1"), [], "populations[0].end_round: 1 is not after start_round 2"),
    ("end-equals-start", with_population("start_round = 1\nend_round = 1"), [], "populations[0].end_round: 1 is not after start_round 1"),
    ("start-past-last-round", with_population("start_round = 3"), [], "populations[0].start_round: 3 is past the last round (2"),
    ("feed-stage-end-before-start",
     with_population('feed_stages = [{ start_round = 2, end_round = 1, authors = ["users"] }]'), [],
     "populations[0].feed_stages[0].end_round: 1 is not after start_round 2"),
    ("population-name-path", scenario_text().replace('name = "users"', 'name = "../../x"'), [], "populations[0].name: name '../../x' looks like a path"),
    ("persona-name-10000-inline", inline("N" * 10_000), [], "name is 10000 characters long, above limits.max_name_length = 200"),
    ("persona-name-control-char", inline("Ada\u0007"), [], "contains control characters"),
    ("persona-name-control-jsonl", jsonl_personas('{"name": "Ada\\u0007"}\n'), [], "personas.jsonl:1: \"name\": name 'Ada\\x07' contains control characters"),
    ("persona-file-dev-zero", (jsonl_personas("")[0].replace('path = "personas.jsonl"', 'path = "/dev/zero"')
                               .replace("[activity]", "[limits]\nmax_persona_file_mb = 1\n[activity]"), {}), [],
     "/dev/zero: persona file is more than 1 MB, above limits.max_persona_file_mb = 1 MB"),
    ("rounds-true", scenario_text().replace("rounds = 3", "rounds = true"), [], "rounds: input should be a valid integer (got True)"),
    ("count-string", scenario_text().replace("count = 3", 'count = "5"'), [], "populations[0].count: input should be a valid integer (got '5')"),
    ("smoothing-yes", scenario_text(extra='[recommender]\nname = "mastodon_digest"\nsmoothing = "yes"\n'), [],
     "recommender.smoothing: input should be a valid boolean (got 'yes')"),
    ("x-min-inf", scenario_text(extra="[activity]\nx_min = inf\n").replace('[activity]\nmodel = "always"\n', "", 1), [],
     "activity.x_min: not a finite number (got inf)"),
    ("llm-empty", scenario_text(), ["--llm", ""], "--llm: empty; give PROVIDER[:MODEL], e.g. openai:gpt-4o-mini"),
    ("base-url-not-a-url", scenario_text(rounds=2, extra='[llm]\nname = "openai"\nmodel = "m"\nbase_url = "not a url"\napi_key_env = ""\n'),
     [], "llm.base_url: value error, 'not a url' is not an http(s) URL"),
    ("persona-name-10000-jsonl", jsonl_personas(json.dumps({"name": "N" * 10_000}) + "\n"), [], "name is 10000 characters long"),
    ("persona-20mb", jsonl_personas(BIG_PERSONA + "\n"), [], "persona 'Big' is 20971553 characters long, above limits.max_persona_chars = 20000"),
    ("persona-huge-inline", inline("Ada", '"' + "y" * 30_000 + '"'), [], "above limits.max_persona_chars = 20000"),
    ("persona-file-above-limit",
     (jsonl_personas('{"name": "Ada"}\n' * 200)[0].replace("[activity]", "[limits]\nmax_persona_file_mb = 0.001\n[activity]"),
      {"personas.jsonl": '{"name": "Ada"}\n' * 200}), [],
     "persona file is 0.0 MB, above limits.max_persona_file_mb = 0.001 MB"),
    ("persona-file-missing", (jsonl_personas("")[0], {}), [], "personas.jsonl: no such persona file"),
    ("persona-file-bad-json", jsonl_personas('{"name": "Ada"\n'), [], "personas.jsonl:1: invalid JSON"),
    ("persona-file-not-utf8", jsonl_personas(b'{"name": "\xff"}\n'), [], "personas.jsonl: cannot read persona file"),
    ("knowledge-file-missing", scenario_text(rounds=2, extra='[knowledge]\nname = "hotpotqa"\npath = "missing.json"\n'), [],
     "missing.json: no such HotpotQA file"),
    ("prompts-file-missing",
     scenario_text(rounds=2, policy="social_agent", llm=True, extra='[plugins.social_agent]\nprompts_file = "missing.toml"\n'),
     SCRIPTED, "missing.toml"),
    ("key-file-missing", scenario_text(rounds=2, extra='[llm]\nname = "openai"\nmodel = "m"\napi_key_file = "nokey.txt"\n'), [],
     "nokey.txt: no such llm openai API key"),
    ("key-file-empty", (scenario_text(rounds=2, extra='[llm]\nname = "openai"\nmodel = "m"\napi_key_file = "keys.txt"\n'),
                        {"keys.txt": "# no key yet\n"}), [], "keys.txt: no llm openai API key for the default endpoint in file"),
    ("synthetic-ages-reversed",
     scenario_text(rounds=2).split("[[populations]]")[0]
     + f'[[populations]]\nname = "users"\ncount = 2\n{POLICY}\npersonas = {{ name = "synthetic", min_age = 50, max_age = 20 }}\n',
     [], "max_age: value error, max_age 20 is below min_age 50"),
    ("seed-abc", scenario_text(), ["--seed", "abc"], "Invalid value for '--seed': 'abc' is not a valid integer"),
    ("seed-option-negative", scenario_text(), ["--seed", "-1"], "seed: input should be greater than or equal to 0"),
    ("bad-override", scenario_text(), ["--set", "populations.0.count=lots"], "populations[0].count: input should be a valid integer"),
]


def write_case(tmp_path: Path, case) -> Path:
    text, files = case if isinstance(case, tuple) else (case, {})
    scenario = tmp_path / "s.toml"
    scenario.write_bytes(text if isinstance(text, bytes) else text.encode())
    for name, content in files.items():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return scenario


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


@pytest.mark.parametrize("case,args,message", [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES])
def test_bad_run_input_is_one_line_and_writes_nothing(case, args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scenario = write_case(tmp_path, case)
    monkeypatch.chdir(tmp_path)  # a run without --out would go to runs/
    status, _ = townsquare("run", str(scenario), "--out", str(tmp_path / "out"), *args)
    line = one_error_line(capsys)
    assert status == 2
    assert message in line, line
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_a_missing_key_variable_is_found_before_the_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    scenario = write_case(tmp_path, scenario_text(rounds=2, extra='[llm]\nname = "openai"\nmodel = "m"\n'))
    assert townsquare("run", str(scenario), "--out", str(tmp_path / "out"))[0] == 2
    assert "environment variable OPENAI_API_KEY is not set" in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_persona_name_is_a_display_name_not_a_path(tmp_path, capsys):
    scenario = write_case(tmp_path, inline("AC/DC fan"))
    assert townsquare("run", str(scenario), "--out", str(tmp_path / "out"), "--quiet")[0] == 0
    assert "AC/DC fan" in (tmp_path / "out" / "manifest.json").read_text()


def test_an_empty_out_folder_of_the_user_is_kept_empty(tmp_path, capsys):
    scenario = write_case(tmp_path, inline("Ada\u0007"))
    (tmp_path / "mine").mkdir()
    assert townsquare("run", str(scenario), "--out", str(tmp_path / "mine"))[0] == 2
    one_error_line(capsys)
    assert (tmp_path / "mine").is_dir() and list((tmp_path / "mine").iterdir()) == []


def test_raised_limits_accept_what_the_defaults_refuse(tmp_path, plugins):
    path = write_case(tmp_path, scenario_text(rounds=200_000, top="[limits]\nmax_rounds = 1000000\nmax_name_length = 20000"))
    assert load_scenario(path, [], plugins).model.rounds == 200_000
    long_name = scenario_text().replace('name = "users"', f'name = "{"u" * 300}"')
    path = write_case(tmp_path, long_name.replace("[activity]", "[limits]\nmax_name_length = 400\n[activity]"))
    assert load_scenario(path, [], plugins).populations[0].config.name == "u" * 300


def test_scenario_that_is_a_directory_is_one_line(tmp_path, capsys):
    assert townsquare("run", str(tmp_path), "--out", str(tmp_path / "out"))[0] == 2
    assert "is a directory" in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


unwritable = pytest.mark.skipif(os.name != "posix", reason="needs POSIX paths")


@unwritable
@pytest.mark.parametrize("where", ["under-a-file", "read-only"])
def test_unwritable_out_for_run_is_one_line(where, tmp_path, capsys):
    scenario = write_case(tmp_path, scenario_text(rounds=1))
    out = _unwritable(tmp_path, where)
    assert townsquare("run", str(scenario), "--out", str(out))[0] == 2
    assert "cannot create the run directory" in one_error_line(capsys)


@unwritable
@pytest.mark.parametrize("where", ["under-a-file", "read-only"])
def test_unwritable_out_for_export_is_one_line(where, finished_run, tmp_path, capsys):
    out = _unwritable(tmp_path, where)
    assert townsquare("export", str(finished_run), "--out", str(out))[0] == 2
    assert f"--out {out}: cannot" in one_error_line(capsys)


def _unwritable(tmp_path: Path, where: str) -> Path:
    if where == "under-a-file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file" / "out"
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    return locked / "out"


def test_export_of_a_run_without_events_creates_no_database(tmp_path, capsys):
    run = tmp_path / "r"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"scenario": {}, "status": "running"}))
    assert townsquare("export", str(run), "--out", str(tmp_path / "e"))[0] == 2
    assert "no events.sqlite" in one_error_line(capsys)
    assert not (run / "events.sqlite").exists() and not (tmp_path / "e").exists()


@pytest.mark.parametrize("args,message", [
    (["export", "{run}", "--format", "xml", "--out", "{tmp}/e"], "Invalid value for '--format': 'xml' is not one of"),
    (["resume", "{tmp}/missing"], "Directory '{tmp}/missing' does not exist"),
    (["export", "{tmp}/missing", "--out", "{tmp}/e"], "Directory '{tmp}/missing' does not exist"),
    (["run"], "Missing argument 'SCENARIO'"),
    (["nonesuch"], "No such command 'nonesuch'"),
], ids=["export-format-xml", "resume-missing", "export-missing", "run-no-scenario", "unknown-command"])
def test_click_usage_errors_are_one_line(args, message, finished_run, tmp_path, capsys):
    args = [a.format(run=finished_run, tmp=tmp_path) for a in args]
    assert townsquare(*args)[0] == 2
    line = one_error_line(capsys)
    assert message.format(tmp=tmp_path) in line and "--help" in line, line


def _digest(folder: Path) -> dict[str, str]:
    """Every file's hash but the lock file's (made by the first writer to lock, left empty) and
    SQLite's own -wal/-shm files (opening the database makes them; its rows are in the file)."""
    lock = folder / ".lock"
    assert not lock.exists() or lock.read_text() == "", "the lock was not released"
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p != lock and not p.name.endswith(("-wal", "-shm"))}


@pytest.mark.parametrize("manifest,message", [
    ("[]", "not a run manifest"),
    ("{}", "not a run manifest"),
    ('{"scenario": []}', "not a run manifest"),
    ("{", "not valid JSON"),
    (b"\xff\xfe", "cannot read"),
], ids=["list", "empty-object", "scenario-not-a-table", "cut-off", "not-utf8"])
def test_resume_of_a_broken_manifest_is_one_line(manifest, message, tmp_path, capsys):
    run = tmp_path / "r"
    run.mkdir()
    (run / "manifest.json").write_bytes(manifest if isinstance(manifest, bytes) else manifest.encode())
    before = _digest(run)
    assert townsquare("resume", str(run))[0] == 2
    assert message in one_error_line(capsys)
    assert _digest(run) == before


def test_resume_with_a_broken_input_touches_nothing(tmp_path, capsys):
    """A persona file broken after the run stopped: resume says it changed since it was
    recorded; accepted, it says what is broken in it; both leave the manifest, the checkpoints
    and the database exactly as they were."""
    scenario, _ = jsonl_personas("")
    scenario = write_case(tmp_path, (scenario.replace("rounds = 2", "rounds = 3"), {"personas.jsonl": '{"name": "Ada"}\n'}))
    assert townsquare("run", str(scenario), "--out", str(tmp_path / "r"), "--quiet", "--set", "rounds=1")[0] == 0
    capsys.readouterr()
    (tmp_path / "personas.jsonl").write_text('{"name": "Ada\\u0007"}\n')
    before = _digest(tmp_path / "r")
    assert townsquare("resume", str(tmp_path / "r"), "--set", "rounds=3")[0] == 2
    assert "personas.jsonl: has changed since the run recorded it" in one_error_line(capsys)
    assert townsquare("resume", str(tmp_path / "r"), "--set", "rounds=3", "--accept-changed-inputs")[0] == 2
    assert "contains control characters" in one_error_line(capsys)
    assert _digest(tmp_path / "r") == before


def test_population_text_is_what_the_cases_edit():
    """Guard for the table above: the helpers edit the base scenario's population."""
    assert 'name = "users"' in PERSONAS and "[activity]" in scenario_text()


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory):
    """A finished run with the scripted test model (interviews and evaluations need an LLM)."""
    tmp = tmp_path_factory.mktemp("llm-run")
    quickstart = str(Path(__file__).resolve().parents[2] / "examples" / "quickstart.toml")
    assert townsquare("run", quickstart, "--llm", "scripted", "--out", str(tmp / "run"), "--quiet",
                      "--set", "rounds=2", "--set", "populations.1.count=2")[0] == 0
    return tmp / "run"


def _damaged_copy(run: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "damaged"
    shutil.copytree(run, copy)
    for name in ("events.sqlite-wal", "events.sqlite-shm"):
        (copy / name).unlink(missing_ok=True)
    (copy / "events.sqlite").write_bytes(b"this is not an SQLite database" * 100)
    return copy


@pytest.mark.parametrize("command", ["resume", "export"])
def test_a_damaged_event_store_is_one_line(command, finished_run, tmp_path, capsys):
    run = _damaged_copy(finished_run, tmp_path)
    before = _digest(run)
    args = [command, str(run)] + (["--out", str(tmp_path / "e")] if command == "export" else [])
    assert townsquare(*args)[0] == 2
    assert f"{run / 'events.sqlite'}: not a readable event store" in one_error_line(capsys)
    assert _digest(run) == before and not (tmp_path / "e").exists()


@pytest.mark.parametrize("args", [
    ["report", "{run}", "--out", "{file}/report.html", "--no-similarity"],
    ["interview", "{run}", "--all", "What do you like?", "--csv", "{file}/answers.csv"],
    ["eval", "zhou", "{run}", "--similarity", "embedder", "--nli", "none", "--no-quality", "--out", "{file}/zhou.json"],
], ids=["report", "interview-csv", "eval-zhou"])
def test_an_unwritable_output_file_is_one_line(args, llm_run, tmp_path, capsys):
    (tmp_path / "file").write_text("x")  # a file where a folder is expected
    args = [a.format(run=llm_run, file=tmp_path / "file") for a in args]
    assert townsquare(*args)[0] == 2
    line = one_error_line(capsys)
    assert str(tmp_path / "file") in line, line


@pytest.mark.parametrize("args,message", [
    (["interview", "{run}", "regular-0001", "Hi?", "--memories", "-1"], "Invalid value for '--memories': -1 is not in the range x>=0"),
    (["ablate", "{scenario}", "--variant", "a=", "--jobs", "0", "--out", "{tmp}/ab"], "Invalid value for '--jobs': 0 is not in the range x>=1"),
    (["ablate", "{scenario}", "--variant", "a=", "--variant", "b=", "--baseline", "nope", "--out", "{tmp}/ab"],
     "--baseline nope: no such variant (variants: a, b)"),
    (["resume", "{run}", "--set", "rounds=1"], "--set rounds=1: the run has already played 2 rounds; give at least 2"),
], ids=["memories-negative", "jobs-0", "baseline-unknown", "resume-fewer-rounds"])
def test_bad_options_of_other_commands_are_one_line(args, message, llm_run, tmp_path, capsys):
    (tmp_path / "s.toml").write_text(scenario_text(rounds=1))
    before = _digest(llm_run)
    args = [a.format(run=llm_run, scenario=tmp_path / "s.toml", tmp=tmp_path) for a in args]
    assert townsquare(*args)[0] == 2
    assert message in one_error_line(capsys)
    assert _digest(llm_run) == before and not (tmp_path / "ab").exists()


def test_debug_output_never_shows_a_key_in_the_endpoint_url(tmp_path, capsys, monkeypatch):
    """``OPENAI_BASE_URL=http://user:KEY@host/v1``: the key is a secret like ``OPENAI_API_KEY``;
    ``--debug`` (debug logs, a traceback) shows it nowhere."""
    from townsquare.testing.fault_server import FaultServer

    monkeypatch.setenv("TOWNSQUARE_LOG_LEVEL", "debug")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FaultServer(rate_401=1.0) as server:  # refuses every call: the run stops at once
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url.replace("http://", "http://user:sk-in-the-url-123@"))
        scenario = write_case(tmp_path, scenario_text(rounds=1, policy="social_agent", extra='[llm]\nname = "openai"\nmodel = "m"\n'))
        status, _ = townsquare("run", str(scenario), "--out", str(tmp_path / "out"), "--debug", "--quiet")
    captured = capsys.readouterr()
    assert status == 3 and "stopped: " in captured.err and "llm.openai.ready" in captured.err  # debug lines shown
    assert "sk-in-the-url-123" not in captured.err + captured.out
    assert "sk-in-the-url-123" not in "".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*.json"))
