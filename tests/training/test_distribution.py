"""Distributed training, run for real on this machine: MirroredStrategy over 2 logical CPUs,
MultiWorkerMirroredStrategy with 2 worker processes on 127.0.0.1, JAX DataParallel and
ModelParallel on 2 host devices, the encoder's layout map splitting attention by whole heads
on 2 and 4 host devices, a SIGKILLed run that resumes, and the TPU wiring (no TPU here).

Devices must be set up before TensorFlow/JAX start, so the distributed parts run in fresh
processes (tests/training/distributed_programs.py, started by tests/training/processes.py);
these tests launch them once, from the pytest process of $KBS_OWN_PROCESSES_BACKEND (marker
own_processes), and set each child's backend themselves. The JAX run over host devices is
a session fixture (tests/training/conftest.py) that test_multi_host_jax.py reads too; the
same process splits MiniLM over 2 and 4 devices.
"""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from keras_bert_suite.distribution import (
    Distribution,
    DistributionError,
    create_distribution,
    start_distribution,
    tf_strategies,
)
from tests.training.processes import (
    ROOT,
    _environment,
    _free_ports,
    _results_of_all,
)


# === Choosing a distribution: errors and the TPU wiring (no devices needed) ===

@pytest.mark.parametrize("strategy, backend, message", [
    ("mirrored", "torch", "Keras 3.15 has no multi-device training for PyTorch"),
    ("data_parallel", "tensorflow", "On TensorFlow use mirrored, multi_worker or tpu"),
    ("tpu", "jax", "On JAX use data_parallel or model_parallel"),
    ("horovod", "tensorflow", "is not one of"),
])
def test_strategy_backend_mismatches_say_what_to_use(strategy, backend, message):
    with pytest.raises(DistributionError, match=message):
        create_distribution({"strategy": strategy}, backend=backend)


def test_global_and_per_replica_batch_sizes():
    eight = Distribution("mirrored", num_replicas=8)
    assert eight.global_batch_size(256) == 256
    assert eight.global_batch_size(256, per_replica_batch_size=16) == 128
    with pytest.raises(DistributionError, match="does not split evenly over 8 replicas"):
        eight.global_batch_size(100)


@pytest.mark.needs_tf_graph
def test_whole_batches_under_keras_distribution():
    """keras.distribution splits every batch over the devices: fixed-length batches join a
    pass's short last batch to the next pass's rows; length-bucketed ones leave it out."""
    import tensorflow as tf

    from keras_bert_suite.text.length_buckets import bucketed_batches

    lengths = [3, 5, 2, 7, 4, 6, 1, 8, 3, 5]  # 10 rows of real tokens, padded to 8
    rows = tf.data.Dataset.from_tensor_slices(
        {"token_ids": [[i + 1] * n + [0] * (8 - n) for i, n in enumerate(lengths)],
         "padding_mask": [[1] * n + [0] * (8 - n) for n in lengths]})
    jax_like = Distribution("data_parallel", num_replicas=2, keras_distribution=object())
    for boundaries in (None, (4, 8)):
        batches = bucketed_batches(rows, 4, boundaries).repeat()
        assert Distribution().whole_batches(batches, 4) is batches  # unchanged elsewhere
        whole = jax_like.whole_batches(batches, 4)
        assert whole.element_spec["token_ids"].shape[0] == 4  # Keras reads it statically
        whole = list(whole.take(5).as_numpy_iterator())
        assert all(len(batch["token_ids"]) == 4 for batch in whole)
        firsts = [[int(row[0]) for row in batch["token_ids"]] for batch in whole]
        if boundaries is None:  # rows 9, 10 then the next pass's 1, 2
            assert firsts == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 1, 2], [3, 4, 5, 6],
                              [7, 8, 9, 10]]
        else:  # each pass's 2-row batch is left out; lengths stay on the boundaries
            assert firsts == [[1, 2, 3, 4], [5, 6, 7, 8]] * 2 + [[1, 2, 3, 4]]
            assert [batch["token_ids"].shape[1] for batch in whole] == [8, 8, 8, 8, 8]


@pytest.mark.needs_tf_distribute
def test_multi_worker_without_tf_config_explains_it(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(DistributionError, match="TF_CONFIG environment variable, which is not"):
        create_distribution({"strategy": "multi_worker"}, backend="tensorflow")


class _FakeTPU:
    """Stands in for the TPU runtime calls; records what the wiring passes them."""

    def __init__(self, monkeypatch, fail=False):
        import tensorflow as tf

        self.calls = []
        fake = self

        class Resolver:
            def __init__(self, tpu):
                if fail:
                    raise ValueError("Please provide a TPU Name to connect to.")
                fake.calls.append(("resolver", tpu))

        class Strategy:
            num_replicas_in_sync = 8

            def __init__(self, resolver):
                fake.calls.append(("strategy", type(resolver).__name__))

        monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
        monkeypatch.setattr(tf.config, "experimental_connect_to_cluster",
                            lambda resolver: fake.calls.append(("connect",)))
        monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system",
                            lambda resolver: fake.calls.append(("initialize",)))
        monkeypatch.setattr(tf.distribute, "TPUStrategy", Strategy)


@pytest.mark.needs_tf_distribute
def test_tpu_wiring_resolver_flags_and_bf16(monkeypatch):
    from keras_bert_suite.recipe_runner import load_recipe

    fake = _FakeTPU(monkeypatch)
    recipe = load_recipe("pretrain_bert_base_phase1_tpu", overrides=[
        'distribution.tpu="grpc://10.0.0.2:8470"', 'training.precision="auto"'])
    distribution, batch_size, precision = start_distribution(recipe, log=lambda *_: None)
    assert fake.calls == [("resolver", "grpc://10.0.0.2:8470"), ("connect",), ("initialize",),
                          ("strategy", "Resolver")]
    assert (distribution.num_replicas, distribution.steps_per_execution) == (8, 100)
    assert precision == "mixed_bfloat16"
    assert batch_size == recipe["training"]["batch_size"]

    fake.calls.clear()  # a TPU VM: local chips, nothing to connect to
    monkeypatch.setattr(tf_strategies, "local_tpu_devices", lambda: ["/dev/accel0"])
    create_distribution({"strategy": "tpu", "tpu": "local", "steps_per_execution": 50})
    assert fake.calls == [("resolver", ""), ("initialize",), ("strategy", "Resolver")]


@pytest.mark.needs_tf_distribute
def test_local_tpu_on_a_machine_without_one():
    assert not tf_strategies.local_tpu_devices()  # this CPU machine
    with pytest.raises(DistributionError, match="this machine has no TPU chips"):
        create_distribution({"strategy": "tpu", "tpu": "local"}, backend="tensorflow")


@pytest.mark.needs_tf_distribute
def test_an_unreachable_tpu_is_one_clear_error(monkeypatch):
    _FakeTPU(monkeypatch, fail=True)
    with pytest.raises(DistributionError, match="Could not reach the TPU 'my-tpu': Please "
                                                "provide a TPU Name.*distribution.tpu=local"):
        create_distribution({"strategy": "tpu", "tpu": "my-tpu"})


def _layout_map(model_parallel_size=2):
    """BertEncoder's layout map on a (1, model_parallel_size) mesh; the devices are names
    only (a LayoutMap never touches them), so this runs on every backend."""
    import keras

    from keras_bert_suite import BertEncoder

    mesh = keras.distribution.DeviceMesh(
        (1, model_parallel_size), ("batch", "model"),
        [f"cpu:{index}" for index in range(model_parallel_size)])
    return BertEncoder.get_layout_map(mesh)


def _axes(layout_map, path):
    """The axes the layout map gives `path` (None: replicated); a LayoutMap raises when two
    of its rules match one path."""
    layout = layout_map[path]
    return None if layout is None else tuple(layout.axes)


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="keras.distribution is absent on PyTorch (Keras 3.15)")
def test_layout_rules_cover_every_encoder_variable_that_is_split():
    from keras_bert_suite import BertEncoder

    encoder = BertEncoder(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8,
                          intermediate_dim=16, max_sequence_length=16)
    layout_map = _layout_map()
    split = {v.path: _axes(layout_map, v.path) for v in encoder.weights
             if _axes(layout_map, v.path) is not None}
    heads, rows, columns = (None, None, "model", None), ("model", None), (None, "model")
    expected = {"embeddings/token_embedding/embeddings": columns,
                "embeddings/position_embedding": columns}
    for i in range(2):
        block = f"transformer_layer_{i}"
        expected.update({
            f"{block}/attention/qkv/kernel": heads,  # [H, 3, N, Dh]: split on N
            f"{block}/attention/qkv/bias": heads[1:],  # [3, N, Dh]
            f"{block}/attention/output/kernel": rows,  # [N * Dh, H]: the same heads' rows
            f"{block}/intermediate/kernel": columns,
            f"{block}/intermediate/bias": ("model",),
            f"{block}/output/kernel": rows,
        })
    assert split == expected
    shapes = {v.path: tuple(v.shape) for v in encoder.weights}
    assert all(len(axes) == len(shapes[path]) for path, axes in split.items())  # rank fits
    # The same rules find the encoder inside an outer model; heads and the rest stay whole.
    assert _axes(layout_map, "pretrainer/transformer_layer_11/attention/qkv/kernel") == heads
    for path in ("pooler/kernel", "transformer_layer_3/output/bias",
                 "transformer_layer_3/attention/output/bias", "masked_lm_head/transform/kernel",
                 "embeddings/segment_embedding/embeddings"):
        assert _axes(layout_map, path) is None, path


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="keras.distribution is absent on PyTorch (Keras 3.15)")
def test_layout_map_wants_a_model_axis():
    import keras

    from keras_bert_suite import BertEncoder

    mesh = keras.distribution.DeviceMesh((2,), ("batch",), ["cpu:0", "cpu:1"])
    with pytest.raises(ValueError, match="without 'model' to split the weights over"):
        BertEncoder.get_layout_map(mesh)


# === Real multi-device runs ===

@pytest.mark.slow
@pytest.mark.own_processes
def test_mirrored_two_cpus_step_equals_one_device_and_the_runner_trains(mirrored_then_killed):
    mirrored = mirrored_then_killed / "mirrored"
    with open(mirrored / "result.json") as f:
        result = json.load(f)
    assert result["replicas"] == 2 and result["devices"][1].endswith("CPU:1")
    assert result["moved"] > 1e-4  # the step changed the weights
    # Same global batch, one device vs 2 replicas, global-norm clipping active: equal.
    assert result["ours_difference"] <= 1  # in units of assert_close's rtol/atol
    # Keras' own AdamW clips each replica's half-gradient separately: not equal.
    assert result["stock_difference"] > 10
    assert (result["pretraining_step"], result["pretraining_replicas"]) == (4, 2)
    assert os.path.exists(mirrored / "run" / "pretrainer.keras")
    # Fine-tuning on the same replicas: 2 updates, then every evaluation example scored.
    assert (result["finetune_steps"], result["finetune_eval_examples"]) == (2, 40)


def _write_id_files(directory, count=4, per_file=10):
    import tensorflow as tf

    os.makedirs(directory)
    for index in range(count):
        with tf.io.TFRecordWriter(f"{directory}/ids-{index}.tfrecord") as writer:
            for value in range(index * per_file, (index + 1) * per_file):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))}))
                writer.write(example.SerializeToString())


@pytest.mark.slow
@pytest.mark.own_processes
def test_multi_worker_two_processes_train_in_lockstep_and_split_the_data(tmp_path):
    _write_id_files(str(tmp_path / "ids"))
    output = str(tmp_path / "run")
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    workers = [subprocess.Popen(
        [sys.executable, "-m", "tests.training.distributed_programs", "multi_worker", output,
         str(tmp_path / "ids")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=_environment("tensorflow", TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})))
        for index in range(2)]
    chief, other = _results_of_all(workers, timeout=600)
    assert (chief["is_chief"], other["is_chief"]) == (True, False)
    assert chief["num_workers"] == other["num_workers"] == 2
    assert chief["step"] == other["step"] == 4  # both finished the run
    assert chief["weights_checksum"] == pytest.approx(other["weights_checksum"], rel=1e-6)
    # Only the chief wrote: history, model, preset, the corpus's instances; the backup is gone
    # once fit completed.
    assert sorted(os.listdir(output)) == ["history.json", "logs", "preset", "pretrainer.keras",
                                          "pretraining_data", "recipe.json"]
    for key, total in (("ids_by_element", 40), ("ids_by_file", 40)):
        mine, theirs = chief[key], other[key]
        assert not set(mine) & set(theirs), key  # no example read by both workers
        assert sorted(mine + theirs) == list(range(total)), key  # none skipped or repeated


@pytest.mark.slow
@pytest.mark.own_processes
def test_jax_data_and_model_parallel_fit_with_the_layout_map(jax_host_devices):
    _, result = jax_host_devices
    assert result["backend"] == "jax"
    for strategy in ("none", "data_parallel", "model_parallel"):
        assert result[strategy]["step"] == 4
    # The same 4 steps on 1 device, 2 data-parallel replicas and 2 model shards.
    for strategy in ("data_parallel", "model_parallel"):
        assert result[strategy]["loss"] == pytest.approx(result["none"]["loss"], rel=1e-5,
                                                         abs=1e-6)
        assert result[strategy]["devices"] == 2
    assert all(axes == ["None"] * len(axes)
               for axes in result["data_parallel"]["shardings"].values())  # replicated
    layout_map = _layout_map()
    sharded = 0
    for path, axes in result["model_parallel"]["shardings"].items():
        expected = _axes(layout_map, path)
        assert axes == ([str(a) for a in expected] if expected else ["None"] * len(axes)), path
        sharded += expected is not None
    assert sharded == 2 + 6  # embeddings + the layer's 6 kernels/biases (SMALL_PRETRAINING: 1)


@pytest.mark.slow
@pytest.mark.own_processes
@pytest.mark.parametrize("num_devices", [2, 4])
def test_model_parallel_devices_hold_whole_heads_and_compute_the_same_outputs(
        jax_host_devices, num_devices):
    """MiniLM (12 heads) under model_parallel on 2 and 4 host devices: every device's shard of
    each layer's qkv kernel and bias is whole heads of query, key and value, the same heads
    as its rows of the attention output kernel; the outputs equal the unsplit encoder's."""
    directory, results = jax_host_devices
    result = results["heads"][str(num_devices)]
    assert result["devices"] == num_devices
    heads_per_device = 12 // num_devices
    for layer, devices in result["heads"].items():
        assert len(devices) == num_devices, layer
        held = []
        for device, parts in devices.items():
            # Each slice of the shard is one whole checkpoint head (None: it matched none).
            heads = parts["query"]
            assert len(heads) == heads_per_device and None not in heads, (layer, device)
            assert parts["key"] == parts["value"] == parts["bias"] == heads, (layer, device)
            assert parts["output_rows"] == heads, (layer, device)
            held += heads
        assert sorted(held) == list(range(12)), layer  # each head on exactly one device
    with np.load(directory / "heads" / f"outputs-{num_devices}.npz") as outputs:
        for name in ("sequence_output", "pooled_output", "gathered_output"):
            np.testing.assert_allclose(outputs[f"split/{name}"], outputs[f"whole/{name}"],
                                       rtol=1e-5, atol=1e-5, err_msg=name)


# === Fault tolerance: SIGKILL mid-run, then resume ===

KILL_RUN = [
    "--set", 'model.encoder_overrides={"num_layers": 1, "hidden_dim": 16, "num_heads": 2, '
             '"intermediate_dim": 32, "max_sequence_length": 32, "dropout": 0.0}',
    "--set", "data.max_files=4", "--set", "data.eval_fraction=0",
    "--set", "data.sequence_length=32", "--set", "data.max_predictions_per_seq=5",
    "--set", "data.dupe_factor=1", "--set", "training.batch_size=4",
    "--set", "training.num_train_steps=20", "--set", "training.checkpoint_every_n_steps=5",
    "--set", "training.optimizer.num_warmup_steps=0", "--set", "training.log_every_n_steps=5",
]


def _final_weights(output):
    from keras_bert_suite import load_model

    return load_model(os.path.join(output, "pretrainer.keras")).get_weights()


# ELECTRA's recipe: the run, data, optimizer and backups are every objective's, and ELECTRA
# adds what resuming could most easily get wrong, the generator's sampling seed state (the
# replaced tokens, so the discriminator's every label, must be drawn as in an unbroken run).
KILLED_RECIPE = "pretrain_cpu_electra"


@pytest.fixture(scope="module")
def mirrored_then_killed(tmp_path_factory):
    """One TensorFlow process (distributed_programs' mirrored_step_then_pretrain_until_paused)
    runs the mirrored step and runners into mirrored/, then the run that is SIGKILLed into
    killed/: the killed run needs a process of its own anyway, so the two share one start."""
    directory = tmp_path_factory.mktemp("mirrored_then_killed")
    ready = directory / "paused-after-step-10"
    # The run blocks right after its step-10 backup and says so: the kill lands mid-run, at
    # a known step, whatever the machine's speed (no polling against a running clock).
    overrides = [arg for arg in KILL_RUN if arg != "--set"]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.training.distributed_programs",
         "mirrored_step_then_pretrain_until_paused", str(directory / "mirrored"),
         KILLED_RECIPE, str(directory / "killed"), str(ready), "2", *overrides], cwd=ROOT,
        env=_environment("tensorflow"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    deadline = time.time() + 600
    while not ready.exists():
        assert process.poll() is None, f"the run ended before pausing: {process.stderr.read()}"
        assert time.time() < deadline, "the run did not reach its step-10 backup in 10 min"
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()
    return directory


@pytest.mark.slow
@pytest.mark.own_processes
def test_sigkilled_run_resumes_to_the_same_step_and_weights(mirrored_then_killed):
    killed = str(mirrored_then_killed / "killed")
    with open(os.path.join(killed, "history.json")) as f:
        steps_before = [row["step"] for row in json.load(f)["history"]]
    assert steps_before == [5, 10]  # killed right after the step-10 backup

    # `kbs pretrain` into the killed run's directory, then (same process) into a new one.
    uninterrupted = killed + "-uninterrupted"
    runs = subprocess.run(
        [sys.executable, "-m", "tests.training.distributed_programs", "resume_then_reference",
         "pretrain", KILLED_RECIPE, "--output", killed, *KILL_RUN], cwd=ROOT,
        env=_environment("tensorflow"), capture_output=True, text=True, timeout=600)
    assert runs.returncode == 0, runs.stderr[-3000:]
    assert f"Resuming from the backup in {killed} at step 10." in runs.stdout
    assert runs.stdout.count("Resuming from the backup") == 1  # the second run is a new one
    with open(os.path.join(killed, "history.json")) as f:
        steps = [row["step"] for row in json.load(f)["history"]]
    assert steps == list(range(5, 21, 5))  # every interval once: none repeated or skipped
    with open(os.path.join(uninterrupted, "history.json")) as f:
        assert [row["step"] for row in json.load(f)["history"]] == steps
    # Same data in the same order and the same optimizer state => the same weights.
    for a, b in zip(_final_weights(killed), _final_weights(uninterrupted), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
