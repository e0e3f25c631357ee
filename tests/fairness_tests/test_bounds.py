"""The certified bounds of a fairness metric: they hold at their level (simulated draws of known
true rates, and the exact test's size by enumeration), their widths, randomized predictions,
edge cases and arguments."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from scipy.stats import binom

from fairtune.fairness import METRICS
from fairtune.fairness.bounds import METHODS, _exact_test, metric_bound, metric_bound_width

ALPHA = 0.1
DRAWS = 400


def _rows(metric: str, counts: np.ndarray, sizes: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows whose groups have ``counts`` of ``sizes`` (groups, rates) predicted 1: a rate
    conditioned on a label gets rows of that label; a selection rate, label 1."""
    labels = [{"true_positive_rate": 1, "false_positive_rate": 0}.get(rate, 1)
              for rate in METRICS[metric].rates]
    y_true, y_pred, group = [], [], []
    for g, (xs, ns) in enumerate(zip(counts, sizes, strict=True)):
        for x, n, label in zip(xs, ns, labels, strict=True):
            y_true += [label] * n
            y_pred += [1] * x + [0] * (n - x)
            group += [f"g{g}"] * n
    return np.array(y_true), np.array(y_pred), np.array(group)


def _truth(metric: str, rates: np.ndarray) -> float:
    if METRICS[metric].aggregate == "difference":
        return float((rates.max(axis=0) - rates.min(axis=0)).max())
    return float((rates.min(axis=0) / rates.max(axis=0)).min())


# The true gap is a few times the width (a ratio a few widths below 1): the bound of a smaller
# gap is raised by the pair in the other order and could hardly miss.
SETTINGS = {
    "near 0, 30 and 200 rows": ("demographic_parity", [[30], [200]], [[0.02], [0.35]]),
    "near 1, 30 and 200 rows": ("demographic_parity", [[30], [200]], [[0.97], [0.6]]),
    "ratio near 0": ("disparate_impact", [[30], [200]], [[0.02], [0.2]]),
    "three groups": ("demographic_parity", [[100], [60], [100]], [[0.3], [0.5], [0.7]]),
    "equalized odds": ("equalized_odds", [[30, 100], [200, 100]], [[0.97, 0.3], [0.6, 0.35]]),
}
# The exact test costs a few milliseconds a bound: simulated where few tables occur.
CASES = [(name, method) for name in SETTINGS for method in METHODS
         if method != "exact" or name in ("near 0, 30 and 200 rows", "near 1, 30 and 200 rows",
                                           "ratio near 0")]


@pytest.mark.parametrize(("name", "method"), CASES)
def test_a_bound_misses_the_true_metric_at_most_at_its_level(name: str, method: str) -> None:
    metric, sizes, rates = SETTINGS[name]
    sizes_, rates_ = np.array(sizes), np.array(rates)
    truth = _truth(metric, rates_)
    counts = np.random.default_rng(0).binomial(sizes_, rates_, size=(DRAWS, *sizes_.shape))
    bounds: dict[bytes, float] = {}
    misses = 0
    for x in counts:
        if x.tobytes() not in bounds:
            y_true, y_pred, group = _rows(metric, x, sizes_)
            bounds[x.tobytes()] = metric_bound(metric, y_true, y_pred, sensitive_features=group,
                                               alpha=ALPHA, method=method)
        bound = bounds[x.tobytes()]
        misses += bound < truth if METRICS[metric].sense == "upper" else bound > truth
    assert misses / DRAWS <= ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / DRAWS)


@pytest.mark.parametrize(("n1", "n0", "theta", "ratio"),
                         [(12, 20, -0.15, False), (20, 12, 0.5, True)])
def test_the_exact_test_rejects_a_true_null_at_most_at_its_level(n1: int, n0: int, theta: float,
                                                                ratio: bool) -> None:
    # Enumerate every table: the probability of rejecting, at rates on the null boundary
    # p_1 = p_0 + theta (theta p_0), is at most alpha; the score test's is not always.
    x1, x0 = np.arange(n1 + 1), np.arange(n0 + 1)
    rejected = np.array([[not _exact_test(a, n1, b, n0, ratio, ALPHA)(theta) for b in x0]
                         for a in x1])
    for p0 in np.linspace(0.0, 1.0, 41):
        p1 = theta * p0 if ratio else p0 + theta
        if 0.0 <= p1 <= 1.0:
            table = binom.pmf(x1, n1, p1)[:, None] * binom.pmf(x0, n0, p0)[None, :]
            assert (table * rejected).sum() <= ALPHA


@pytest.mark.parametrize(("x1", "n1", "x0", "n0", "theta", "ratio"),
                         [(9, 15, 4, 20, -0.1, False), (3, 25, 10, 18, 0.3, True)])
def test_the_exact_p_value_by_hand(x1: int, n1: int, x0: int, n0: int, theta: float,
                                   ratio: bool) -> None:
    """The largest probability, over the null boundary within the Clopper-Pearson set of
    level ``1 - gamma``, of the tables whose score statistic is at least the observed one,
    plus ``gamma`` (Berger & Boos), every table counted."""
    from scipy.stats import binomtest

    from fairtune.fairness.bounds import _GAMMA, _exact_pvalue, _z

    gamma = _GAMMA * ALPHA
    sets = tuple(tuple(binomtest(x, n).proportion_ci(1 - gamma / 2))
                 for x, n in ((x1, n1), (x0, n0)))
    (l1, u1), (l0, u0) = sets
    y1, y0 = np.meshgrid(np.arange(n1 + 1.0), np.arange(n0 + 1.0), indexing="ij")
    extreme = _z(y1, n1, y0, n0, theta, ratio) >= _z(float(x1), n1, float(x0), n0, theta,
                                                       ratio) - 1e-9
    largest = 0.0
    for p0 in np.linspace(l0, u0, 4001):
        p1 = theta * p0 if ratio else p0 + theta
        if l1 <= p1 <= u1 and 0.0 <= p1 <= 1.0:
            table = binom.pmf(y1, n1, p1) * binom.pmf(y0, n0, p0)
            largest = max(largest, float((table * extreme).sum()))
    assert _exact_pvalue(x1, n1, x0, n0, theta, ratio, gamma, sets) == pytest.approx(
        largest + gamma, abs=2e-4)


def _equal(n: int, selected: int, groups: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Predictions of groups of ``n`` rows with ``selected`` predicted 1 in each."""
    y_pred = np.tile(np.r_[np.ones(selected), np.zeros(n - selected)], groups)
    return y_pred, np.repeat([f"g{g}" for g in range(groups)], n)


def test_the_widths_at_700_rows_a_group() -> None:
    y_pred, group = _equal(700, 315)  # both rates 0.45
    gap = {m: metric_bound("demographic_parity", y_pred, y_pred, sensitive_features=group,
                           alpha=0.05, method=m) for m in METHODS}
    ratio = {m: metric_bound("disparate_impact", y_pred, y_pred, sensitive_features=group,
                             alpha=0.05, method=m) for m in METHODS}
    # Hoeffding at the full level: sqrt(log(1 / alpha) (1 / 700 + 1 / 700) / 2).
    assert gap["hoeffding"] == pytest.approx(np.sqrt(np.log(20) / 700), abs=1e-6)
    assert gap["score"] == pytest.approx(0.0437, abs=0.001)  # about 1.645 sqrt(2 pq / n)
    # The exact test pays a little for its level at every rate pair.
    assert gap["score"] < gap["exact"] < gap["score"] + 0.006 < gap["hoeffding"] - 0.01
    assert ratio["hoeffding"] < ratio["exact"] < ratio["score"] < 1.0


def test_no_split_over_pairs_or_rates() -> None:
    """The gap's bound of three groups is the largest of its pairs' bounds (each pair at the
    full level), and equalized odds' the larger of its two rates'."""
    rng = np.random.default_rng(1)
    group = rng.choice(["a", "b", "c"], 3000)
    y_true = rng.integers(0, 2, 3000)
    y_pred = (rng.random(3000) < np.select([group == "a", group == "b"], [0.3, 0.35], 0.4)
              + 0.1 * y_true).astype(int)
    for method in METHODS:
        def bound(metric: str, keep: np.ndarray, method: str = method) -> float:
            return metric_bound(metric, y_true[keep], y_pred[keep],
                                sensitive_features=group[keep], alpha=0.05, method=method)

        everyone = np.ones(3000, dtype=bool)
        pairs = [bound("demographic_parity", group != g) for g in "abc"]
        assert bound("demographic_parity", everyone) == pytest.approx(max(pairs), abs=1e-4)
        assert bound("equalized_odds", everyone) == pytest.approx(max(
            bound("equal_opportunity", everyone), bound("false_positive_rate", everyone)),
            abs=1e-4)


def test_randomized_predictions() -> None:
    """Hoeffding's bound takes the probabilities as they are: the bound of their means. The
    tests of counts take 0/1 predictions drawn with a fixed seed, and still hold."""
    group = np.repeat(["a", "b"], 700)
    probabilities = np.r_[np.full(700, 0.45), np.linspace(0.3, 0.6, 700)]
    y_pred, _ = _equal(700, 315)
    assert metric_bound("demographic_parity", y_pred, probabilities, sensitive_features=group,
                        alpha=0.05, method="hoeffding") == pytest.approx(metric_bound(
                            "demographic_parity", y_pred, y_pred, sensitive_features=group,
                            alpha=0.05, method="hoeffding"))
    drawn = (np.random.default_rng(0).random(1400) < probabilities).astype(int)
    for method in ("exact", "score"):
        assert metric_bound("demographic_parity", y_pred, probabilities,
                            sensitive_features=group, alpha=0.05, method=method) == \
            metric_bound("demographic_parity", y_pred, drawn, sensitive_features=group,
                         alpha=0.05, method=method)
    # A fixed randomized classifier whose rates are known (Beta means 2/7 and 1/2) misses
    # its true gap at most at the level (the exact test draws as the score test does).
    truth, misses, runs = 0.5 - 2 / 7, {"score": 0, "hoeffding": 0}, 200
    group = np.repeat(["a", "b"], [120, 60])
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        p = np.r_[rng.beta(2, 5, 120), rng.beta(3, 3, 60)]
        for method in misses:
            misses[method] += metric_bound("demographic_parity", p > 2, p,
                                           sensitive_features=group, alpha=ALPHA,
                                           method=method) < truth
    limit = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert all(m / runs <= limit for m in misses.values()), misses


@pytest.mark.parametrize("method", METHODS)
def test_edge_cases(method: str) -> None:
    group = np.array(["a", "b"] * 500)
    y_true = np.array([0, 0, 1, 1] * 250)

    def bound(metric: str, y_pred: np.ndarray, y: np.ndarray = y_true) -> float:
        return metric_bound(metric, y, y_pred, sensitive_features=group, alpha=0.05,
                            method=method)

    # Selecting no one: 1 on the rows, but rates of 0 on new data can have any ratio.
    assert bound("disparate_impact", np.zeros(1000)) == 0.0
    assert 0.0 < bound("demographic_parity", np.zeros(1000)) < 0.1
    # Selecting everyone: a ratio near 1 and a gap near 0.
    assert bound("disparate_impact", np.ones(1000)) > 0.9
    assert 0.0 < bound("demographic_parity", np.ones(1000)) < 0.1
    # A group without a positive row: its true positive rate, so the gap, can be anything.
    no_positive = np.where(group == "a", 0, y_true)
    assert bound("equal_opportunity", y_true, no_positive) == 1.0
    # A gap as large as it gets is bounded by 1, a ratio of 0 by 0.
    apart = (group == "a").astype(int)
    assert bound("demographic_parity", apart) == 1.0
    assert bound("disparate_impact", apart) == 0.0


def test_bad_arguments() -> None:
    y_pred, group = _equal(30, 10)
    with pytest.raises(ValueError, match=r"`method` must be one of \['exact', 'score', "
                                         r"'hoeffding'\], but got method='bonferroni'\."):
        metric_bound("demographic_parity", y_pred, y_pred, sensitive_features=group,
                     alpha=0.05, method="bonferroni")
    with pytest.raises(ValueError, match=r"`method` must be one of .*method='kl'"):
        metric_bound_width("demographic_parity", [[30], [30]], 0.5, alpha=0.05, method="kl")
    for alpha in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=rf"`alpha` must be a float in \(0, 1\), but got "
                                             rf"alpha={alpha}\."):
            metric_bound("demographic_parity", y_pred, y_pred, sensitive_features=group,
                         alpha=alpha)
        with pytest.raises(ValueError, match=r"`alpha` must be a float in \(0, 1\)"):
            metric_bound_width("disparate_impact", [[30], [30]], 0.5, alpha=alpha)


@pytest.mark.parametrize("method", METHODS)
def test_the_width_is_the_bound_of_equal_rates_and_falls_with_the_rows(method: str) -> None:
    y_pred, group = _equal(700, 315, groups=3)
    # The exact test's width is the score test's, a little narrower than its bound.
    tolerance = 0.002 if method == "exact" else 1e-9
    for metric, to_width in (("demographic_parity", lambda b: b),
                             ("disparate_impact", lambda b: 1.0 - b)):
        bound = metric_bound(metric, y_pred, y_pred, sensitive_features=group, alpha=0.05,
                             method=method)
        width = metric_bound_width(metric, [[700]] * 3, 0.45, alpha=0.05, method=method)
        assert width == pytest.approx(to_width(bound), abs=tolerance)
    for metric, rates in (("demographic_parity", 0.3), ("equalized_odds", 0.5),
                          ("disparate_impact", 0.05)):
        sizes = np.array([[30.0, 100.0], [200.0, 700.0]])[:, :len(METRICS[metric].rates)]
        widths = [metric_bound_width(metric, sizes * scale, rates, alpha=0.05, method=method)
                  for scale in (0.5, 1.0, 2.0, 10.0, 1000.0)]
        # (Hoeffding's ratio bound is 0, a width of 1, until the rows are many.)
        assert all(0.0 < b <= a <= 1.0 and (b < a or a == 1.0)
                   for a, b in pairwise(widths)) and widths[-1] < widths[0], widths
