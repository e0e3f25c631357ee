"""The test suite's own helpers in tests/conftest.py: :func:`requires_program` skips a test whose
system program is missing, with the reason and the install command, and fails it instead under
``FAIRTUNE_REQUIRE_SYSTEM_PROGRAMS``, which .ci/run sets before it runs the README's test
command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_SYSTEM_PROGRAMS, requires_program

MISSING = "fairtune-no-such-program"


@pytest.fixture
def lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_SYSTEM_PROGRAMS, raising=False)


def test_a_missing_program_skips_with_what_is_missing_and_how_to_install_it(
    lenient: None,
) -> None:
    with pytest.raises(pytest.skip.Exception,
                       match=rf"^needs {MISSING}: apt-get install {MISSING}$"):
        requires_program(MISSING, f"apt-get install {MISSING}")
    with pytest.raises(pytest.skip.Exception,
                       match=r"^needs Chromium \(chromium\): apt-get install chromium$"):
        requires_program("chromium", "apt-get install chromium", name="Chromium",
                         find=lambda: None)


def test_chromium_off_the_path_is_missing(lenient: None, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match=r"needs Chromium \(chromium\)"):
        requires_program("chromium", "apt-get install chromium", name="Chromium")


@pytest.mark.parametrize("value", ["1", "yes"])
def test_under_the_variable_a_missing_program_fails_with_the_same_reason(
    monkeypatch: pytest.MonkeyPatch, value: str,
) -> None:
    monkeypatch.setenv(REQUIRE_SYSTEM_PROGRAMS, value)
    with pytest.raises(pytest.fail.Exception,
                       match=rf"^needs {MISSING}: apt-get install {MISSING} "
                             rf"\({REQUIRE_SYSTEM_PROGRAMS} is set"):
        requires_program(MISSING, f"apt-get install {MISSING}")


def test_the_variable_at_0_or_empty_still_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("0", ""):
        monkeypatch.setenv(REQUIRE_SYSTEM_PROGRAMS, value)
        with pytest.raises(pytest.skip.Exception):
            requires_program(MISSING, "apt-get install it")


def test_a_present_program_is_returned(monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    monkeypatch.setenv(REQUIRE_SYSTEM_PROGRAMS, "1")
    assert requires_program(sys.executable, "-") == Path(sys.executable)  # an absolute path
    program = tmp_path / MISSING.replace("no-such", "fake")
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert requires_program(program.name, "-") == program  # on PATH
    assert requires_program("initdb", "-", find=lambda: tmp_path) == tmp_path  # found another way


def test_ci_sets_the_variable_before_it_runs_the_test_command() -> None:
    script = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert f"export {REQUIRE_SYSTEM_PROGRAMS}=1" in script
    assert (script.index(f"export {REQUIRE_SYSTEM_PROGRAMS}=1")
            < script.index('eval "$test_command"'))
