"""Programs the distribution tests run in fresh processes (devices must be set up before
TensorFlow or JAX start, which the pytest process has long done):

    python -m tests.training.distributed_programs mirrored_step_then_pretrain_until_paused \
        OUT RECIPE KILLED_OUT READY_FILE INTERVALS OVERRIDES...
    XLA_FLAGS=--xla_force_host_platform_device_count=4 KERAS_BACKEND=jax \
        python -m tests.training.distributed_programs jax_fit_and_heads OUT
    KERAS_DISTRIBUTION_JOB_ADDRESSES=127.0.0.1:PORT KERAS_DISTRIBUTION_NUM_PROCESSES=2 \
        KERAS_DISTRIBUTION_PROCESS_ID=0 (and 1) KERAS_BACKEND=jax \
        python -m tests.training.distributed_programs jax_multi_host OUT RESULTS

Each prints one JSON line (prefixed RESULT) that the test reads.
"""

import json
import sys

import numpy as np

GLOBAL_BATCH = 8
SEQUENCE_LENGTH = 32
# A small pretraining run on real text (6 State of the Union addresses), 4 steps. One layer,
# 32 wide: what these runs compare (replicas, workers, shards, hosts against one device) does
# not depend on the model's size, and the programs spend their time tracing and compiling it.
SMALL_PRETRAINING = [
    'model.encoder_overrides={"num_layers": 1, "hidden_dim": 32, "num_heads": 2, '
    '"intermediate_dim": 64, "max_sequence_length": 32, "dropout": 0.0}',
    "data.max_files=6", "data.eval_fraction=0", "data.sequence_length=32",
    "data.max_predictions_per_seq=5", "data.dupe_factor=1", "training.batch_size=8",
    "training.num_train_steps=4", "training.checkpoint_every_n_steps=2",
    "training.optimizer.num_warmup_steps=0"]
# BERT-tiny cut to one layer for the classifier runs (fine-tuning, one-step comparisons).
ONE_LAYER = {"num_layers": 1}


def _real_batch():
    """8 Rotten Tomatoes sentences with their labels, as MiniLM encoder inputs."""
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
    from keras_bert_suite.text import BertPreprocessor

    import numpy as np

    texts, labels = load_rotten_tomatoes()
    preprocessor = BertPreprocessor.from_preset("minilm_l6_h384_uncased",
                                                sequence_length=SEQUENCE_LENGTH)
    inputs = preprocessor(texts[:GLOBAL_BATCH])
    return {k: np.asarray(v) for k, v in inputs.items()}, labels[:GLOBAL_BATCH]


def _one_step(distribution, weights, x, y, optimizer):
    """One `fit` step of a one-layer BERT-tiny classifier (128 wide, MiniLM's vocabulary) from
    `weights` under `distribution` (the first call's random weights are the start of all).
    How replicas combine gradients does not depend on the model's size, and a small one
    traces in a fraction of MiniLM's time."""
    import numpy as np

    from keras_bert_suite import BertClassifier

    with distribution.scope():
        model = BertClassifier.from_preset("bert_uncased_L-2_H-128_A-2", load_weights=False,
                                           num_classes=2, preprocessor=None, dropout=0.0,
                                           encoder_overrides={**ONE_LAYER, "dropout": 0.0})
        if weights is not None:
            model.set_weights(weights)
        model.compile(optimizer=optimizer(), jit_compile=False)
    start = [np.array(w) for w in model.get_weights()]
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((x, np.array(y))).batch(GLOBAL_BATCH)
    model.fit(dataset, epochs=1, verbose=0, shuffle=False)
    return start, model.get_weights()


def mirrored_step(output):
    """One step on 2 mirrored logical CPUs vs the same global batch on one device, with
    global-norm clipping active (clipnorm far below the gradient's norm); then the pretraining
    and fine-tuning runners on the same replicas, into `output` and output-finetune."""
    import keras
    import numpy as np

    from keras_bert_suite.training import create_optimizer
    from keras_bert_suite.distribution import Distribution, create_distribution

    mirrored = create_distribution({"strategy": "mirrored", "num_devices": 2})
    x, y = _real_batch()

    def ours():
        return create_optimizer("adamw", learning_rate=1e-3, global_clipnorm=0.1)

    def stock():
        return keras.optimizers.AdamW(learning_rate=1e-3, global_clipnorm=0.1, epsilon=1e-6)

    keras.utils.set_random_seed(0)
    start, one_device = _one_step(Distribution(), None, x, y, ours)
    _, two_replicas = _one_step(mirrored, start, x, y, ours)
    _, stock_one = _one_step(Distribution(), start, x, y, stock)
    _, stock_two = _one_step(mirrored, start, x, y, stock)

    def max_difference(a, b):
        return float(max(np.max(np.abs(np.asarray(u) - np.asarray(v))) for u, v in zip(a, b)))

    def tolerance_units(a, b):
        """Largest |a - b| / (ATOL + RTOL |b|) over every weight: <= 1 is assert_close's close."""
        from tests.numerics import ATOL, RTOL

        return float(max(np.max(np.abs(np.asarray(u) - np.asarray(v))
                                / (ATOL + RTOL * np.abs(np.asarray(v)))) for u, v in zip(a, b)))

    # The pretraining runner on the same two replicas.
    from keras_bert_suite.recipe_runner import load_recipe
    from keras_bert_suite.recipe_runner.pretraining import run_pretraining

    recipe = load_recipe("pretrain_cpu_smoke", overrides=[
        'distribution.strategy="mirrored"',
        "distribution.num_devices=2", *SMALL_PRETRAINING])
    summary = run_pretraining(recipe, output, verbose=0, log=lambda *_: None)
    # ... and the fine-tuning runner: a tiny sentiment run, evaluated under the strategy.
    from keras_bert_suite.recipe_runner.finetuning import run_finetuning

    finetuned = run_finetuning(load_recipe("sentiment_rotten_tomatoes_cpu", overrides=[
        "model.preset=bert_uncased_L-2_H-128_A-2", "model.load_weights=false",
        f"model.encoder_overrides={json.dumps(ONE_LAYER)}",
        'distribution.strategy="mirrored"', "distribution.num_devices=2",
        "training.num_train_steps=2", "training.per_replica_batch_size=4",
        "evaluation.batch_size=16", "data.max_train_examples=64", "data.max_eval_examples=40"]),
        output + "-finetune", verbose=0, log=lambda *_: None)
    return {
        "finetune_eval_examples": finetuned["metrics"]["eval_examples"],
        "finetune_steps": int(np.asarray(finetuned["model"].optimizer.iterations)),
        "pretraining_step": summary["step"],
        "pretraining_replicas": summary["distribution"].num_replicas,
        "replicas": mirrored.num_replicas,
        "devices": list(mirrored.tf_strategy.extended.worker_devices),
        "moved": max_difference(start, one_device),
        "ours_difference": tolerance_units(one_device, two_replicas),
        "stock_difference": tolerance_units(stock_one, stock_two),
    }


def multi_worker():
    """One worker of a 2-worker MultiWorkerMirroredStrategy cluster (TF_CONFIG from the
    test): the pretraining runner into argv[2], then which examples this worker reads of a
    40-element dataset (by element) and of 4 TFRecord files in argv[3] (by file)."""
    import glob

    import numpy as np
    import tensorflow as tf

    from keras_bert_suite.recipe_runner import load_recipe
    from keras_bert_suite.recipe_runner.pretraining import run_pretraining

    recipe = load_recipe("pretrain_cpu_smoke", overrides=[
        'distribution.strategy="multi_worker"', *SMALL_PRETRAINING])
    summary = run_pretraining(recipe, sys.argv[2], verbose=0, log=lambda *_: None)
    distribution = summary["distribution"]
    strategy = distribution.tf_strategy

    def ids_read(dataset, num_files):
        dataset = distribution.shard_input(dataset, num_files).batch(8)  # global batch 8
        ids = []
        for batch in strategy.experimental_distribute_dataset(dataset):
            for local in strategy.experimental_local_results(batch):
                ids += np.asarray(local).tolist()
        return ids

    files = sorted(glob.glob(f"{sys.argv[3]}/*.tfrecord"))
    by_file = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=1).map(
        lambda record: tf.io.parse_single_example(
            record, {"id": tf.io.FixedLenFeature([], tf.int64)})["id"])
    weights = summary["model"].get_weights()
    return {
        "worker_index": distribution.worker_index,
        "is_chief": distribution.is_chief,
        "num_workers": distribution.num_workers,
        "step": summary["step"],
        "weights_checksum": float(sum(np.abs(w).sum() for w in weights)),
        "ids_by_element": ids_read(tf.data.Dataset.range(40).shuffle(40, seed=7), 0),
        "ids_by_file": ids_read(by_file, len(files)),
    }


def jax_fit():
    """DataParallel and ModelParallel `fit` of a small BertPretrainer on 2 host devices;
    returns each variable's sharding (the test compares it with BertEncoder's layout map).
    The data_parallel run is also the multi-host test's reference, one process over 2 devices:
    its fine-tuning run and what `_data_parallel_results` reports follow ("one_host"; weights
    in argv[2]/weights)."""
    import os
    import shutil

    import keras

    from keras_bert_suite.recipe_runner import load_recipe
    from keras_bert_suite.recipe_runner.pretraining import run_pretraining

    results, summaries = {}, {}
    for strategy in ("none", "data_parallel", "model_parallel"):
        recipe = load_recipe("pretrain_cpu_smoke", overrides=[
            f"distribution.strategy={json.dumps(strategy)}", "distribution.num_devices=2",
            *SMALL_PRETRAINING])
        if strategy != "none":  # the first run's instances: a cache hit, not another Beam run
            shutil.copytree(f"{sys.argv[2]}/none/pretraining_data",
                            f"{sys.argv[2]}/{strategy}/pretraining_data")
        summary = summaries[strategy] = run_pretraining(
            recipe, f"{sys.argv[2]}/{strategy}", verbose=0, log=lambda *_: None)
        pretrainer = summary["model"]
        results[strategy] = {"step": summary["step"], "loss": summary["history"][-1]["loss"]}
        if strategy != "none":
            results[strategy]["shardings"] = {
                v.path: [str(axis) for axis in v.value.sharding.spec] for v in pretrainer.weights}
            results[strategy]["devices"] = len(pretrainer.weights[0].value.sharding.device_set)
    results["backend"] = keras.backend.backend()
    os.makedirs(f"{sys.argv[2]}/weights")
    results["one_host"] = _data_parallel_results(
        summaries["data_parallel"], f"{sys.argv[2]}/data_parallel", f"{sys.argv[2]}/weights",
        "distribution.num_devices=2")
    return results


def jax_fit_and_heads():
    """`jax_fit` into argv[2], then `jax_heads` into argv[2]/heads for 2 and 4 devices: one
    process with 4 host devices (XLA_FLAGS from the test) serves both, since every run names
    the devices it uses; a second process would load JAX, TensorFlow and Keras again."""
    import os

    results = jax_fit()
    os.makedirs(f"{sys.argv[2]}/heads")
    results["heads"] = jax_heads(f"{sys.argv[2]}/heads", "2,4")
    return results


def jax_multi_host():
    """One process of a JAX cluster (the test sets the KERAS_DISTRIBUTION_* variables: 2
    processes of one CPU device each): the pretraining runner under data_parallel into
    argv[2], then what `_data_parallel_results` reports (weights in argv[3])."""
    from keras_bert_suite.recipe_runner import load_recipe
    from keras_bert_suite.recipe_runner.pretraining import run_pretraining

    recipe = load_recipe("pretrain_cpu_smoke", overrides=[
        'distribution.strategy="data_parallel"', *SMALL_PRETRAINING])
    summary = run_pretraining(recipe, sys.argv[2], verbose=0, log=lambda *_: None)
    return _data_parallel_results(summary, sys.argv[2], sys.argv[3])


def _data_parallel_results(summary, output, results_dir, *finetune_overrides):
    """After a data_parallel pretraining run (`summary`, into `output`): the fine-tuning runner
    under data_parallel (and `finetune_overrides`) into output-finetune; this process's
    weights go to
    results_dir/pretrained-<process>.npz and finetuned-<process>.npz. Also which rows of 4
    global batches of 8 this process feeds. The same on a cluster's process and on one
    process over 2 local devices (jax_fit), which the multi-host test compares."""
    import hashlib

    import jax
    import tensorflow as tf

    from keras_bert_suite.recipe_runner import load_recipe
    from keras_bert_suite.recipe_runner.finetuning import run_finetuning

    def save(name, model, index):
        weights = [np.asarray(w) for w in model.get_weights()]
        np.savez(f"{results_dir}/{name}-{index}.npz", *weights)
        return hashlib.sha256(b"".join(w.tobytes() for w in weights)).hexdigest()

    distribution = summary["distribution"]
    pretrained_sha256 = save("pretrained", summary["model"], distribution.worker_index)
    # 60 examples in batches of 8: the 8th update takes whole batches into the next pass.
    finetuned = run_finetuning(load_recipe("sentiment_rotten_tomatoes_cpu", overrides=[
        "model.preset=bert_uncased_L-2_H-128_A-2", "model.load_weights=false",
        f"model.encoder_overrides={json.dumps(ONE_LAYER)}",
        'distribution.strategy="data_parallel"', "data.sequence_length=32",
        "training.num_train_steps=8", "training.batch_size=8", "evaluation.batch_size=16",
        "data.max_train_examples=60", "data.max_eval_examples=40", *finetune_overrides]),
        output + "-finetune", verbose=0, log=lambda *_: None)
    rows = distribution.keras_distribution.distribute_dataset(
        tf.data.Dataset.range(32).batch(8))
    # The mesh's devices ("cpu:<id>"), not the process's: jax_fit's process has more than its
    # mesh uses.
    mesh = [str(device) for device in distribution.keras_distribution.device_mesh.devices.flat]
    local = {f"{device.platform}:{device.id}" for device in jax.local_devices()}
    return {
        "finetuned_sha256": save("finetuned", finetuned["model"], distribution.worker_index),
        "finetune_steps": int(np.asarray(finetuned["model"].optimizer.iterations)),
        "finetune_metrics": finetuned["metrics"],
        "worker_index": distribution.worker_index,
        "num_workers": distribution.num_workers,
        "is_chief": distribution.is_chief,
        "replicas": distribution.num_replicas,
        "devices": len(mesh),
        "local_devices": len(local.intersection(mesh)),
        "step": summary["step"],
        "history": summary["history"],
        "pretrained_sha256": pretrained_sha256,
        "rows_fed": [np.asarray(batch).tolist() for batch in rows],
    }


def _checkpoint_heads(num_heads):
    """MiniLM's own attention weights, head by head, from its Hugging Face safetensors:
    {part: [per head: kernel columns [H, Dh] or bias [Dh] or output kernel rows [Dh, H]]}."""
    import os

    from safetensors.numpy import load_file

    from keras_bert_suite.presets import packaged_checkpoint_dir

    tensors = load_file(os.path.join(packaged_checkpoint_dir("all-MiniLM-L6-v2"),
                                     "model.safetensors"))
    layers = {}
    for layer in range(6):
        module = f"encoder.layer.{layer}.attention"
        parts = {part: tensors[f"{module}.self.{part}.weight"].T  # torch [out, in] -> [in, out]
                 for part in ("query", "key", "value")}
        parts["bias"] = np.stack([tensors[f"{module}.self.{part}.bias"]
                                  for part in ("query", "key", "value")])  # [3, H]
        parts["output_rows"] = tensors[f"{module}.output.dense.weight"].T
        # Heads are kernel columns, bias columns and output kernel rows.
        layers[layer] = {part: np.split(value, num_heads, axis=0 if part == "output_rows" else 1)
                         for part, value in parts.items()}
    return layers


def _which_head(piece, heads):
    """The index of the checkpoint head `piece` equals exactly, or None."""
    matches = [index for index, head in enumerate(heads) if np.array_equal(piece, head)]
    return matches[0] if len(matches) == 1 else None


def jax_heads(output, counts):
    """The real MiniLM encoder under model_parallel over the first N host devices for each N
    in `counts` ("2,4"; XLA_FLAGS from the test gives the process the most of them), next to
    the same encoder on one device: which checkpoint heads each device's shards of the
    attention weights hold, and the encoders' outputs on real sentences (written to
    output/outputs-N.npz). One process serves every N: MiniLM, the sentences and the
    unsplit outputs are made once."""
    import keras

    from keras_bert_suite import BertEncoder
    from keras_bert_suite.distribution import create_distribution

    x, _ = _real_batch()
    positions = np.array([[1, 2, 3]] * GLOBAL_BATCH, "int32")
    def outputs(name, encoder):
        """Both forward paths as one compiled program (op-by-op eager collectives can miss
        their 40 s rendezvous on a busy 2-core machine)."""
        inputs = {key: keras.Input((None,), dtype="int32", name=key) for key in x}
        rows = keras.Input((positions.shape[1],), dtype="int32", name="positions")
        full = encoder(inputs)
        model = keras.Model({**inputs, "positions": rows}, {
            "sequence_output": full["sequence_output"], "pooled_output": full["pooled_output"],
            "gathered_output": encoder.encode_at(inputs, rows)["gathered_output"]})
        result = model.predict_on_batch({**x, "positions": positions})
        return {f"{name}/{key}": np.asarray(value) for key, value in result.items()}

    encoder = BertEncoder.from_preset("minilm_l6_h384_uncased")  # one device
    whole = outputs("whole", encoder)
    checkpoint = _checkpoint_heads(encoder.num_heads)
    results = {}
    for num_devices in [int(n) for n in counts.split(",")]:
        distribution = create_distribution({"strategy": "model_parallel",
                                            "num_devices": num_devices})
        with distribution.scope():
            split = BertEncoder.from_preset("minilm_l6_h384_uncased")
            np.savez(f"{output}/outputs-{num_devices}.npz", **whole,
                     **outputs("split", split))
        heads = {}
        for layer, block in enumerate(split.transformer_layers):
            attention, ours = block.attention, checkpoint[layer]
            held = {}
            for shard in attention.qkv.kernel.value.addressable_shards:  # [H, 3, N / D, Dh]
                data = np.asarray(shard.data)
                held[str(shard.device)] = {
                    part: [_which_head(data[:, index, j], ours[part])
                           for j in range(data.shape[2])]
                    for index, part in enumerate(("query", "key", "value"))}
            for shard in attention.qkv.bias.value.addressable_shards:  # [3, N / D, Dh]
                data = np.asarray(shard.data)
                held[str(shard.device)]["bias"] = [_which_head(data[:, j], ours["bias"])
                                                  for j in range(data.shape[1])]
            for shard in attention.output_dense.kernel.value.addressable_shards:  # [N/D*Dh, H]
                rows = np.split(np.asarray(shard.data), len(shard.data) // attention.head_dim)
                held[str(shard.device)]["output_rows"] = [_which_head(r, ours["output_rows"])
                                                         for r in rows]
            heads[str(layer)] = held
        mesh = distribution.keras_distribution.device_mesh
        results[str(num_devices)] = {"devices": int(np.size(mesh.devices)), "heads": heads}
    return results


def mirrored_step_then_pretrain_until_paused():
    """`mirrored_step` into argv[2] (its result written to argv[2]/result.json), then
    `pretrain_until_paused` with argv[3:]. The run the test kills needs a process of its own
    anyway, and the mirrored step must come first (its logical CPUs are set up before
    TensorFlow starts): one TensorFlow start fewer. Each pretraining run seeds what it draws,
    so the killed run trains as it would in a fresh process."""
    import os

    os.makedirs(sys.argv[2])
    result = mirrored_step(os.path.join(sys.argv[2], "run"))
    with open(os.path.join(sys.argv[2], "result.json"), "w") as f:
        json.dump(result, f)
    return pretrain_until_paused(*sys.argv[3:7], sys.argv[7:])


def pretrain_until_paused(recipe_name, output, ready, intervals, overrides):
    """`kbs pretrain` (the recipe, output dir, ready file, pause after this many checkpoint
    intervals, then the recipe's --set overrides): after that interval's backup is written,
    touches the ready file and blocks, so the test can SIGKILL a run that is surely mid-way."""
    import time

    import keras

    from keras_bert_suite.recipe_runner import load_recipe
    from keras_bert_suite.recipe_runner.pretraining import run_pretraining

    intervals = int(intervals)

    class PauseWhenBackedUp(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):  # after the run's own backup callback
            if epoch + 1 == intervals:
                with open(ready, "w") as f:
                    f.write(str(epoch))
                time.sleep(3600)  # killed long before this returns

    recipe = load_recipe(recipe_name, overrides=overrides)
    run_pretraining(recipe, output, callbacks=[PauseWhenBackedUp()], verbose=0,
                    log=lambda *_: None)
    return {"finished": True}  # only if the pause never came


def resume_then_reference():
    """`kbs pretrain` with argv[2:] (the recipe, --output OUTPUT, --set overrides): it resumes
    the killed run in OUTPUT; then, in this same process (one process start fewer), the same
    command into OUTPUT-uninterrupted, a new run. Each run seeds what it draws
    (keras.utils.set_random_seed), so the second run of a process trains as a fresh one."""
    from keras_bert_suite.cli import main

    arguments = sys.argv[2:]
    main(arguments)
    output = arguments.index("--output") + 1
    main([*arguments[:output], arguments[output] + "-uninterrupted", *arguments[output + 1:]])
    return {"finished": True}


if __name__ == "__main__":
    import keras

    keras.config.disable_traceback_filtering()  # a failing run shows the whole trace
    print("RESULT " + json.dumps(globals()[sys.argv[1]]()))
