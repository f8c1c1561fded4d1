"""``python -m stabl_jax``: the ``stabl-jax`` command line."""

from stabl_jax.experiment.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
