"""Fused kernels: a chunk of rounds of a learner for a block of runs in one ``pallas_call``
(:mod:`stabl_jax.kernels.bandit`), what ``SimOptions(kernel="pallas")`` runs."""

from stabl_jax.kernels.bandit import (
    KERNELS,
    auto_kernel,
    check_supported,
    chunk_step,
    input_bytes_per_round,
    interpreted,
)

__all__ = [
    "KERNELS",
    "auto_kernel",
    "check_supported",
    "chunk_step",
    "input_bytes_per_round",
    "interpreted",
]
