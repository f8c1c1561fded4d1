"""Files: the TOML config reader (:mod:`~stabl_jax.io.configs`), the atomic results folder
(:mod:`~stabl_jax.io.results`), chunk checkpoints (:mod:`~stabl_jax.io.checkpoints`), plots
(:mod:`~stabl_jax.io.plots`) and tables (:mod:`~stabl_jax.io.tables`). Nothing here knows an
experiment kind (:mod:`stabl_jax.kinds`)."""
