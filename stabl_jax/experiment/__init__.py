"""The experiment tooling over the library: configs, experiment kinds, results folders,
checkpoints, plots, tables, the benchmark and the ``stabl-jax`` command line.

It imports the library and is never imported by it: ``import stabl_jax`` loads none of this
package (``docs/design.md``, "Layers").

Example:
  >>> from stabl_jax.experiment import load_results
  >>> callable(load_results)
  True
"""

from stabl_jax.experiment.kinds import register_kind
from stabl_jax.experiment.results import read_summary, read_traces
from stabl_jax.experiment.tables import Results, load_results

__all__ = ["Results", "load_results", "read_summary", "read_traces", "register_kind"]
