"""Do the fairness bounds hold as often as their level says, and how wide are they?

For each setting (a metric, each group's rows and true rates), ``--draws`` samples are drawn:
each group's count of predicted 1 per rate is binomial with the group's rows and true rate,
which is what a model with those rates predicts on fresh rows. A miss is a draw whose bound
is below the true gap (above the true ratio): a model that breaks a limit at its true value
would be certified. A test at level ``alpha`` misses at most ``alpha`` of the draws for every
setting; the table shows the share of misses and its one-sided 95 % Clopper-Pearson upper
limit. Each setting's true gap is a few times the bound's width (its ratio a few widths below
1): a gap is the largest difference over both orders of each pair, so the bound of a smaller
true gap is raised by the reversed pair and could hardly miss; one pair at the true value is
the case the intersection-union test has to pass.

- Hoeffding's and the score test's bounds come from ``fairtune.fairness.bounds`` as
  ``metric_bound`` computes them from the groups' counts.
- The exact test's miss is counted as its certificate at the true value (every ordered pair of
  groups rejects at the true gap or ratio), one test per pair, so that 2,000 draws fit in
  minutes; on the first ``--check`` draws of each setting its bound is computed as well and the
  script reports whether "bound beyond the truth" and "certified at the truth" agree.

The widths are those of data whose groups have exactly equal rates 0.45, 700 rows a group
(``metric_bound``), with ``metric_bound_width`` next to them, and the exact bound's time at
20,000 rows a group.

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.bounds_coverage --draws 2000 \\
        --out benchmarks/results/bounds_coverage.md
"""

from __future__ import annotations

import argparse
import time
from functools import cache
from typing import NamedTuple

import numpy as np
from scipy.stats import beta

from fairtune.fairness import METRICS
from fairtune.fairness.bounds import (
    METHODS,
    _bound,
    _exact_test,
    metric_bound,
    metric_bound_width,
)


class Setting(NamedTuple):
    metric: str
    sizes: tuple[tuple[int, ...], ...]  # per group: rows per rate of the metric
    rates: tuple[tuple[float, ...], ...]  # per group: true rate per rate of the metric

    def label(self) -> str:
        sizes = "/".join(",".join(map(str, s)) for s in self.sizes)
        rates = "/".join(",".join(f"{r:g}" for r in rs) for rs in self.rates)
        return f"{self.metric}, {len(self.sizes)} groups, rows {sizes}, rates {rates}"


def _two(metric: str, n: tuple[int, int], p: tuple[float, float]) -> Setting:
    return Setting(metric, ((n[0],), (n[1],)), ((p[0],), (p[1],)))


SETTINGS = [
    _two("demographic_parity", (30, 30), (0.2, 0.7)),
    _two("demographic_parity", (30, 200), (0.02, 0.35)),
    _two("demographic_parity", (30, 200), (0.97, 0.6)),
    _two("demographic_parity", (100, 100), (0.3, 0.6)),
    _two("demographic_parity", (700, 700), (0.02, 0.06)),
    _two("demographic_parity", (700, 700), (0.5, 0.6)),
    _two("demographic_parity", (5000, 5000), (0.3, 0.35)),
    _two("demographic_parity", (5000, 700), (0.97, 0.9)),
    Setting("demographic_parity", ((100,),) * 4, ((0.3,), (0.45,), (0.45,), (0.7,))),
    Setting("demographic_parity", ((700,), (700,), (200,), (5000,)),
            ((0.5,), (0.55,), (0.6,), (0.4,))),
    _two("disparate_impact", (30, 200), (0.3, 0.6)),
    _two("disparate_impact", (30, 30), (0.5, 0.97)),
    _two("disparate_impact", (100, 100), (0.3, 0.5)),
    _two("disparate_impact", (700, 700), (0.02, 0.04)),
    _two("disparate_impact", (5000, 700), (0.3, 0.4)),
    Setting("disparate_impact", ((700,),) * 4, ((0.3,), (0.4,), (0.4,), (0.5,))),
    Setting("equalized_odds", ((30, 100), (200, 700)), ((0.97, 0.02), (0.6, 0.05))),
    Setting("equalized_odds", ((700, 700),) * 4,
            ((0.5, 0.3), (0.6, 0.35), (0.6, 0.35), (0.7, 0.4))),
    Setting("equalized_odds", ((5000, 5000),) * 2, ((0.3, 0.5), (0.35, 0.5))),
]


def _truth(setting: Setting) -> float:
    rates = np.array(setting.rates)
    if METRICS[setting.metric].aggregate == "difference":
        return float((rates.max(axis=0) - rates.min(axis=0)).max())
    return float((rates.min(axis=0) / rates.max(axis=0)).min())


def _missed(aggregate: str, bound: float, truth: float) -> bool:
    return bound < truth if aggregate == "difference" else bound > truth


@cache
def _exact_certifies(aggregate: str, counts: tuple[tuple[int, ...], ...],
                     sizes: tuple[tuple[int, ...], ...], truth: float, alpha: float) -> bool:
    """Whether every ordered pair (g, h) and rate rejects at the true value: a ratio's
    ``rate_g / rate_h <= truth``, a gap's ``rate_g - rate_h >= truth``."""
    ratio = aggregate == "ratio"
    rates = np.array(counts) / np.array(sizes)
    pairs = [(g, h, r) for g in range(len(counts)) for h in range(len(counts))
             for r in range(len(counts[g])) if g != h]
    # The pair likeliest to pass first: the largest observed gap (smallest observed ratio).
    pairs.sort(key=lambda p: rates[p[0], p[2]] / max(rates[p[1], p[2]], 1e-12) if ratio
               else rates[p[1], p[2]] - rates[p[0], p[2]])
    for g, h, r in pairs:
        one, zero = (g, h) if ratio else (h, g)
        test = _exact_test(counts[one][r], sizes[one][r], counts[zero][r], sizes[zero][r],
                           ratio, alpha)
        if test(truth if ratio else -truth):
            return False
    return True


@cache
def _cached_bound(aggregate: str, counts: tuple[tuple[int, ...], ...],
                  sizes: tuple[tuple[int, ...], ...], alpha: float, method: str) -> float:
    n = np.array(sizes, dtype=float)
    return _bound(aggregate, np.array(counts) / n, n, alpha, method)


def coverage(setting: Setting, draws: int, alpha: float, check: int, seed: int
             ) -> tuple[dict[str, int], int, int]:
    """Misses per method, and the exact test's agreements of bound and certificate."""
    aggregate = METRICS[setting.metric].aggregate
    truth = _truth(setting)
    sizes = np.array(setting.sizes)
    counts = np.random.default_rng(seed).binomial(sizes, np.array(setting.rates),
                                                  size=(draws, *sizes.shape))
    misses = dict.fromkeys(METHODS, 0)
    agree = checked = 0
    for i, x in enumerate(counts):
        key = tuple(map(tuple, x.tolist()))
        for method in ("score", "hoeffding"):
            bound = _cached_bound(aggregate, key, setting.sizes, alpha, method)
            misses[method] += _missed(aggregate, bound, truth)
        certified = _exact_certifies(aggregate, key, setting.sizes, truth, alpha)
        misses["exact"] += certified
        if i < check:
            bound = _cached_bound(aggregate, key, setting.sizes, alpha, "exact")
            agree += _missed(aggregate, bound, truth) == certified
            checked += 1
    return misses, agree, checked


def widths(alpha: float) -> list[str]:
    group = np.repeat(["a", "b"], 700)
    y_pred = np.tile(np.r_[np.ones(315), np.zeros(385)], 2)  # 0.45 in each group
    lines = ["| metric | method | bound | metric_bound_width |", "|---|---|---:|---:|"]
    for metric in ("demographic_parity", "disparate_impact"):
        for method in ("hoeffding", "exact", "score"):
            bound = metric_bound(metric, y_pred, y_pred, sensitive_features=group,
                                 alpha=alpha, method=method)
            width = metric_bound_width(metric, [[700], [700]], 0.45, alpha=alpha,
                                       method=method)
            lines.append(f"| {metric} | {method} | {bound:.4f} | {width:.4f} |")
    return lines


def timing(alpha: float) -> str:
    rng = np.random.default_rng(0)
    group = np.repeat(["a", "b"], 20000)
    y_pred = (rng.random(40000) < 0.45).astype(int)
    start = time.perf_counter()
    for metric in ("demographic_parity", "disparate_impact"):
        metric_bound(metric, y_pred, y_pred, sensitive_features=group, alpha=alpha)
    seconds = (time.perf_counter() - start) / 2
    return (f"The exact bound of two groups of 20,000 rows (rates about 0.45) took "
            f"{seconds:.2f} s a metric on this machine.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--check", type=int, default=50,
                        help="draws per setting whose exact bound is computed too")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also write the output to this file")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    lines = [f"`python -m benchmarks.bounds_coverage --draws {args.draws}`, alpha "
             f"{args.alpha} (level {1 - args.alpha:g}), {args.draws} draws a setting:", "",
             "| setting | method | level | share of misses | 95 % upper limit |",
             "|---|---|---:|---:|---:|"]
    worst = dict.fromkeys(METHODS, 0.0)
    agree = checked = 0
    for k, setting in enumerate(SETTINGS):
        misses, a, c = coverage(setting, args.draws, args.alpha, args.check, args.seed + k)
        agree, checked = agree + a, checked + c
        for method in METHODS:
            share = misses[method] / args.draws
            upper = beta.ppf(0.95, misses[method] + 1, args.draws - misses[method])
            worst[method] = max(worst[method], share)
            lines.append(f"| {setting.label()} | {method} | {1 - args.alpha:g} | "
                         f"{share:.4f} | {upper:.4f} |")
        print(lines[-3:], flush=True)
    lines += ["", "Worst share of misses: " + ", ".join(
        f"{method} {share:.4f}" for method, share in worst.items()) + ".", "",
        f"Exact test: its bound and its certificate at the true value agreed on {agree} of "
        f"{checked} draws checked.", "",
        "Widths, two groups of 700 rows whose rates are both 0.45:", "", *widths(args.alpha),
        "", timing(args.alpha), f"Run time {time.perf_counter() - start:.0f} s."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as file:
            file.write(text)


if __name__ == "__main__":
    main()
