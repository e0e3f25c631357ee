from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import optuna
import pytest

from fairtune.fairness import set_fairness_constraints
from fairtune.visualization import plot_best_feasible, plot_tradeoff

optuna.logging.set_verbosity(optuna.logging.WARNING)
Y = np.array([1, 0] * 10)
GROUPS = np.array(["a"] * 10 + ["b"] * 10)


def _study(seed: int, n: int = 8, name: str | None = None) -> optuna.Study:
    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0, 1)
        y_pred = np.where((GROUPS == "a") & (np.arange(20) < 10 * x), 1, Y)
        set_fairness_constraints(trial, Y, y_pred, sensitive_features=GROUPS, limits="dsp<=0.2")
        return x

    study = optuna.create_study(direction="maximize", study_name=name,
                                sampler=optuna.samplers.RandomSampler(seed=seed))
    study.optimize(objective, n_trials=n)
    return study


def test_plot_tradeoff_draws_every_trial_the_limit_and_the_best_fair_trial() -> None:
    study = _study(0)
    ax = plot_tradeoff(study)
    points = ax.collections[0].get_offsets()
    assert len(points) == 8
    np.testing.assert_allclose(sorted(points[:, 1]), sorted(t.value for t in study.trials))
    limit_lines = [line for line in ax.get_lines() if list(line.get_xdata()) == [0.2, 0.2]]
    assert len(limit_lines) == 1
    star = ax.collections[1].get_offsets()[0]
    assert star[1] == pytest.approx(study.best_trial.value)
    plt.close("all")


def test_plot_tradeoff_errors() -> None:
    study = optuna.create_study()
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    with pytest.raises(ValueError, match="no completed trial with fairness values"):
        plot_tradeoff(study)
    with pytest.raises(ValueError, match="`metric`"):
        plot_tradeoff(_study(1, 3), metric="equal_opportunity")


def test_plot_best_feasible_median_and_band() -> None:
    studies = {"random": [_study(s, 6) for s in range(3)],
               "other": [_study(10 + s, 6) for s in range(2)]}
    ax = plot_best_feasible(studies)
    assert len(ax.get_lines()) == 2
    assert len(ax.collections) == 2  # one IQR band per label
    curve = ax.get_lines()[0].get_ydata()
    final_bests = [max(t.value for t in s.trials if t.constraints["demographic_parity"] <= 0)
                   for s in studies["random"]]
    assert curve[-1] == pytest.approx(np.median(final_bests))
    plt.close("all")
    with pytest.raises(ValueError, match="`studies`"):
        plot_best_feasible({})


def test_plot_best_feasible_takes_a_single_study_or_a_list() -> None:
    study = _study(0, 6)
    best = max(t.value for t in study.trials if t.constraints["demographic_parity"] <= 0)
    for arg in (study, [study]):
        ax = plot_best_feasible(arg)
        (line,) = ax.get_lines()
        assert line.get_label() == study.study_name
        assert line.get_ydata()[-1] == pytest.approx(best)
        plt.close("all")
    with pytest.raises(ValueError, match=r"`studies\['a'\]` must be a study or a list"):
        plot_best_feasible({"a": ["not a study"]})
    with pytest.raises(ValueError, match="`studies` must be a study"):
        plot_best_feasible("not a study")
    # A study without trials draws nothing rather than failing.
    assert plot_best_feasible(optuna.create_study()).get_lines() == []
    plt.close("all")


def test_plot_best_feasible_counts_trials_from_0_as_the_reports_do() -> None:
    study = _study(0, 6)
    first_fair = min(t.number for t in study.trials if t.constraints["demographic_parity"] <= 0)
    (line,) = plot_best_feasible(study).get_lines()
    assert line.get_xdata()[0] == first_fair
    assert line.get_xdata()[-1] == study.trials[-1].number == 5
    plt.close("all")


def test_plot_best_feasible_skips_studies_without_a_feasible_trial() -> None:
    unfair = optuna.create_study(direction="maximize")
    unfair.optimize(lambda t: (t.set_constraint("c", 1.0), t.suggest_float("x", 0, 1))[1],
                    n_trials=3)
    crashed = optuna.create_study(direction="maximize")
    crashed.optimize(lambda t: 1 / 0, n_trials=2, catch=(ZeroDivisionError,))
    ax = plot_best_feasible({"unfair": unfair, "crashed": crashed, "fair": _study(0)})
    assert [line.get_label() for line in ax.get_lines()] == ["fair"]
    plt.close("all")


def test_axes_carry_the_stored_metric_name_and_the_curve_uses_the_one_fairness_rule() -> None:
    study = _study(0)
    study.set_user_attr("fairtune:metric", "balanced_accuracy")
    assert plot_tradeoff(study).get_ylabel() == "balanced_accuracy"
    # A trial without fairness values is feasible for Optuna, but not fair: the curve ignores it.
    study.add_trial(optuna.trial.create_trial(
        params={"x": 0.5}, distributions=study.trials[0].distributions, value=5.0))
    ax = plot_best_feasible(study)
    assert ax.get_ylabel() == "best fair balanced_accuracy"
    assert max(ax.get_lines()[0].get_ydata()) < 5.0
    plt.close("all")


def test_a_study_name_with_dollars_is_drawn_as_written() -> None:
    from matplotlib import cbook

    study = _study(0, name="cost $5 to $10")
    title = plot_tradeoff(study).get_title()
    assert not cbook.is_math_text(title)  # not typeset as math...
    assert title.replace(r"\$", "$") == "Trade-off: cost $5 to $10"  # ...drawn as written
    (line,) = plot_best_feasible(study).get_lines()
    assert not cbook.is_math_text(line.get_label())
    plt.close("all")


def test_a_long_study_name_is_wrapped_inside_the_figure() -> None:
    from matplotlib import cbook

    name = "quarterly lending model $ review " * 10  # 330 characters
    ax = plot_tradeoff(_study(0, name=name))
    ax.figure.canvas.draw()
    lines = ax.get_title().split("\n")
    assert len(lines) == 3 and lines[-1].endswith(" ...")
    assert all(len(line.replace(r"\$", "$")) <= 40 for line in lines)
    assert not cbook.is_math_text(ax.get_title())
    box = ax.title.get_window_extent()
    figure = ax.figure.get_window_extent()
    assert figure.x0 <= box.x0 and box.x1 <= figure.x1  # drawn within the figure's width
    plt.close("all")


def test_a_tenant_plot_draws_its_own_trials_and_stars_its_own_best() -> None:
    from tests.test_report import tenant_study

    study = tenant_study()
    ax = plot_tradeoff(study, tenant="b")
    points = ax.collections[0].get_offsets()
    assert sorted(map(tuple, points)) == [(0.01, 0.55), (0.02, 0.61), (0.4, 0.7)]
    star = ax.collections[1].get_offsets()[0]
    assert tuple(star) == pytest.approx((0.02, 0.61))  # b's best fair trial, not a's 0.95
    assert ax.get_title() == "Trade-off: shared (tenant b)"
    assert ax.get_ylabel() == "balanced_accuracy"  # b's metric
    (line,) = plot_best_feasible(study, tenant="b").get_lines()
    assert list(line.get_xdata()) == [3, 4] and list(line.get_ydata()) == [0.61, 0.61]
    plt.close("all")


def test_a_best_fair_curve_whose_only_fair_trial_is_the_last_shows_it() -> None:
    import optuna

    from fairtune.visualization import plot_best_feasible

    study = optuna.create_study(direction="maximize")
    for number, gap in enumerate((0.3, 0.2, 0.01)):
        trial = study.ask()
        trial.set_user_attr("fairtune:demographic_parity", gap)
        trial.set_constraint("demographic_parity", gap - 0.05)
        study.tell(trial, 0.7 + number / 100)
    ax = plot_best_feasible(study)
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [2] and line.get_marker() == "o"
    assert ax.get_xlim()[0] <= 0 and ax.get_xlim()[1] >= 2


def test_a_single_progress_line_is_named_in_the_title_not_a_one_entry_legend() -> None:
    import matplotlib.pyplot as plt

    from fairtune.visualization import plot_best_feasible

    study = optuna.create_study(direction="maximize", study_name="cost $5")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    ax = plot_best_feasible(study)
    try:
        assert ax.get_legend() is None
        assert ax.get_title() == r"Best fair value: cost \$5"  # drawn as typed, not as math
    finally:
        plt.close(ax.figure)
    other = optuna.create_study(direction="maximize", study_name="other")
    other.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    ax = plot_best_feasible({"a": [study], "b": [other]})
    try:
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    finally:
        plt.close(ax.figure)
