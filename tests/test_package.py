import subprocess
import sys

import fairtune


def test_version_is_a_string() -> None:
    assert isinstance(fairtune.__version__, str)
    assert fairtune.__version__.count(".") == 2


def test_import_does_not_import_torch() -> None:
    code = "import sys, fairtune; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_attribute_raises_attribute_error() -> None:
    try:
        fairtune.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_the_gp_engine_lists_every_module() -> None:
    from pathlib import Path

    import fairtune._gp as engine

    folder = Path(engine.__file__).parent
    for module in sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__"):
        assert f"``{module}``" in engine.__doc__, module
