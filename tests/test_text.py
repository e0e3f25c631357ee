"""fairtune._text: the formatting the report, the certificate and the command line share."""

from __future__ import annotations

import pytest

from fairtune._text import percent
from fairtune.tuning._certify import Certificate


@pytest.mark.parametrize(("fraction", "shown"), [
    (0.95, "95%"), (0.975, "97.5%"), (0.9999, "99.99%"), (0.99, "99%"), (0.5, "50%"),
])
def test_a_percentage_keeps_the_digits_of_the_level(fraction: float, shown: str) -> None:
    assert percent(fraction) == shown


@pytest.mark.parametrize(("level", "shown"), [(0.975, "97.5%"), (0.9999, "99.99%")])
def test_a_certificate_names_the_level_it_was_given(level: float, shown: str) -> None:
    certificate = Certificate(trial=3, level=level, bounds={"demographic_parity": 0.04},
                              limits=["demographic_parity<=0.05"], rows=300, method="exact",
                              tested=1)
    assert f"with {shown} confidence" in certificate.text()
