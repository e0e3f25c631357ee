"""`fairtune datasets`: in-process via main() and as a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

import fairtune.datasets
from fairtune.cli import main


def _check_table(out: str) -> None:
    lines = out.splitlines()
    header = lines[0].split()
    assert header[:3] == ["name", "loader", "rows"]
    body = {line.split()[0]: line for line in lines[2:5]}
    assert set(body) == {"adult", "german", "compas"}
    # Figures recomputed in tests/datasets_tests (raw files); here: that they reach the table.
    assert "45,222" in body["adult"] and "Female: 14,695" in body["adult"]
    assert "Male: 30,527" in body["adult"] and "0.248" in body["adult"]
    assert "1,000" in body["german"] and "0.700" in body["german"]
    assert "Female: 310" in body["german"]
    assert "6,172" in body["compas"] and "Caucasian: 2,103" in body["compas"]
    assert "Other: 4,069" in body["compas"] and "0.545" in body["compas"]
    # Aligned: the "rows" column ends at the same position on every line.
    end = lines[0].index("rows") + len("rows")
    for line in lines[2:5]:
        assert line[end - 1].isdigit() and line[end] == " "


def test_main_datasets_prints_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets"]) == 0
    captured = capsys.readouterr()
    _check_table(captured.out)
    assert captured.err == ""


def test_cli_datasets_subprocess() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fairtune.cli", "datasets"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    _check_table(result.stdout)
    assert "Warning" not in result.stderr


@pytest.mark.parametrize("argv", [[], ["no-such-command"], ["datasets", "--bogus"]])
def test_usage_errors_are_one_line_without_traceback(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fairtune: error:")
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_command_failure_is_one_line_and_nonzero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> None:
        raise ValueError("bundled file is\ncorrupted")

    monkeypatch.setattr(fairtune.datasets._summary, "describe_datasets", broken)
    assert main(["datasets"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "fairtune: error: bundled file is corrupted\n"
    assert captured.out == ""


def test_version_and_help_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert fairtune.__version__ in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "datasets" in capsys.readouterr().out
