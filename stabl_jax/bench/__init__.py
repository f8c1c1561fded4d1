"""The speed benchmark (``stabl-jax bench``): :mod:`stabl_jax.bench.benchmark` times
``simulate`` against the plain-NumPy simulations of :mod:`stabl_jax.bench.numpy_baselines`.
Not part of the library: nothing outside this package imports it but the command line."""
