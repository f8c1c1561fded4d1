"""The speed benchmark (``stabl-jax bench``): simulate against NumPy, ratios in one process.

    python experiments/benchmark.py [--quick] [--out DIR] [--learners ...] [--arms ...]
                                    [--runs ...] [--repeats K] [--no-numpy]

See :mod:`stabl_jax.experiment.bench` for what is timed and how; docs/speed.md and
EXPERIMENTS.md quote its table with the machine it came from.
"""

from __future__ import annotations

import sys

from stabl_jax.experiment.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
