"""Many workers through Optuna's gRPC storage proxy: a real proxy server on 127.0.0.1 in front of
a real PostgreSQL database, and ``fairtune tune`` workers, tenants and agents on
``--storage grpc://host:port``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from fairtune._storage import open_storage
from fairtune.samplers.collaborative import ROUND_KEY
from fairtune.tenancy import TENANT_KEY
from tests.conftest import free_port
from tests.test_cli_teams import TEAMS, _command, _files, _run_all

pytest.importorskip("grpc", reason="Optuna's gRPC proxy needs grpcio (the test extra has it)")


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[tuple[str, str]]:
    """(the database URL, the proxy's grpc:// URL) of a proxy server, stopped after."""
    optuna.storages.RDBStorage(postgres_url)  # the schema, before the server serves it
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", "import sys, optuna; optuna.logging.set_verbosity(optuna.logging."
         "WARNING); optuna.storages.run_grpc_proxy_server(optuna.storages.RDBStorage(sys.argv[1]),"
         " host='127.0.0.1', port=int(sys.argv[2]))", postgres_url, str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"grpc://127.0.0.1:{port}"
    try:
        open_storage(url).wait_server_ready(timeout=60)
        yield postgres_url, url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.processes
def test_workers_tenants_and_agents_run_through_the_grpc_proxy(
    tmp_path: Path, proxy: tuple[str, str]
) -> None:
    database, url = proxy
    files = _files(tmp_path)
    # Three FairBOSampler workers on one study.
    workers = _run_all([_command(files["a"], 4, "--storage", url, "--study-name", "workers")
                        for _ in range(3)])
    assert all(r.returncode == 0 for r in workers), [r.stderr for r in workers]
    trials = optuna.load_study(study_name="workers", storage=database).trials
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 12 and len({t.number for t in trials}) == len(trials)
    # Three tenants of one shared study: one point per tenant and round.
    tenants = _run_all([
        _command(files[t], 2, "--tenant", t, "--tenants", ",".join(TEAMS), "--storage", url,
                 "--study-name", "shared") for t in TEAMS])
    assert all(r.returncode == 0 for r in tenants), [r.stderr for r in tenants]
    shared = optuna.load_study(study_name="shared", storage=database)
    assert sorted((t.user_attrs[TENANT_KEY], t.system_attrs[ROUND_KEY]) for t in shared.trials) \
        == [(t, r) for t in TEAMS for r in range(2)]
    # Three agents, their studies and their board behind the proxy.
    agents = _run_all([_command(files[t], 11, "--agent", f"lab-{t}", "--board", url,
                                "--storage", url) for t in TEAMS])
    assert all(r.returncode == 0 for r in agents), [r.stderr for r in agents]
    assert all("Board 'fairtune': " in r.stdout for r in agents)


def test_a_heartbeat_through_the_proxy_is_refused_naming_why() -> None:
    with pytest.raises(ValueError, match="Optuna's gRPC proxy forwards none"):
        open_storage("grpc://127.0.0.1:1", heartbeat_interval=30)
    with pytest.raises(ValueError, match=r"grpc://<host>:<port>"):
        open_storage("grpc://nohost")


def test_an_unreachable_proxy_is_one_line_naming_the_flag(
    capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.cli import main

    port = free_port()  # nothing listens there
    code = main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.2",
                 "--n-trials", "1", "--no-progress", "--storage", f"grpc://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 1 and "_InactiveRpcError" not in err
    assert f"--storage 'grpc://127.0.0.1:{port}': the gRPC storage proxy did not answer" in err
