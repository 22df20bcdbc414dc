"""The one-host JAX run that two test files read (tests/training/processes.py starts it)."""

import pytest

from tests.training.processes import _program, _xla_flags


@pytest.fixture(scope="session")
def jax_two_devices(tmp_path_factory):
    """(directory, result) of one JAX process over 2 host devices (distributed_programs'
    `jax_fit`): pretraining with no distribution, data_parallel and model_parallel, then
    fine-tuning under data_parallel. test_distribution.py checks the shardings and losses;
    test_multi_host_jax.py compares its two-process cluster with the data_parallel runs.
    One process, one corpus pass and one data_parallel pretraining serve both (they were
    two processes with 40 s of CPU each)."""
    directory = tmp_path_factory.mktemp("jax_two_devices")
    return directory, _program("jax_fit", str(directory), backend="jax",
                               XLA_FLAGS=_xla_flags(2))
