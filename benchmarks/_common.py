"""What the benchmark scripts share: paired statistics over seeds or splits, resumable result
files, stratified splits and the plots' style (not a benchmark itself)."""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root: ``python -m benchmarks.<name>`` runs from here."""
RESULTS = ROOT / "benchmarks" / "results"
"""Where the result files the benchmark pages use are kept."""


def sign_test(wins: int, losses: int, alternative: str = "two-sided") -> float:
    """The sign test's p-value of ``wins`` against ``losses`` (ties left out): the chance of a
    split at least as uneven if either side were as likely to win (``scipy.stats.binomtest``)."""
    from scipy.stats import binomtest

    return float(binomtest(wins, wins + losses, alternative=alternative).pvalue) \
        if wins + losses else 1.0


def paired(mine: Sequence[float], theirs: Sequence[float], sign: float = 1.0
           ) -> tuple[int, int, int, float]:
    """``(wins, ties, losses, p)`` of two methods measured on the same seeds or splits: a win
    when ``sign * mine`` is larger; NaN (no feasible result) counts as the worst outcome."""
    a = np.nan_to_num(sign * np.asarray(mine, float), nan=-np.inf)
    b = np.nan_to_num(sign * np.asarray(theirs, float), nan=-np.inf)
    wins, losses = int((a > b).sum()), int((a < b).sum())
    return wins, len(a) - wins - losses, losses, sign_test(wins, losses)


def _open_text(path: Path, mode: str) -> io.TextIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", newline="")  # type: ignore[return-value]
    return open(path, mode, newline="")


def read_rows(paths: Path | str | Iterable[Path | str]) -> list[dict[str, str]]:
    """The rows of one or several result files (``.csv`` or ``.csv.gz``) as dicts; a file that
    does not exist yet has none."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows: list[dict[str, str]] = []
    for path in map(Path, paths):
        if path.exists():
            with _open_text(path, "r") as f:
                rows.extend(csv.DictReader(f))
    return rows


def done_keys(path: Path | str, fields: Sequence[str]) -> set[tuple[str, ...]]:
    """The ``fields`` of every row already in ``path``: a resumed run skips these."""
    return {tuple(row[f] for f in fields) for row in read_rows(path)}


def append_rows(path: Path | str, rows: Iterable[Mapping[str, Any]],
                fields: Sequence[str] | None = None) -> None:
    """Append ``rows`` to the result file ``path`` (``.csv``, or ``.csv.gz`` as a new gzip
    member), writing the header when the file is new; a run interrupted between two calls
    loses nothing it appended."""
    rows = list(rows)
    if not rows:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with _open_text(path, "a") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields or rows[0]), extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def stratified_split(n_rows: int, strata: Any, test_size: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(train, test)`` of a split that keeps each stratum's share (a label, or a
    label and a group combined) in both parts."""
    from sklearn.model_selection import train_test_split

    return train_test_split(np.arange(n_rows), test_size=test_size, random_state=seed,
                            stratify=np.asarray(strata))


STYLE = {"figure.dpi": 110, "savefig.dpi": 120, "axes.grid": True, "grid.alpha": 0.3,
         "axes.spines.top": False, "axes.spines.right": False, "font.size": 9,
         "legend.frameon": False}
"""The benchmark figures' matplotlib style."""

COLUMN_INCHES = 7.6
"""The widest a figure for the documentation should be: its text column is 736 px, 7.67 in at
96 px per inch, so a figure this wide (912 px at 120 dpi) is drawn at its font sizes on the page;
a wider one is shrunk to the column with its text (docs/check_rendering.py measures this)."""


def figure(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """``plt.subplots`` under :data:`STYLE` (non-interactive backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(STYLE):
        return plt.subplots(*args, **kwargs)


def legend_row(axes: Any, handles: Sequence[Any], labels: Sequence[str], **kwargs: Any) -> None:
    """Draw the legend in the last row of ``axes`` (a 2-D array from :func:`figure`), which the
    caller reserved for it: that row's axes become one empty axes across the figure.

    Long method names in a panel hide its data, and beside the panels they take width that a
    figure of :data:`COLUMN_INCHES` does not have. ``kwargs`` go to ``Axes.legend`` (``ncol``).
    """
    fig = axes[0][0].figure
    grid = axes[0][0].get_gridspec()
    for ax in axes[-1]:
        ax.remove()
    holder = fig.add_subplot(grid[len(axes) - 1, :])
    holder.axis("off")
    # Created outside figure()'s style context, so its font size and frame are set here.
    kwargs.setdefault("fontsize", STYLE["font.size"])
    holder.legend(handles, labels, loc="center", frameon=False, **kwargs)


def save_figure(fig: Any, path: Path | str) -> None:
    """Write ``fig`` to ``path`` under :data:`STYLE` and close it."""
    import matplotlib.pyplot as plt

    with plt.rc_context(STYLE):
        fig.tight_layout()
        fig.savefig(path)
    plt.close(fig)
    print(f"wrote {path}")


def checkpoints(n_trials: int, wanted: tuple[int, ...]) -> list[int]:
    """The trial counts of ``wanted`` that the runs reached, else just the last trial."""
    return [k for k in wanted if k <= n_trials] or [n_trials]


def wins_ties_losses(mine: Any, theirs: Any, sign: float = 1.0) -> tuple[int, str]:
    """Seed-by-seed comparison of two methods' best feasible values (Series indexed by seed).

    A seed is a win when ``sign * mine`` is strictly larger than ``sign * theirs`` (same seed,
    same shared initial trials), a tie when equal; a seed without a feasible trial (NaN) counts
    as the worst outcome. Returns the number of common seeds and "wins / ties / losses (p = ..)"
    with the two-sided sign test over the seeds that are not ties (scipy.stats.binomtest).
    """
    seeds = mine.index.intersection(theirs.index)
    wins, ties, losses, p = paired(mine[seeds].to_numpy(float), theirs[seeds].to_numpy(float),
                                   sign)
    return len(seeds), f"{wins} / {ties} / {losses} (p = {p:.3f})"


# Speed benchmarks measure as users run (no thread variable set) and pinned, each in a fresh
# process (thread pools are sized when torch and OpenBLAS load).
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "FAIRTUNE_NUM_THREADS",
)
THREAD_LABELS = {"default": "default (no variable set)", "pinned": "OMP_NUM_THREADS=1"}


def run_in_both_thread_settings(module: str, argv: list[str]) -> None:
    """Run ``python -m module argv --threads default|pinned --no-header``: once with every
    thread variable removed from the environment, once with ``OMP_NUM_THREADS=1``."""
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    # The child finds the benchmarks package from any working directory.
    root = str(ROOT)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, (root, base.get("PYTHONPATH"))))
    for mode, extra in (("default", {}), ("pinned", {"OMP_NUM_THREADS": "1"})):
        command = [sys.executable, "-m", module, *argv, "--threads", mode, "--no-header"]
        # Relay the child's lines through this process's sys.stdout as they come, so that a
        # caller that redirects sys.stdout sees them too.
        with subprocess.Popen(command, env={**base, **extra}, stdout=subprocess.PIPE,
                              text=True) as child:
            assert child.stdout is not None
            for line in child.stdout:
                print(line, end="", flush=True)
        if child.returncode:
            raise subprocess.CalledProcessError(child.returncode, command)


def add_timer(owner: Any, name: str, totals: dict[str, float], key: str) -> Any:
    """Wrap ``owner.name`` (a method or static method of a class, or an instance's method) so
    that its calls add their seconds to ``totals[key]``; returns the attribute it replaced, to
    restore with ``setattr(owner, name, ...)``."""
    import inspect
    import time

    raw = inspect.getattr_static(owner, name)
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - start

    setattr(owner, name, staticmethod(wrapper) if isinstance(raw, staticmethod) else wrapper)
    return raw

