"""JAX across hosts, run for real on this machine: two processes on 127.0.0.1 (one CPU device
each) join one cluster from the KERAS_DISTRIBUTION_* variables, as two hosts would, and run
the pretraining and then the fine-tuning runner under data_parallel; the same two runs in ONE
process over 2 local devices are the reference (the session's `jax_host_devices` run, which
test_distribution.py reads too). Then the settings' errors (no processes).

The processes need JAX whatever this pytest process runs on (tests/training/
distributed_programs.py jax_multi_host), so the real run is launched once (own_processes).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_suite.distribution import DistributionError, create_distribution
from tests.training.processes import (
    ROOT,
    _environment,
    _free_ports,
    _results_of_all,
    _xla_flags,
)

CLUSTER_VARIABLES = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                     "KERAS_DISTRIBUTION_PROCESS_ID")


def _start(output, results, process, port):
    """`jax_multi_host` as process `process` of a 2-process cluster on `port` (one CPU
    device each)."""
    environment = _environment("jax", XLA_FLAGS=_xla_flags(1))
    environment.update(KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{port}",
                       KERAS_DISTRIBUTION_NUM_PROCESSES="2",
                       KERAS_DISTRIBUTION_PROCESS_ID=str(process))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.training.distributed_programs", "jax_multi_host", output,
         results], cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def _weights(path):
    with np.load(path) as archive:
        return [archive[f"arr_{i}"] for i in range(len(archive.files))]


@pytest.mark.slow
@pytest.mark.own_processes
def test_two_jax_processes_train_in_lockstep_like_one_process_with_two_devices(
        jax_host_devices, tmp_path):
    (tmp_path / "cluster").mkdir()
    shared, other = str(tmp_path / "run"), str(tmp_path / "run-of-process-1")
    port = _free_ports(1)[0]
    chief, worker = _results_of_all([_start(shared, str(tmp_path / "cluster"), 0, port),
                                     _start(other, str(tmp_path / "cluster"), 1, port)],
                                    timeout=400)
    one_host, one_host_results = jax_host_devices
    alone, alone_weights = one_host_results["one_host"], one_host / "weights"

    # One mesh of 2 devices, one per process; process 0 is the chief.
    for result, index in ((chief, 0), (worker, 1)):
        assert (result["worker_index"], result["is_chief"]) == (index, index == 0)
        assert (result["num_workers"], result["devices"], result["local_devices"]) == (2, 2, 1)
    assert (alone["num_workers"], alone["devices"], alone["local_devices"]) == (1, 2, 2)
    for result in (chief, worker, alone):
        assert result["replicas"] == 2
        assert (result["step"], result["finetune_steps"]) == (4, 8)
    # Each process feeds its half of every global batch of 8 (Keras' split of the stream
    # every process reads alike): rows 0-3 of each batch on process 0, rows 4-7 on process 1.
    assert chief["rows_fed"] == [list(range(start, start + 4)) for start in range(0, 32, 8)]
    assert worker["rows_fed"] == [list(range(start, start + 4)) for start in range(4, 32, 8)]
    assert alone["rows_fed"] == [list(range(start, start + 8)) for start in range(0, 32, 8)]

    # Lockstep: both processes hold the very same weights and logged the same history rows.
    assert chief["history"] == worker["history"]
    assert [row["step"] for row in chief["history"]] == [2, 4]
    assert chief["history"][0]["loss"] != chief["history"][1]["loss"]  # it trained
    for name in ("pretrained", "finetuned"):
        assert chief[f"{name}_sha256"] == worker[f"{name}_sha256"], name
        ours = _weights(tmp_path / "cluster" / f"{name}-0.npz")
        for a, b in zip(ours, _weights(tmp_path / "cluster" / f"{name}-1.npz"), strict=True):
            assert np.array_equal(a, b), name
        # ... equal to one process training over 2 devices on the same global batches.
        for a, b in zip(ours, _weights(alone_weights / f"{name}-0.npz"), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7, err_msg=name)
    for row, reference in zip(chief["history"], alone["history"], strict=True):
        assert row.keys() == reference.keys()
        for key, value in row.items():
            assert value == pytest.approx(reference[key], rel=1e-5, abs=1e-7), key
    # Fine-tuning: the chief evaluated the trained model on all 40 examples; the other not.
    assert chief["finetune_metrics"]["eval_examples"] == 40
    assert worker["finetune_metrics"] is None
    assert chief["finetune_metrics"]["accuracy"] == pytest.approx(
        alone["finetune_metrics"]["accuracy"])

    # Only the chief wrote: its output directories hold everything, process 1 made none.
    written = set(os.listdir(shared))
    assert {"history.json", "logs", "preset", "pretrainer.keras", "recipe.json"} <= written
    assert "backup" not in written  # deleted once fit completed
    with open(os.path.join(shared, "history.json")) as f:
        assert json.load(f)["history"] == chief["history"]
    assert {"metrics.json", "model.keras", "predictions.jsonl", "recipe.json"} <= set(
        os.listdir(shared + "-finetune"))
    assert not os.path.exists(other) and not os.path.exists(other + "-finetune")


# === The settings' errors (checked before any process joins anything) ===

def _cluster(strategy="data_parallel", **keys):
    return {"strategy": strategy, **keys}


@pytest.mark.parametrize("backend, strategy, message", [
    ("tensorflow", "multi_worker", "is for JAX across hosts.*on tensorflow. Several "
                                   "TensorFlow workers are strategy multi_worker, with TF_CONFIG"),
    ("torch", "none", "is for JAX across hosts.*on torch. Keras 3.15 has no multi-process"),
    ("jax", "none", "needs distribution.strategy data_parallel or model_parallel, not 'none'"),
])
def test_multi_host_keys_need_jax_and_a_mesh_strategy(backend, strategy, message):
    from keras_bert_suite.recipe_runner import load_recipe

    recipe = load_recipe("pretrain_cpu_smoke", overrides=[
        f'distribution.strategy="{strategy}"', 'distribution.coordinator_address="10.0.0.1:1234"',
        "distribution.num_processes=2", "distribution.process_id=0"])
    with pytest.raises(DistributionError, match=message):
        create_distribution(recipe["distribution"], backend=backend)


@pytest.mark.parametrize("keys, message", [
    ({"coordinator_address": "10.0.0.1:1234", "num_processes": 2, "process_id": 2},
     r"distribution.process_id=2 is outside 0 \.\. 1 \(distribution.num_processes=2\)"),
    ({"coordinator_address": "10.0.0.1:1234", "num_processes": 2, "process_id": -1},
     r"distribution.process_id=-1 is outside 0 \.\. 1"),
    ({"num_processes": 2, "process_id": 0},
     "distribution.num_processes=2 but no coordinator address: set "
     "distribution.coordinator_address"),
    ({"coordinator_address": "10.0.0.1:1234", "process_id": 0},
     "set distribution.num_processes"),
    ({"coordinator_address": "10.0.0.1:1234", "num_processes": 2},
     "Each host needs its own process id"),
    ({"coordinator_address": "10.0.0.1", "num_processes": 2, "process_id": 0},
     "must be host:port of process 0"),
    ({"coordinator_address": "10.0.0.1:1234", "num_processes": "two", "process_id": 0},
     "distribution.num_processes='two' must be an integer"),
])
def test_bad_cluster_settings_say_what_to_set(monkeypatch, keys, message):
    for name in CLUSTER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DistributionError, match=message):
        create_distribution(_cluster(**keys), backend="jax")


def test_cluster_settings_default_to_keras_environment_variables(monkeypatch):
    """A recipe's null keys read the variables keras.distribution.initialize reads, and the
    error names the variable the bad value came from."""
    monkeypatch.setenv("KERAS_DISTRIBUTION_JOB_ADDRESSES", "10.0.0.1:1234,10.0.0.2:1234")
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    monkeypatch.setenv("KERAS_DISTRIBUTION_PROCESS_ID", "5")
    with pytest.raises(DistributionError, match=r"KERAS_DISTRIBUTION_PROCESS_ID=5 is outside "
                                                r"0 \.\. 1 \(KERAS_DISTRIBUTION_NUM_PROCESSES=2"):
        create_distribution(_cluster(), backend="jax")
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "3")
    with pytest.raises(DistributionError, match="lists 2 addresses but "
                                                "KERAS_DISTRIBUTION_NUM_PROCESSES=3"):
        create_distribution(_cluster(), backend="jax")
    # The recipe's key wins over the variable.
    with pytest.raises(DistributionError, match=r"distribution.process_id=7 is outside"):
        create_distribution(_cluster(process_id=7, num_processes=2), backend="jax")
