"""The benchmark pages' sentences say what their tables show.

Each check quotes a distinctive part of the sentence it guards and asserts that it is still on
the page, then asserts the claim against the page's own table rows: an edited sentence fails its
check instead of passing it vacuously, and so does a table rerun that no longer supports it.
Nothing here runs a benchmark; the pages are read as text. certified.md and index.md are not
covered here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "benchmarks"

Row = list[str]


def _text(page: str) -> str:
    return (BENCHMARKS / page).read_text()


def _prose(page: str) -> str:
    """The page with its whitespace collapsed, so that a quote may span a line break."""
    return " ".join(_text(page).split())


def _says(page: str, *quotes: str) -> None:
    prose = _prose(page)
    for quote in quotes:
        assert quote in prose, f"{page} no longer says {quote!r}: update its check"


def _table(page: str, header: str) -> list[Row]:
    """The body rows (cells stripped) of the page's table whose header line starts with
    ``header``."""
    lines = _text(page).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _row(rows: list[Row], *labels: str) -> Row:
    """The one row whose first cells are ``labels``."""
    (row,) = [r for r in rows if r[:len(labels)] == list(labels)]
    return row


def _numbers(cell: str) -> list[float]:
    """The numbers of a cell or a sentence: "15 of 20 (p = 0.041)" -> [15, 20, 0.041]."""
    return [float(n.replace(",", "")) for n in re.findall(r"[-+]?\d[\d,]*(?:\.\d+)?", cell)]


def _first(cell: str) -> float:
    return _numbers(cell)[0]


# vs_mitigation.md: fairtune against fairlearn's mitigations

_VS = "vs_mitigation.md"
_MARGIN = "the same with margin=0.01"
_THRESHOLD = "fairtune, ThresholdOptimizer inside the search"
_REDUCTION = "fairtune, ExponentiatedGradient inside the search"
_HYPERPARAMETERS = "fairtune, hyperparameters alone (FairBOSampler)"
_NO_LIMIT = ["the default XGBoost, no limit", "XGBoost tuned for accuracy alone, no limit"]
_FAIRLEARN = [f"fairlearn's {m} on {x} XGBoost"
              for m in ("ThresholdOptimizer", "ExponentiatedGradient")
              for x in ("a default", "an accuracy-tuned")]


def _accuracy_and_fair(row: Row) -> tuple[tuple[float, int], tuple[float, int]]:
    """COMPAS's and Adult's (test accuracy, splits fair on test) of a row of 20 splits."""
    for cell in row[2::2]:
        assert cell.endswith("of 20"), row
    return ((float(row[1]), int(_first(row[2]))), (float(row[3]), int(_first(row[4]))))


def _vs_rows(header: str) -> dict[str, tuple[tuple[float, int], tuple[float, int]]]:
    return {row[0]: _accuracy_and_fair(row) for row in _table(_VS, header)}


def test_vs_mitigation_answer_quotes_the_demographic_parity_table() -> None:
    rows = _vs_rows("| method | COMPAS")
    margin = rows[_MARGIN]
    baselines = [rows[m] for m in _FAIRLEARN]
    _says(_VS, "keeps the limit on new data in 20 of 20 COMPAS splits and 19 of 20 Adult splits",
          "ExponentiatedGradient on a default or an accuracy-tuned XGBoost keep it in at most 11 "
          "of 20")
    assert [margin[d][1] for d in (0, 1)] == [20, 19]
    assert max(b[d][1] for b in baselines for d in (0, 1)) == 11
    _says(_VS, "The limit costs 0.9 points of test accuracy on COMPAS and 1.6 on Adult against "
               "the most accurate XGBoost without a limit")
    costs = [round(100 * (max(rows[m][d][0] for m in _NO_LIMIT) - margin[d][0]), 1)
             for d in (0, 1)]
    assert costs == [0.9, 1.6]
    _says(_VS, "fairlearn's baselines are at most 0.6 points more accurate, and their models break "
               "the limit on test in 9 to 20 of the 20 splits")
    assert max(round(100 * (b[d][0] - margin[d][0]), 1) for b in baselines for d in (0, 1)) == 0.6
    broken = [20 - b[d][1] for b in baselines for d in (0, 1)]
    assert (min(broken), max(broken)) == (9, 20)


def test_vs_mitigation_bullets_under_the_demographic_parity_table() -> None:
    rows = _vs_rows("| method | COMPAS")
    # "A mitigation inside the search is far more accurate than hyperparameters alone ...
    # 11 points less accurate on COMPAS, 5 on Adult."
    _says(_VS, "A mitigation inside the search is far more accurate than hyperparameters alone.",
          "11 points less accurate on COMPAS, 5 on Adult")
    alone = rows[_HYPERPARAMETERS]
    for search in (_THRESHOLD, _MARGIN, _REDUCTION):
        assert all(rows[search][d][0] - alone[d][0] > 0.04 for d in (0, 1)), search
    assert [round(100 * (rows[_THRESHOLD][d][0] - alone[d][0])) for d in (0, 1)] == [11, 5]
    # "The margin costs little ... Adult 0.2 points ... 0.2 points below ThresholdOptimizer on
    # the default XGBoost ..., which keeps the limit on test in 11 of 20 splits."
    _says(_VS, "Adult 0.2 points (3 / 0 / 17)",
          "0.2 points below ThresholdOptimizer on the default XGBoost (4 / 0 / 16, p = 0.012), "
          "which keeps the limit on test in 11 of 20 splits")
    default_post = rows[_FAIRLEARN[0]]
    assert round(100 * (rows[_THRESHOLD][1][0] - rows[_MARGIN][1][0]), 1) == 0.2
    assert round(100 * (default_post[1][0] - rows[_MARGIN][1][0]), 1) == 0.2
    assert default_post[1][1] == 11
    # "Without the margin the threshold search is not significantly less accurate than
    # ThresholdOptimizer on the accuracy-tuned XGBoost on COMPAS (0.674 against 0.678; ...) and
    # as accurate as ThresholdOptimizer on the default one on Adult (11 / 0 / 9), and is fair on
    # test a little more often (17 and 13 of 20, against 11)."
    _says(_VS, "not significantly less accurate than ThresholdOptimizer on the accuracy-tuned "
               "XGBoost on COMPAS (0.674 against 0.678; 7 / 0 / 13, p = 0.26)",
          "as accurate as ThresholdOptimizer on the default one on Adult (11 / 0 / 9)",
          "(17 and 13 of 20, against 11)")
    threshold, tuned_post = rows[_THRESHOLD], rows[_FAIRLEARN[1]]
    assert (threshold[0][0], tuned_post[0][0]) == (0.674, 0.678)
    assert threshold[1][0] == default_post[1][0]
    assert (threshold[0][1], threshold[1][1]) == (17, 13)
    assert tuned_post[0][1] == default_post[1][1] == 11
    # "on Adult its models break the limit on all 20 test splits" (fairlearn's reduction)
    _says(_VS, "on Adult its models break the limit on all 20 test splits")
    assert [rows[m][1][1] for m in _FAIRLEARN[2:]] == [0, 0]


def test_vs_mitigation_equalized_odds_sentences() -> None:
    rows = _vs_rows("| method (XGBoost, equalized odds)")
    threshold, reduction = rows[_THRESHOLD], rows[_REDUCTION]
    # "(fair on test in 12 and 17 of 20 splits, against 14 and 16 without it)"
    _says(_VS, "against 14 and 16 without it")
    assert (threshold[0][1], threshold[1][1]) == (14, 16)
    # On Adult the reduction inside the search is "more accurate than the threshold search in
    # 20 of 20 splits and as often fair on test"; "On COMPAS it is more accurate too (17 / 0 / 3)
    # but fair on test less often."
    _says(_VS, "more accurate than the threshold search in 20 of 20 splits and as often fair on "
               "test", "On COMPAS it is more accurate too (17 / 0 / 3) but fair on test less often")
    assert reduction[1][0] > threshold[1][0] and reduction[1][1] == threshold[1][1]
    assert reduction[0][0] > threshold[0][0] and reduction[0][1] < threshold[0][1]
    # "fairlearn's ExponentiatedGradient is the most accurate and breaks the limit on most test
    # splits."
    _says(_VS, "fairlearn's ExponentiatedGradient is the most accurate and breaks the limit on "
               "most test splits")
    reduction_post = rows[_FAIRLEARN[3]]
    for d in (0, 1):
        assert reduction_post[d][0] == max(r[d][0] for r in rows.values())
        assert 20 - reduction_post[d][1] > 10


def test_vs_mitigation_what_one_test_split_settles() -> None:
    rows = _table(_VS, "| data, model, limit | method |")
    settled = {(r[0], r[1]): (int(r[4]), int(r[5])) for r in rows}
    _says(_VS, "ExponentiatedGradient breaks the limit on Adult under demographic parity, in 19 "
               "of 20 splits",
          "ThresholdOptimizer on a default random forest breaks it under equalized odds, in 10 "
          "of 20",
          "for the threshold search, and for XGBoost under equalized odds, it settles at most 3 "
          "of 20 verdicts either way")
    assert settled["Adult, XGBoost, demographic parity",
                   "fairlearn's ExponentiatedGradient on a default XGBoost"][1] == 19
    assert settled["Adult, random forest, equalized odds",
                   "fairlearn's ThresholdOptimizer on a default random forest"][1] == 10
    few = [sum(v) for (setting, method), v in settled.items()
           if method == _THRESHOLD or setting.endswith("XGBoost, equalized odds")]
    assert len(few) == 5 and max(few) == 3
    # "a second run of the threshold search was fair on test in 11 of 20 COMPAS splits under
    # equalized odds (14 in the table above)"
    _says(_VS, "fair on test in 11 of 20 COMPAS splits under equalized odds (14 in the table "
               "above)")
    assert _row(rows, "COMPAS, XGBoost, equalized odds", _THRESHOLD)[3] == "11"
    assert _vs_rows("| method (XGBoost, equalized odds)")[_THRESHOLD][0][1] == 14


# cgp.md: CGPSampler against tuning alone and FTS-DE

_CGP = "cgp.md"


def test_cgp_answer_and_hartmann_section_quote_the_table() -> None:
    rows = {r[0]: r for r in _table(_CGP, "| function | CGPSampler on a board")}
    board = {f: float(r[1]) for f, r in rows.items()}
    alone = {f: float(r[2]) for f, r in rows.items()}
    fts_de = {f: float(r[3]) for f, r in rows.items()}
    # "end with a lower optimality gap than the same agents tuning alone on every function, and
    # than FTS-DE on Ackley-5, Cosine-8 and Levy-20. On Hartmann-6 FTS-DE is lower"
    _says(_CGP, "lower optimality gap than the same agents tuning alone on every function, and "
                "than FTS-DE on Ackley-5, Cosine-8 and Levy-20. On Hartmann-6 FTS-DE is lower")
    assert len(rows) == 4 and all(board[f] < alone[f] for f in rows)
    assert all(_numbers(r[4])[:2] > [10, 0] and _numbers(r[4])[1] == 20 for r in rows.values())
    assert {f for f in rows if board[f] < fts_de[f]} == {"Ackley-5", "Cosine-8", "Levy-20"}
    # "FTS-DE's mean gap (0.111) is below CGPSampler's (0.172) in 16 of 20 replications"
    _says(_CGP, "FTS-DE's mean gap (0.111) is below CGPSampler's (0.172) in 16 of 20 replications",
          "UCB's mean 0.320")
    assert (fts_de["Hartmann-6"], board["Hartmann-6"], alone["Hartmann-6"]) == (0.111, 0.172, 0.32)
    below, of = _numbers(rows["Hartmann-6"][5])[:2]
    assert of - below == 16


def test_cgp_more_agents_do_not_lower_the_gap_further() -> None:
    _says(_CGP, "it falls a little from 1 to 4 agents and rises after",
          "but not by more as N grows (by 14.2, 7.5 and 9.8)")
    prose = _prose(_CGP)
    board = _numbers(re.search(r"CGP-UCB's mean gap is ([\d., and]+) with N", prose)[1])
    alone = _numbers(re.search(r"tuning alone \(([\d., and]+)\)", prose)[1])
    assert board[1] < board[0] and board[1] < board[2] < board[3]
    lowered = [round(a - b, 1) for a, b in zip(alone[1:], board[1:], strict=True)]
    assert lowered == [14.2, 7.5, 9.8] and lowered[0] == max(lowered)
    assert alone[0] == board[0]  # "With N = 1 it is the agent alone exactly."


# cgp_defaults.md: CGPSampler's defaults on held-out families

_DEFAULTS = "cgp_defaults.md"


def test_cgp_defaults_answer_quotes_the_held_out_table() -> None:
    rows = _table(_DEFAULTS, "| held-out families |")
    # "an agent that joins a board ends with lower regret than the same agent tuning alone at
    # 30 and 60 trials, and than Optuna's GPSampler alone"
    _says(_DEFAULTS, "ends with lower regret than the same agent tuning alone at 30 and 60 "
                     "trials, and than Optuna's `GPSampler` alone")
    later = [r for r in rows if r[1] in ("30", "60")]
    assert len(later) == 4
    for r in later:
        assert float(r[2]) < float(r[3]) and float(r[2]) < float(r[4]), r
        for cell in (r[5], r[7]):  # more agents below than above
            below, of = _numbers(cell)[:2]
            assert below > of / 2, r
    # "at 15 trials joining changes nothing with 4 agents and already pays with 16"
    _says(_DEFAULTS, "at 15 trials joining changes nothing with 4 agents and already pays with 16")
    (four, sixteen) = [r for r in rows if r[1] == "15"]
    assert "(4 agents)" in four[0] and _numbers(four[5])[2] > 0.05
    assert "(16 agents)" in sixteen[0] and float(sixteen[2]) < float(sixteen[3])
    assert "p < 0.001" in sixteen[5] and "p < 0.001" in sixteen[6]


def test_cgp_defaults_why_ei_quotes_the_screen() -> None:
    rows = _table(_DEFAULTS, "| setting | trials |")

    def below(cell: str) -> tuple[bool, float]:
        wins, _, losses, p = _numbers(cell)
        return wins > losses, p

    # "EI was the only setting whose board was significantly below itself alone (p < 0.05) at
    # both 30 and 60 trials and below GPSampler alone at both."
    _says(_DEFAULTS, "EI was the only setting whose board was significantly below itself alone "
                     "(p < 0.05) at both 30 and 60 trials and below `GPSampler` alone at both")
    settings = {r[0] for r in rows}
    passing = {s for s in settings
               if all(below(r[6])[0] and below(r[6])[1] < 0.05 and below(r[7])[0]
                      for r in rows if r[0] == s and r[1] in ("30", "60"))}
    assert passing == {"EI (the default)"}
    # "UCB with beta = 1 reached the lowest regret at 60 trials, but its board was not
    # significantly below itself alone (36 / 0 / 28, p = 0.38)"
    _says(_DEFAULTS, "UCB with beta = 1 reached the lowest regret at 60 trials, but its board was "
                     "not significantly below itself alone (36 / 0 / 28, p = 0.38)")
    at_60 = [r for r in rows if r[1] == "60"]
    assert min(at_60, key=lambda r: float(r[3]))[0] == "UCB, beta = 1"
    assert _row(rows, "UCB, beta = 1", "60")[6] == "36 / 0 / 28 (p = 0.382)"
    # "with the paper's beta = 2 the board is worse than GPSampler alone"
    _says(_DEFAULTS, "with the paper's beta = 2 the board is worse than `GPSampler` alone")
    for r in rows:
        if r[0] == "UCB, beta = 2 (the paper's)":
            wins, _, losses, _ = _numbers(r[7])
            assert wins < losses, r


def test_cgp_defaults_joining_never_harmed_more_agents_than_a_second_run() -> None:
    _says(_DEFAULTS, "Joining never harmed more agents by more than two noise sd than a second "
                     "run alone did")
    prose = _prose(_DEFAULTS)
    joining = _numbers(re.search(r"families ([\d.%, and]+) of the agents", prose)[1])
    second = _numbers(re.search(r"against ([\d.%, and]+) for a second run alone", prose)[1])
    assert len(joining) == len(second) == 3
    assert all(j < s for j, s in zip(joining, second, strict=True))


# collaborative.md: CollaborativeUCBSampler on Sim et al.'s benchmarks

_COLLABORATIVE = "collaborative.md"


def test_collaborative_answer_quotes_the_synthetic_table() -> None:
    rows = _table(_COLLABORATIVE, "| method | average regret")
    alone = next(r for r in rows if r[0].startswith("the same tenants tuning alone"))
    by_rho = {float(r[0].split("rho = ")[1]): r for r in rows if "rho = " in r[0]}
    regret = {rho: _numbers(r[1]) for rho, r in by_rho.items()}  # [mean, se]
    inequality = {rho: _first(r[3]) for rho, r in by_rho.items()}
    # "a fraction of the inequality of the same tenants tuning alone at every rho (0.26-0.34
    # against 1.19, lower in 10 of 10 seeds)"
    _says(_COLLABORATIVE, "at every `rho` (0.26-0.34 against 1.19, lower in 10 of 10 seeds)")
    assert round(min(inequality.values()), 2) == 0.26 and round(max(inequality.values()), 2) == 0.34
    assert round(_first(alone[3]), 2) == 1.19
    assert all(r[4].startswith("10 / 0 / 0") and r[5] == "10" for r in by_rho.values())
    # "and with a lower average regret for rho >= 0.4"
    _says(_COLLABORATIVE, "with a lower average regret for `rho >= 0.4`")
    alone_regret, alone_se = _numbers(alone[1])
    assert {rho for rho in by_rho if regret[rho][0] < alone_regret} == {0.4, 0.6, 0.8, 1.0}
    # "The average regret of rho = 0.2 is above that of the tenants tuning alone by about one
    # standard error"
    _says(_COLLABORATIVE, "above that of the tenants tuning alone by about one standard error")
    excess = regret[0.2][0] - alone_regret
    assert 0.5 * alone_se < excess < 1.5 * alone_se and 0.5 * regret[0.2][1] < excess
    # "Lowering rho trades regret for equality, as in the paper, though not between 1 and 0.8:
    # from rho = 1 to rho = 0.2 the inequality falls from 0.338 to 0.262 while the average regret
    # rises from 62.0 to 69.6."
    _says(_COLLABORATIVE, "trades regret for equality, as in the paper, though not between 1 and "
                          "0.8", "the inequality falls from 0.338 to 0.262 while the average "
                                 "regret rises from 62.0 to 69.6")
    for high, low in ((0.8, 0.6), (0.6, 0.4), (0.4, 0.2)):
        assert inequality[low] < inequality[high] and regret[low][0] > regret[high][0]
    assert not (inequality[0.8] < inequality[1.0] and regret[0.8][0] > regret[1.0][0])
    assert (inequality[1.0], inequality[0.2]) == (0.338, 0.262)
    assert (round(regret[1.0][0], 1), round(regret[0.2][0], 1)) == (62.0, 69.6)


def test_collaborative_femnist_sentences_quote_its_table() -> None:
    rows = _table(_COLLABORATIVE, "| rho | fixed c1")
    rhos = [float(r[0]) for r in rows]
    assert rhos == sorted(rhos, reverse=True)
    # "The average regret rises as rho falls, as in the paper (4.91 at rho = 1, 6.20 at
    # rho = 0.2), but the inequality does not fall: it stays at 0.298-0.316 for every rho, lower
    # than at rho = 1 in 4 to 6 of 10 seeds (p >= 0.75)."
    _says(_COLLABORATIVE, "The average regret rises as `rho` falls, as in the paper (4.91 at "
                          "`rho = 1`, 6.20 at `rho = 0.2`)",
          "it stays at 0.298-0.316 for every `rho`, lower than at `rho = 1` in 4 to 6 of 10 "
          "seeds (p >= 0.75)")
    inequalities, lower, ps = [], [], []
    for column in (1, 3):
        regret = [float(r[column]) for r in rows]
        assert regret == sorted(regret) and (regret[0], regret[-1]) == (4.91, 6.20)
        for r in rows:
            numbers = _numbers(r[column + 1])
            inequalities.append(numbers[0])
            if len(numbers) > 1:  # value, lower, tie, higher, p
                lower.append(numbers[1])
                ps.append(numbers[4])
    assert (min(inequalities), max(inequalities)) == (0.298, 0.316)
    assert (min(lower), max(lower)) == (4, 6) and min(ps) >= 0.75


# fairbo.md: FairBOSampler against Optuna's samplers

_FAIRBO = "fairbo.md"


def _fairbo_rows() -> dict[str, list[float | None]]:
    """Each row's FairBOSampler, GPSampler, TPESampler, RandomSampler cells (None: not run)."""
    rows = _table(_FAIRBO, "| problem, measure | FairBOSampler |")
    return {r[0]: [float(c) if c != "-" else None for c in r[1:]] for r in rows}


def test_fairbo_answer_quotes_the_table() -> None:
    rows = _fairbo_rows()
    compas_20 = rows["COMPAS random forest, demographic parity <= 0.05: seeds with a fair forest "
                     "by trial 20, of 10"]
    compas_40 = rows["the same by trial 40"]
    # "finds a fair model sooner than Optuna's samplers where fair models are rare (COMPAS: a
    # fair forest in 7 of 10 seeds by trial 20, TPESampler 5, GPSampler 1)"
    _says(_FAIRBO, "(COMPAS: a fair forest in 7 of 10 seeds by trial 20, TPESampler 5, "
                   "GPSampler 1)")
    assert compas_20[:3] == [7, 1, 5]
    assert all(c < compas_20[0] for c in compas_20[1:])
    assert all(c <= compas_40[0] for c in compas_40[1:])
    # "on 60 held-out German credit seeds it is level with GPSampler, ahead of random search,
    # and ahead of TPESampler at 20 trials (level at 40)"
    _says(_FAIRBO, "on 60 held-out German credit seeds it is level with GPSampler, ahead of "
                   "random search, and ahead of TPESampler at 20 trials (level at 40)",
          "against TPESampler 31 / 15 / 14 (p = 0.016) and 23 / 22 / 15 (p = 0.26)")
    german_20 = rows["German credit random forest, demographic parity <= 0.05: best fair "
                     "validation accuracy after 20 trials, median of 60 held-out seeds"]
    fairbo, gp, tpe, random = german_20
    assert fairbo == gp and fairbo > tpe and fairbo > random
    assert rows["the same after 40 trials"][0] > rows["the same after 40 trials"][3]
    # "With 6 to 16 parameters it stays level with GPSampler seed by seed, though GPSampler's
    # medians after 40 trials are lower." (the table: Levy-10 and the 16-d quadratic)
    _says(_FAIRBO, "though GPSampler's medians after 40 trials are lower")
    many = [rows["Levy's function, 10 parameters: best value after 40 trials, median of 10 seeds "
                 "(minimum 0)"], rows["a 16-d quadratic, 1 linear constraint: the same (minimum "
                                      "0.03)"]]
    for fairbo, gp, *_ in many:
        assert gp < fairbo and 4 <= round(100 * (1 - gp / fairbo)) <= 29
    # "a suggestion took 0.15-0.29 of GPSampler's time" (the table's row is one of those runs)
    _says(_FAIRBO, "a suggestion took 0.15-0.29 of GPSampler's time")
    fairbo, gp, *_ = rows["seconds per suggestion, 7 parameters, 1 constraint, 100 completed "
                          "trials (this machine, default threads)"]
    assert 0.15 <= round(fairbo / gp, 2) <= 0.29


def test_fairbo_bullets_quote_the_table() -> None:
    rows = _fairbo_rows()
    # "random search has none by trial 40 in 7 of 10 seeds"
    _says(_FAIRBO, "random search has none by trial 40 in 7 of 10 seeds")
    assert rows["the same by trial 40"][3] == 3
    # "FairBOSampler beats TPESampler on 9 and 10 of 10 seeds at 40 trials" (lower is better on
    # both problems; random search is further behind)
    _says(_FAIRBO, "FairBOSampler beats TPESampler on 9 and 10 of 10 seeds at 40 trials")
    gardner = ("Gardner et al. (2014), 2 parameters, 1 constraint: best feasible value after 40 "
               "trials, median of 10 seeds (optimum -2, lower is better)")
    gramacy = "Gramacy et al. (2016), 2 parameters, 2 constraints: the same (optimum 0.5998)"
    for label in (gardner, gramacy):
        fairbo, gp, tpe, random = rows[label]
        assert fairbo < tpe and fairbo < random and abs(fairbo - gp) <= 1e-4


def test_fairbo_the_paper_table_does_not_reproduce() -> None:
    # "Nor does the paper's table 2 reproduce": the validation error is higher on every dataset.
    _says(_FAIRBO, "Nor does the paper's table 2 reproduce")
    rows = _table(_FAIRBO, "| dataset | paper |")
    assert len(rows) == 3
    for dataset, paper, ours in rows:
        assert _first(ours) > float(paper), dataset


# mtkb.md: MTKBSampler against Optuna's multi-objective samplers

_MTKB = "mtkb.md"


def test_mtkb_answer_quotes_the_table() -> None:
    rows = {r[0]: r[1:] for r in _table(_MTKB, "| problem, measure | MTKBSampler |")}

    def cells(label: str) -> list[float | None]:
        return [float(c) if c not in ("-", "not run") else None for c in rows[label]]

    regret = [label for label in rows if "R_C" in label or label.startswith(
        ("German credit random forest", "the same after"))]
    assert len(regret) == 6
    # "MTKBSampler has the lowest cumulative expected-utility regret, what it optimizes, on every
    # problem"
    _says(_MTKB, "MTKBSampler has the lowest cumulative expected-utility regret, what it "
                 "optimizes, on every problem")
    for label in regret:
        mtkb, *others = cells(label)
        assert all(mtkb < o for o in others if o is not None), label
    # "Its hypervolume, what GPSampler optimizes, is lower than GPSampler's on the 2-task RKHS
    # function and the 4-objective sine, and higher on German credit."
    _says(_MTKB, "Its hypervolume, what GPSampler optimizes, is lower than GPSampler's on the "
                 "2-task RKHS function and the 4-objective sine, and higher on German credit",
          "so on two of the three problems where GPSampler ran it covers the Pareto front less",
          "(median 0.8923 against 0.9310)")
    german = cells("German credit: hypervolume after 100 trials, median (higher is better)")
    rkhs = cells("RKHS function, 2 tasks: hypervolume after 100 trials, mean")
    assert german[0] > german[1] and rkhs[0] < rkhs[1]
    # "A suggestion takes about 0.2-0.5 of GPSampler's time with 2 objectives and 0.01 with 4,
    # and MTKBSampler runs with 9 and 20 objectives, where GPSampler is not practical."
    _says(_MTKB, "A suggestion takes about 0.2-0.5 of GPSampler's time with 2 objectives and "
                 "0.01 with 4, and MTKBSampler runs with 9 and 20 objectives")
    two = cells("seconds per suggestion, 2 objectives, 200 completed trials (this machine, "
                "default threads)")
    four = cells("the same with 4 objectives")
    assert 0.2 <= two[0] / two[1] <= 0.5 and round(four[0] / four[1], 2) == 0.01
    assert rows["shifted Branin, 9 tasks: R_C after 100 trials"][1] == "not run"
    assert rows["RKHS function, 20 tasks: R_C after 100 trials"][1] == "not run"
    # "NSGAIISampler's trials coincide with RandomSampler's on the 1-parameter problems."
    _says(_MTKB, "NSGAIISampler's trials coincide with RandomSampler's on the 1-parameter "
                 "problems")
    for label in regret:
        if label.startswith(("RKHS", "perturbed sine", "the same after")):
            assert rows[label][3] == rows[label][4], label


def test_mtkb_the_papers_trend_quotes_its_table() -> None:
    rows = _table(_MTKB, "| problem | default width")
    widths = {r[0]: [tuple(_numbers(c)) for c in r[1:]] for r in rows}  # (MT-KB, IT-KB) a width
    related = ["RKHS function, 20 tasks", "shifted Branin, 9 tasks", "perturbed sine, 4 tasks"]
    # "With width="objectives" the paper's trend holds (MT-KB lower ... with 20 tasks, on Branin
    # and on the sine). With the paper's own width it is reversed"
    _says(_MTKB, "the paper's trend holds (MT-KB lower on 10 of 10 seeds with 20 tasks, on "
                 "Branin and on the sine)", "With the paper's own width it is reversed")
    for problem in related:
        objectives, paper = widths[problem][1], widths[problem][2]
        assert objectives[0] < objectives[1] and paper[0] > paper[1], problem
    # "With the default width the regret is lower on three of the four problems (on the 2-task
    # function some seeds stay stuck)"
    _says(_MTKB, "With the default width the regret is lower on three of the four problems (on "
                 "the 2-task function some seeds stay stuck)")
    lowest = {p for p, (default, *others) in widths.items()
              if max(default) < min(min(o) for o in others)}
    assert lowest == set(related)


# multifidelity.md: successive halving on large tables

_MULTIFIDELITY = "multifidelity.md"


def test_multifidelity_sentences_quote_the_table() -> None:
    rows = _table(_MULTIFIDELITY, "| table | search |")
    tables = {r[0] for r in rows}
    assert len(tables) == 2
    # "was not significantly less accurate on the test rows than the full search ..., and it
    # kept demographic_parity<=0.05 there at least as often"
    _says(_MULTIFIDELITY, "was not significantly less accurate on the test rows than the full "
                          "search", "at least as often")
    for table in tables:
        full = _row(rows, table, "full search, 50 trials")
        full_time, full_fair = _first(full[2]), _first(full[5])
        shorter = [r for r in rows if r[0] == table and r[1] != "full search, 50 trials"]
        assert len(shorter) == 3
        for r in shorter:
            # "Every search stayed within a third of its seed's full search." (means here)
            assert _first(r[2]) <= full_time / 3, r
            # "The limit on new data is met at least as often as by the full search"
            assert _first(r[5]) >= full_fair, r
        multi = _row(rows, table, "multi-fidelity")
        assert _numbers(multi[6])[3] > 0.05
    _says(_MULTIFIDELITY, "Every search stayed within a third of its seed's full search",
          "The limit on new data** is met at least as often as by the full search")
    # "the multi-fidelity search tried 45 configurations where the full search, stopped at the
    # same time, had tried 18"
    _says(_MULTIFIDELITY, "tried 45 configurations where the full search, stopped at the same "
                          "time, had tried 18")
    synthetic = "synthetic, 200,000 rows"
    assert _first(_row(rows, synthetic, "multi-fidelity")[3]) == 45
    assert _first(_row(rows, synthetic, "the full search stopped at a third")[3]) == 18


# new_data.md: fairness of the chosen model on new data

_NEW_DATA = "new_data.md"


def test_new_data_sentences_quote_the_table() -> None:
    rows = _table(_NEW_DATA, "| model | validation, deployed model |")
    split = "30 % validation split"

    def cell(model: str, deployed: str) -> dict[str, list[float]]:
        r = _row(rows, model, f"{split}, {deployed}")
        return {"unfair": _numbers(r[3]), "dsp": _numbers(r[4]), "accuracy": _numbers(r[5]),
                "seconds": _numbers(r[7])}

    # "on Adult that model met demographic_parity<=0.05 on new data in 20 of 20 seeds with
    # XGBoost and with a random forest"
    _says(_NEW_DATA, "met `demographic_parity<=0.05` on new data in 20 of 20 seeds with XGBoost "
                     "and with a random forest")
    for model in ("XGBoost", "random forest"):
        assert cell(model, "the validated model, margin 0.01")["unfair"] == [0, 20]
    # "Refitting the chosen configuration on all tuning rows instead puts 13 of 20 forests over
    # the limit (10 of 20 with the margin), at about the same mean test accuracy."
    _says(_NEW_DATA, "puts 13 of 20 forests over the limit (10 of 20 with the margin), at about "
                     "the same mean test accuracy")
    for suffix, unfair in (("", 13), (", margin 0.01", 10)):
        refitted = cell("random forest", "refitted on all tuning rows" + suffix)
        validated = cell("random forest", "the validated model" + suffix)
        assert refitted["unfair"] == [unfair, 20]
        assert abs(refitted["accuracy"][1] - validated["accuracy"][1]) <= 0.002
    # "Without a margin its test gap exceeds 0.05 in 2 (XGBoost) and 3 (forest) of 20 seeds, by
    # at most 0.010"
    _says(_NEW_DATA, "exceeds 0.05 in 2 (XGBoost) and 3 (forest) of 20 seeds, by at most 0.010")
    for model, unfair in (("XGBoost", 2), ("random forest", 3)):
        validated = cell(model, "the validated model")
        assert validated["unfair"] == [unfair, 20]
        assert round(validated["dsp"][1] - 0.05, 3) <= 0.010
    # "Tuning for 0.04 and deploying the validated model costs the forest 0.008 of mean test
    # accuracy and XGBoost 0.017."
    _says(_NEW_DATA, "costs the forest 0.008 of mean test accuracy and XGBoost 0.017")
    for model, cost in (("random forest", 0.008), ("XGBoost", 0.017)):
        before = cell(model, "the validated model")["accuracy"][1]
        after = cell(model, "the validated model, margin 0.01")["accuracy"][1]
        assert round(before - after, 3) == cost
    # "13 of 20 break the limit on test, up to 3.6 times it, even with the margin (10 of 20), at
    # the validated model's mean accuracy (0.7903 against 0.7906)"
    _says(_NEW_DATA, "13 of 20 break the limit on test, up to 3.6 times it, even with the margin "
                     "(10 of 20), at the validated model's mean accuracy (0.7903 against 0.7906)")
    refitted = cell("random forest", "refitted on all tuning rows")
    assert round(refitted["dsp"][1] / 0.05, 1) == 3.6
    assert (refitted["accuracy"][1], cell("random forest", "the validated model")["accuracy"][1]) \
        == (0.7903, 0.7906)
    # "5-fold cross-validation picks slightly more accurate XGBoost models at three times the
    # cost, but its refitted models break the limit on test in 7 (XGBoost) and 9 (forest)"
    _says(_NEW_DATA, "5-fold cross-validation picks slightly more accurate XGBoost models at "
                     "three times the cost", "break the limit on test in 7 (XGBoost) and 9 "
                                             "(forest) of 20 seeds")
    cv = {m: _row(rows, m, "5-fold cross-validation, refitted on all tuning rows")
          for m in ("XGBoost", "random forest")}
    for deployed in ("refitted on all tuning rows", "the validated model"):
        holdout = cell("XGBoost", deployed)
        assert all(c > h for c, h in zip(_numbers(cv["XGBoost"][5]), holdout["accuracy"],
                                         strict=True))
        assert _first(cv["XGBoost"][7]) == 3 * holdout["seconds"][0]
    assert [_numbers(cv[m][3]) for m in cv] == [[7, 20], [9, 20]]


# optuna_suite.md, scaling.md, searchcv.md

def test_optuna_suite_answer_sums_the_table() -> None:
    _says("optuna_suite.md", "1,074 tests over nine configurations, none failed or skipped")
    rows = _table("optuna_suite.md", "| sampler | passed |")
    assert len(rows) == 9 and sum(int(r[1]) for r in rows) == 1074
    assert all(r[2:] == ["0", "0", "-"] for r in rows)


def test_scaling_answer_quotes_the_tables() -> None:
    page = "scaling.md"
    # "On a million rows, a fairness-limited search spends most of its time in fairlearn's
    # ThresholdOptimizer, then in fitting XGBoost"
    _says(page, "spends most of its time in fairlearn's ThresholdOptimizer, then in fitting "
                "XGBoost")
    fit, mitigation, scoring, suggestion, wall, _ = map(
        float, _row(_table(page, "| rows |"), "1,000,000")[1:])
    assert mitigation > wall / 2 and fit > max(scoring, suggestion)
    # "FairBOSampler's suggestion costs less than GPSampler's up to 200 trials but more at 500
    # (1.7 s against 0.9 s)"
    _says(page, "costs less than GPSampler's up to 200 trials but more at 500 (1.7 s against "
                "0.9 s)")
    prose = _prose(page)
    fairbo = _numbers(re.search(r"FairBOSampler ([\d., and]+);", prose)[1])
    gp = _numbers(re.search(r"GPSampler ([\d., and]+);", prose)[1])
    assert fairbo[0] < gp[0] and fairbo[1] < gp[1] and fairbo[2] > gp[2]
    assert (round(fairbo[2], 1), round(gp[2], 1)) == (1.7, 0.9)


def test_searchcv_answer_quotes_the_table() -> None:
    page = "searchcv.md"
    rows = _table(page, "| method | seeds |")
    grid = _row(rows, "GridSearchCV + a fairness filter")
    search = _row(rows, "FairSearchCV (FairBOSampler)")
    # "finds a more accurate fair configuration than GridSearchCV followed by a fairness filter
    # in 20 of 20 seeds, and its refitted model is more accurate on new data in 15 of 20"
    _says(page, "finds a more accurate fair configuration than GridSearchCV followed by a "
                "fairness filter in 20 of 20 seeds, and its refitted model is more accurate on "
                "new data in 15 of 20", "best fair CV accuracy: 20 / 0 / 0",
          "test accuracy of the refitted best fair model: 15 / 0 / 5")
    for column in (4, 6):  # best fair CV accuracy, test accuracy: median (mean)
        assert all(s > g for s, g in zip(_numbers(search[column]), _numbers(grid[column]),
                                         strict=True))
    # "its model keeps demographic_parity<=0.05 on the test rows in 8 of 20 seeds against 13";
    # "because they sit closer to the limit on the cross-validation predictions, they exceed it
    # on the test rows more often"
    _says(page, "in 8 of 20 seeds against 13 for the grid's choice",
          "because they sit closer to the limit on the cross-validation predictions, they exceed "
          "it on the test rows more often")
    assert (_numbers(search[8]), _numbers(grid[8])) == ([8, 20], [13, 20])
    assert all(s > g for s, g in zip(_numbers(search[5]), _numbers(grid[5]), strict=True))


def test_fairbo_answer_against_optuna_5_1_quotes_its_table() -> None:
    import numpy as np
    from scipy.stats import binomtest

    from benchmarks import _common

    rows = {r[0]: r[1:] for r in _table(_FAIRBO, "| problem | @20 | @40 | @80 |")}
    assert len(rows) == 7

    def outcome(cell: str) -> str:
        """'ahead', 'behind' or 'level': bold exactly where the sign test gives p < 0.05."""
        wins, _, losses = (int(n) for n in cell.strip("*").split(" / "))
        significant = binomtest(wins, wins + losses).pvalue < 0.05
        assert cell.startswith("**") == significant, cell
        return "level" if not significant else "ahead" if wins > losses else "behind"

    table = {name: [outcome(cell) for cell in cells[:3]] for name, cells in rows.items()}
    _says(_FAIRBO, "FairBOSampler is significantly behind on none at 20, 40 or 80 trials, and "
                   "ahead at 80 on Branin's function in a disk and on a mixed space of integers, "
                   "a categorical and a float, at 0.16-0.38 of GPSampler's time per trial")
    assert all("behind" not in at for at in table.values())
    ahead_at_80 = {name for name, at in table.items() if at[2] == "ahead"}
    assert ahead_at_80 == {"Branin in a disk (2-d, 1 constraint)",
                           "int, log int, categorical and float (1 constraint)"}
    ratios = [float(a) / float(b) for a, b in (r[3].split(" / ") for r in rows.values())]
    assert round(min(ratios), 2) == 0.16 and round(max(ratios), 2) == 0.38
    # The same problems at default thread settings, as users run them.
    seconds: dict[tuple[str, str], list[float]] = {}
    for r in _common.read_rows(ROOT / "benchmarks" / "results"
                               / "fairbo_vs_gp_seconds_default.csv.gz"):
        if int(r["trial"]) > 5:
            seconds.setdefault((r["problem"], r["method"]), []).append(float(r["seconds"]))
    problems = {problem for problem, _ in seconds}
    default = [np.median(seconds[p, "FairBO-cEI"]) / np.median(seconds[p, "GPSampler"])
               for p in problems]
    assert len(problems) == 7
    _says(_FAIRBO, f"at default thread settings, {min(default):.2f}-{max(default):.2f}")


def test_fairbo_fair_job_table_is_the_benchmarks_headline() -> None:
    from benchmarks import _common, fair_job

    results = [str(ROOT / "benchmarks" / "results" / "fair_job.csv.gz")]
    alone = [str(ROOT / "benchmarks" / "results" / "fair_job_seconds.csv.gz")]
    rows = _table(_FAIRBO, "| dataset | sampler | fair accuracy @10 |")
    assert rows == [[c or "not run" for c in r] for r in fair_job.headline_rows(results, alone)]
    _says(_FAIRBO, "no paired difference is significant, with the mitigation or without it")
    runs = _common.read_rows(results)
    for dataset in ("compas", "german", "adult"):
        for k, mitigation in ((k, m) for k in ("10", "20", "50") for m in fair_job.MITIGATIONS):
            by = {(r["sampler"], r["split"]): float(r["fair_accuracy"]) for r in runs
                  if (r["dataset"], r["mitigation"], r["n_trials"]) == (dataset, mitigation, k)}
            splits = sorted({s for _, s in by})
            for other in ("gp", "tpe", "random"):
                *_, p = _common.paired([by["fairbo", s] for s in splits],
                                       [by[other, s] for s in splits])
                assert p >= 0.05, (dataset, k, mitigation, other)
    # Without the mitigation on German credit, over the held-out splits too.
    heldout = _common.read_rows(results + [str(ROOT / "benchmarks" / "results"
                                               / "fair_job_german_heldout.csv.gz")])
    by = {(r["sampler"], r["split"]): float(r["fair_accuracy"]) for r in heldout
          if (r["dataset"], r["mitigation"], r["n_trials"], r["sampler"]) in {
              ("german", "none", "50", "fairbo"), ("german", "none", "50", "gp")}}
    splits = sorted({s for _, s in by})
    wins, ties, losses, p = _common.paired([by["fairbo", s] for s in splits],
                                           [by["gp", s] for s in splits])
    _says(_FAIRBO, f"{wins} / {ties} / {losses} over {len(splits)} splits (p = {p:.2f})")
    assert p >= 0.05
