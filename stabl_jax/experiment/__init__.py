"""The experiment tooling: configs, kinds, results folders, checkpoints, plots, the command line.

Example:
  >>> from stabl_jax.experiment import load_results
  >>> callable(load_results)
  True
"""

from stabl_jax.experiment.kinds import register_kind
from stabl_jax.experiment.tables import Results, load_results, read_summary, read_traces

__all__ = ["Results", "load_results", "read_summary", "read_traces", "register_kind"]
