"""A step-size sweep in one program, with paired draws: StABL's two scales on a grid.

Every grid point runs ``runs_per_point`` runs;
``simulate(..., options=SimOptions(runs_per_point=...))`` gives each point the same
environment draws and random numbers, so the difference between two
points is measured run by run. The printed interval of a paired difference is narrower than
the unpaired one, ``sqrt(h_a^2 + h_b^2)`` from the two points' own half-widths, wherever the
points' results are correlated (neighbouring scales are). Run it with
``python examples/paired_sweep.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import ExpertAdvice, SimOptions, StABL, simulate
from stabl_jax.experiment.arguments import Parser, count, interval_runs
from stabl_jax.metrics import mean_ci


def sweep(
    scales: Sequence[float], runs_per_point: int, horizon: int, num_arms: int = 10
) -> tuple[list[tuple[float, float]], np.ndarray]:
    """Mean reward ``1 - l_t(x_t)`` per run at every (expert, meta) scale pair.

    Returns:
      The grid points ``[(expert_lr_scale, meta_lr_scale), ...]`` (``P`` of them) and the
      ``(P, runs_per_point)`` per-run mean rewards; run ``r`` of every point saw the same
      environment draws.
    """
    env = ExpertAdvice(num_arms=num_arms, horizon=horizon, change_points=(horizon // 2,))
    learner = StABL(num_arms=num_arms, horizon=horizon)
    points = list(itertools.product(scales, scales))
    grid = np.repeat(np.asarray(points, np.float32), runs_per_point, axis=0)  # (P * runs, 2)
    params = learner.default_params.replace(
        expert_lr_scale=jnp.asarray(grid[:, 0]), meta_lr_scale=jnp.asarray(grid[:, 1])
    )
    result = simulate(
        learner,
        env,
        jax.random.key(0),
        len(grid),
        params=params,
        traces=("loss",),
        options=SimOptions(runs_per_point=runs_per_point),
    )
    reward = 1.0 - result.loss.astype(np.float64).mean(axis=1)
    return points, reward.reshape(len(points), runs_per_point)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=interval_runs, default=64, help="runs per grid point")
    parser.add_argument("--horizon", type=count, default=1024)
    args = parser.parse_args(argv)
    try:  # the library's checks of the sizes (e.g. a horizon too short for StABL) as one line
        points, reward = sweep((1.0, 4.0, 16.0), args.runs, args.horizon)
    except ValueError as error:
        parser.error(str(error))
    best = int(reward.mean(axis=1).argmax())
    _, best_half = mean_ci(reward[best])
    print(f"{'expert x':>9} {'meta x':>7} {'mean reward':>16} {'diff to best':>16} unpaired ±")
    for p, (expert, meta) in enumerate(points):
        mean, half = mean_ci(reward[p])
        diff, diff_half = mean_ci(reward[p] - reward[best])
        unpaired = np.hypot(half, best_half)
        print(f"{expert:9g} {meta:7g} {mean:9.4f} ± {half:.4f}", end="")
        print(f" {diff:+9.4f} ± {diff_half:.4f} {unpaired:10.4f}")
    mean, _ = mean_ci(reward[best])
    print(f"best: expert x{points[best][0]:g}, meta x{points[best][1]:g}")
    return {"best_expert": points[best][0], "best_meta": points[best][1], "best": float(mean)}


if __name__ == "__main__":
    main()
