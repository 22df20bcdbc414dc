"""The one-host JAX run that two test files read (tests/training/processes.py starts it)."""

import pytest

from tests.training.processes import _program, _xla_flags


@pytest.fixture(scope="session")
def jax_host_devices(tmp_path_factory):
    """(directory, result) of one JAX process over 4 host devices (distributed_programs'
    `jax_fit_and_heads`): on 2 of them, pretraining with no distribution, data_parallel and
    model_parallel, then fine-tuning under data_parallel; then MiniLM split over 2 and over 4
    (result["heads"], outputs in directory/heads). test_distribution.py checks the shardings,
    losses and heads; test_multi_host_jax.py compares its two-process cluster with the
    data_parallel runs. One process, one corpus pass and one data_parallel pretraining serve
    all of them (they were three processes, each loading JAX, TensorFlow and Keras)."""
    directory = tmp_path_factory.mktemp("jax_host_devices")
    return directory, _program("jax_fit_and_heads", str(directory), backend="jax",
                               XLA_FLAGS=_xla_flags(4))
