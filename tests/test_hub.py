"""The OptunaHub packages in hub/: each loads with ``optunahub.load_local_module``, exposes
fairtune's sampler, carries the registry's front matter and license, and its example runs."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import optuna
import optunahub
import pytest
import yaml

import fairtune.collaboration
import fairtune.samplers

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "hub" / "package"
PACKAGES = {
    "fairtune_fairbo": ["FairBOSampler"],
    "fairtune_mtkb": ["MTKBSampler"],
    "fairtune_collaborative_ucb": ["CollaborativeUCBSampler"],
    "fairtune_cgp": ["CGPSampler", "Board"],
}


def test_every_sampler_has_a_package() -> None:
    folders = {p.name for p in (REGISTRY / "samplers").iterdir() if p.is_dir()}
    assert folders == set(PACKAGES)
    exposed = {name for names in PACKAGES.values() for name in names}
    assert {"FairBOSampler", "MTKBSampler", "CollaborativeUCBSampler", "CGPSampler"} <= exposed


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_a_package_loads_from_disk_and_follows_the_registrys_layout(name: str) -> None:
    module = optunahub.load_local_module(package=f"samplers/{name}", registry_root=str(REGISTRY))
    for exposed in PACKAGES[name]:
        library = getattr(fairtune.samplers, exposed, None) or getattr(fairtune.collaboration,
                                                                       exposed)
        assert getattr(module, exposed) is library
    folder = REGISTRY / "samplers" / name
    text = (folder / "README.md").read_text()
    front = yaml.safe_load(re.match(r"^---\n(.*?)\n---\n", text, flags=re.S).group(1))
    assert set(front) == {"author", "title", "description", "tags", "optuna_versions", "license"}
    assert all(isinstance(front[k], str) and front[k] for k in ("author", "title", "description"))
    assert "sampler" in front["tags"] and front["license"] == "MIT License"
    assert optuna.__version__ in [str(v) for v in front["optuna_versions"]]
    for section in ("## Abstract", "## Class or Function Names", "## Example"):
        assert section in text
    assert (folder / "LICENSE").read_text().startswith("MIT License")
    assert (folder / "requirements.txt").read_text().split() == ["fairtune"]


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_a_packages_example_runs(name: str, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    # As written, from this checkout: the package beside it, never the registry (which would
    # need the network and the published package).
    def no_registry(package: str, **_: object) -> None:
        raise AssertionError(f"the example asked the registry for {package}")

    monkeypatch.setattr(optunahub, "load_module", no_registry)
    monkeypatch.chdir(REGISTRY.parent)  # run from elsewhere: the example finds its package
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        runpy.run_path(str(REGISTRY / "samplers" / name / "example.py"), run_name="__main__")
    finally:
        optuna.logging.set_verbosity(optuna.logging.INFO)
    assert capsys.readouterr().out.strip()


def test_an_example_copied_on_its_own_asks_the_registry(tmp_path, monkeypatch) -> None:
    asked = []
    monkeypatch.setattr(optunahub, "load_module", lambda package, **_: asked.append(package)
                        or (_ for _ in ()).throw(SystemExit(0)))
    copy = tmp_path / "example.py"
    copy.write_text((REGISTRY / "samplers" / "fairtune_fairbo" / "example.py").read_text())
    with pytest.raises(SystemExit):
        runpy.run_path(str(copy), run_name="__main__")
    assert asked == ["samplers/fairtune_fairbo"]
