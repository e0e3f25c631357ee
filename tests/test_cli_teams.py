"""Teams from the shell: ``fairtune tune --tenant`` joins a study that tenants share
(CollaborativeUCBSampler), ``--agent --board`` joins a CGPSampler board, each process with its
own ``--data``, on one PostgreSQL server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from fairtune.cli import main
from fairtune.collaboration import Board
from fairtune.samplers.collaborative import ROUND_KEY
from fairtune.tenancy import TENANT_KEY, tenant_of
from tests.test_cli_data import _applicants

TEAMS = ["a", "b", "c"]


def _files(tmp_path: Path) -> dict[str, Path]:
    files = {}
    for i, team in enumerate(TEAMS):  # each team's own applicants
        files[team] = tmp_path / f"{team}.csv"
        _applicants(300, seed=i).to_csv(files[team], index=False)
    return files


def _command(data: Path, n_trials: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "fairtune.cli", "tune", "--data", str(data), "--target",
            "decision", "--positive", "approved", "--sensitive", "gender", "--model", "linear",
            "--limit", "demographic_parity<=0.1", "--n-trials", str(n_trials), "--no-progress",
            *extra]


def _run_all(commands: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    processes = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in commands]
    done = []
    for command, process in zip(commands, processes):
        out, err = process.communicate(timeout=600)
        done.append(subprocess.CompletedProcess(command, process.returncode, out, err))
    return done


@pytest.mark.processes
def test_three_tenants_and_three_agents_share_one_postgresql_server(
    tmp_path: Path, postgres_url: str
) -> None:
    files = _files(tmp_path)
    rounds = 3
    tenants = _run_all([
        _command(files[t], rounds, "--tenant", t, "--tenants", ",".join(TEAMS), "--storage",
                 postgres_url, "--study-name", "shared")
        for t in TEAMS
    ])
    for result in tenants:
        assert result.returncode == 0, result.stderr
        assert "Study shared: " in result.stdout and "cumulative utility" in result.stdout
    study = optuna.load_study(study_name="shared", storage=postgres_url)
    # One point per tenant and round, each tenant's trials scored on its own file.
    points = sorted((t.user_attrs[TENANT_KEY], t.system_attrs[ROUND_KEY]) for t in study.trials
                    if t.state == optuna.trial.TrialState.COMPLETE)
    assert points == [(t, r) for t in TEAMS for r in range(rounds)]
    setups = {t: study.user_attrs[f"fairtune:setup:{t}"] for t in TEAMS}
    assert {s["dataset"].split(",")[0] for s in setups.values()} == {
        "a.csv", "b.csv", "c.csv"}
    assert len({s["data"] for s in setups.values()}) == 3
    assert study.user_attrs["fairtune:setup"]["tenants"] == TEAMS

    trials = 12  # past CGPSampler's 10 startup designs: the agents post on the board
    agents = _run_all([
        _command(files[t], trials, "--agent", f"lab-{t}", "--board", postgres_url,
                 "--storage", postgres_url)
        for t in TEAMS
    ])
    for team, result in zip(TEAMS, agents):
        assert result.returncode == 0, result.stderr
        assert f"Study lab-{team}: {trials} trials" in result.stdout
        assert f"Board 'fairtune': " in result.stdout
        own = optuna.load_study(study_name=f"lab-{team}", storage=postgres_url)
        assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in own.trials) == trials
    posts = Board(postgres_url, name="fairtune").posts()
    assert {post.agent for post in posts} == {f"lab-{t}" for t in TEAMS}


@pytest.mark.parametrize(("extra", "needle"), [
    (["--tenant", "a"], "--tenant goes with --tenants, and --agent with --board"),
    (["--tenant", "d", "--tenants", "a,b,c", "--storage", "sqlite:///x.db"],
     "--tenant 'd' must be one of --tenants ['a', 'b', 'c']."),
    (["--tenant", "a", "--tenants", "a,b,c"],
     "--tenant 'a' joins a study shared with the other tenants, which needs --storage, but got "
     "no --storage."),
    (["--tenant", "a", "--tenants", "a,b", "--storage", "sqlite:///x.db", "--sampler", "tpe"],
     "each bring their own sampler"),
    (["--tenant", "a", "--tenants", "a,,b", "--storage", "sqlite:///x.db"],
     "argument --tenants: expected tenant names separated by commas, but got 'a,,b'"),
    (["--tenant", "a", "--tenants", "a,b,a", "--storage", "sqlite:///x.db"],
     "--tenants must be a number of tenants (at least 1) or distinct names (strings, at least "
     "one), but got --tenants ['a', 'b', 'a']."),
    (["--agent", "lab-a"], "--agent with --board"),
    (["--agent", "lab-a", "--board", "nosuch://x"], "--board 'nosuch://x' has an unknown scheme"),
])
def test_a_team_flag_misused_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    data = _files(tmp_path)["a"]
    assert main(_command(data, 1, *extra)[3:]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_a_tenants_html_report_shows_its_own_best_fair_trial_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.fairness import best_fair_trial

    files = _files(tmp_path)
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    pages = {}
    for team in ("a", "b"):  # one after the other, each on its own file
        pages[team] = tmp_path / f"{team}.html"
        assert main(_command(files[team], 2, "--tenant", team, "--tenants", "a,b", "--storage",
                             storage, "--study-name", "shared", "--html",
                             str(pages[team]))[3:]) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="shared", storage=storage)
    best = {team: best_fair_trial(study, tenant=team) for team in ("a", "b")}
    assert best["b"] is not None and tenant_of(best["b"]) == "b"
    # b's text: the table of both tenants, then b's own best fair trial.
    text_b = out[out.rindex("Study shared: 4 trials of 2 tenants"):]
    assert "Tenant b: 2 trials" in text_b and f"Best fair trial: #{best['b'].number}\n" in text_b
    html = pages["b"].read_text(encoding="utf-8")
    assert "<h2>Tenant b</h2>" in html and "<h2>Tenant a</h2>" not in html
    assert f"Best fair trial: #{best['b'].number}</h3>" in html
    assert "b.csv" in html and "a.csv" not in html  # b's setup; a's file only a's business
    assert "tenant b&#x27;s trials only" in html and html.count("data:image/png;base64,") == 2
    # Another team list on the same study: the tenant and the list this run gave are named.
    assert main(_command(files["a"], 1, "--tenant", "c", "--tenants", "c,d", "--storage",
                         storage, "--study-name", "shared")[3:]) == 2
    assert ("--tenant must be one of ['a', 'b'] (the tenants of study 'shared'), but got "
            "--tenant 'c', and --tenants ['c', 'd'].") in capsys.readouterr().err
