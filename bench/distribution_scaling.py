"""Distributed training scaling: TensorFlow MirroredStrategy over 2 logical CPUs and JAX
DataParallel over 2 host devices, each against the same backend on one device.

    python bench/distribution_scaling.py [--shapes mini tiny] [--rounds 5] [--threads 2]
                                         [--backends tensorflow jax] [--steps 3]

The default (mini, 5 rounds) took ~14 minutes on 2 busy shared cores, most of it starting
the 4 processes and compiling; `--shapes tiny --rounds 2` is a quick check.

Model: BertPretrainer (MLM + NSP heads) with random weights, `create_optimizer("adamw")`,
compiled with its defaults inside `distribution.scope()` (keras_bert_suite/distribution). One timed
call = `model.fit(dataset, epochs=1, steps_per_epoch=STEPS)` inside `distribution.run_scope()`
on a tf.data of fixed random pretraining batches (sequence 128, 20 predictions); the first two
calls (tracing, compilation) are not timed. Each contender runs in its own process (devices
must be set up before TensorFlow / JAX start), A B A B interleaved, median (see _workers.py).

Three contenders per backend, P = the per-replica batch:

* 1 device, batch P       strategy "none"
* 1 device, batch 2P      strategy "none"
* 2 replicas, batch 2P    "mirrored" (TF, 2 logical CPUs) / "data_parallel" (JAX, 2 host
                          devices via XLA_FLAGS=--xla_force_host_platform_device_count=2);
                          each replica computes P examples, gradients are all-reduced.

Weak scaling (same per-replica batch): speed-up = examples/s of 2 replicas at 2P / examples/s
of 1 device at P. Strong scaling (same global batch): ... / examples/s of 1 device at 2P.
Scaling efficiency = speed-up / 2 (1.0 = perfect).

What this measures on a CPU-only machine, honestly: the 2 "devices" are partitions of the same
cores. TensorFlow's logical CPU devices share the process' one intra-op thread pool, and XLA's
host devices share one Eigen pool too, so two replicas do not get twice the compute; ~1x (or
below, for the all-reduce and the extra copies) is the expected result. The number is a check
that the data-parallel path adds little overhead, not a prediction for GPUs (see the note the
script prints at the end). Results go to stdout and bench/results/distribution_scaling.json.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402

SHAPES = {  # num_layers, hidden_dim, num_heads, intermediate_dim
    "mini": (4, 256, 4, 1024),  # BERT-mini (L-4 H-256)
    "tiny": (2, 128, 2, 512),   # BERT-tiny (L-2 H-128)
}
PER_REPLICA_BATCH, LENGTH, PREDICTIONS, VOCABULARY = 8, 128, 20, 30522
DISTINCT_BATCHES = 4  # the fixed batches the dataset cycles through
STRATEGIES = {"tensorflow": "mirrored", "jax": "data_parallel"}

MULTI_GPU_NOTE = """\
What a real multi-GPU run needs (none of it can be measured on this machine):
* One process per host driving all its GPUs (MirroredStrategy / keras.distribution
  DataParallel); across hosts, one process per host with TF_CONFIG (strategy multi_worker) or
  jax.distributed.initialize, so input, checkpoints and logs are not duplicated.
* A fast all-reduce: NCCL over NVLink/NVSwitch within a host (MirroredStrategy's default
  cross-device ops on GPUs; XLA's collectives on JAX), InfiniBand/RoCE between hosts. BERT-base
  all-reduces ~110M fp32 gradients (~440 MB) every step.
* A per-replica batch that fills each GPU (BERT's own recipe: global batch 256 at sequence
  128), so compute per step dwarfs the all-reduce; weak scaling, the global batch grows with
  the replica count and the learning rate / warm-up are re-tuned (LAMB for very large batches).
* An input pipeline that outruns N GPUs: pre-tokenized TFRecords, dynamic masking in tf.data,
  prefetch (bench/pretraining_speed.py: 14,200 examples/s from 2 CPU cores).
* Mixed precision (mixed_float16 with loss scaling, or bf16 on A100/H100/TPU) to use the tensor
  cores and halve activation memory.
No published source we checked gives an 8-GPU scaling efficiency for BERT-base, so none
is quoted. What is published is per-GPU utilization of tuned 8-GPU jobs (model FLOPs
utilization, not scaling efficiency): NVIDIA's PyTorch BERT-Large pretraining on 8xA100 ~44%
MFU, MLPerf BERT on 8xH100 ~48% MFU. Measure scaling on the real machine with this script's
method (1 vs N replicas, same per-replica batch)."""


def _dataset(global_batch):
    """Fixed random pretraining batches, cycled forever, batched globally (fit splits them)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    count = global_batch * DISTINCT_BATCHES
    token_ids = rng.integers(1000, VOCABULARY, (count, LENGTH)).astype("int32")
    positions = np.sort(np.stack([rng.choice(np.arange(1, LENGTH - 1), PREDICTIONS, replace=False)
                                  for _ in range(count)]), axis=1).astype("int32")
    weights = np.ones((count, PREDICTIONS), "float32")
    weights[:, -2:] = 0.0  # a couple of padded prediction slots, as in real data
    x = {"token_ids": token_ids, "segment_ids": np.zeros((count, LENGTH), "int32"),
         "padding_mask": np.ones((count, LENGTH), "int32"), "mask_positions": positions}
    y = {"mlm_labels": np.take_along_axis(token_ids, positions, axis=1), "mlm_weights": weights,
         "nsp_labels": rng.integers(0, 2, (count,)).astype("int32")}
    return (tf.data.Dataset.from_tensor_slices((x, y)).cache().repeat()
            .batch(global_batch, drop_remainder=True).prefetch(1))


def keras_worker(shape_name, replicas, steps, facts_path):
    """One process: strategy none (2 contenders: batch P and 2P) or the 2-replica strategy."""
    backend = os.environ["KERAS_BACKEND"]
    from keras_bert_suite.distribution import Distribution, create_distribution

    # Must be the first TensorFlow/JAX work in the process (logical devices).
    distribution = (create_distribution({"strategy": STRATEGIES[backend], "num_devices": 2})
                    if replicas == 2 else Distribution())
    import keras

    from keras_bert_suite import BertEncoder, BertPretrainer
    from keras_bert_suite.training import create_optimizer

    layers, hidden, heads, intermediate = SHAPES[shape_name]
    config = dict(vocabulary_size=VOCABULARY, num_layers=layers, num_heads=heads,
                  hidden_dim=hidden, intermediate_dim=intermediate)
    label = "1 device" if replicas == 1 else f"2 replicas ({distribution.strategy})"
    batches = [PER_REPLICA_BATCH, 2 * PER_REPLICA_BATCH] if replicas == 1 else [
        distribution.global_batch_size(None, per_replica_batch_size=PER_REPLICA_BATCH)]
    contestants, models = {}, []
    for global_batch in batches:
        keras.utils.set_random_seed(0)
        with distribution.scope():
            model = BertPretrainer(BertEncoder(**config))
            model.compile(optimizer=create_optimizer("adamw"),
                          steps_per_execution=distribution.steps_per_execution)
        dataset = _dataset(global_batch)

        def fit(model=model, dataset=dataset):
            with distribution.run_scope():
                model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False)

        contestants[f"{backend} {label}, batch {global_batch}"] = fit
        models.append(model)
    _write_facts(facts_path, backend, distribution, models[0])
    _workers.serve(contestants)


def _write_facts(path, backend, distribution, model):
    """Devices and thread settings this process really ran with (for the results JSON)."""
    facts = {"backend": backend, "strategy": distribution.strategy,
             "replicas": distribution.num_replicas, "os_cpu_count": os.cpu_count(),
             "cpus_usable": len(os.sched_getaffinity(0)),
             "env": {k: os.environ.get(k) for k in (
                 "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
                 "XLA_FLAGS")}}
    if backend == "tensorflow":
        import tensorflow as tf

        facts["devices"] = ([str(d) for d in distribution.tf_strategy.extended.worker_devices]
                            if distribution.tf_strategy else
                            [d.name for d in tf.config.list_logical_devices("CPU")])
        facts["tf_intra_op_threads"] = tf.config.threading.get_intra_op_parallelism_threads()
        facts["tf_inter_op_threads"] = tf.config.threading.get_inter_op_parallelism_threads()
    else:
        # Where the weights really live: a replicated variable has one copy per device.
        facts["devices"] = sorted(str(d) for d in model.weights[0].value.sharding.device_set)
    with open(path, "w") as f:
        json.dump(facts, f)


def run(shape_name, rounds, threads, backends, steps):
    env = _workers.thread_env(threads)
    script = os.path.abspath(__file__)
    scratch = tempfile.mkdtemp(prefix="distribution_scaling_")
    workers, facts_paths = [], []
    try:
        for backend in backends:
            for replicas in (1, 2):
                worker_env = {**env, "KERAS_BACKEND": backend}
                if backend == "jax" and replicas == 2:
                    worker_env["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=2 "
                                               + worker_env["XLA_FLAGS"])
                facts_paths.append(os.path.join(scratch, f"{backend}-{replicas}.json"))
                workers.append(_workers.Worker(
                    [script, "--worker", "keras", "--shape", shape_name, "--replicas",
                     str(replicas), "--steps", str(steps), "--facts", facts_paths[-1]],
                    worker_env))
        seconds = _workers.interleave(workers, rounds=rounds, repeats=1)
        facts = []
        for path in facts_paths:
            with open(path) as f:
                facts.append(json.load(f))
    finally:
        for worker in workers:
            worker.close()
        shutil.rmtree(scratch)
    rows = []
    for name, value in seconds.items():
        backend = name.split()[0]
        global_batch = int(name.rsplit(" ", 1)[1])
        rows.append({"contender": name, "backend": backend, "global_batch": global_batch,
                     "replicas": 1 if "1 device" in name else 2,
                     "seconds_per_call": value, "steps_per_s": steps / value,
                     "examples_per_s": steps * global_batch / value})
    scaling = []
    for backend in backends:
        by_batch = {(r["replicas"], r["global_batch"]): r["examples_per_s"]
                    for r in rows if r["backend"] == backend}
        two = by_batch[(2, 2 * PER_REPLICA_BATCH)]
        for kind, baseline in (("weak (same per-replica batch)", (1, PER_REPLICA_BATCH)),
                               ("strong (same global batch)", (1, 2 * PER_REPLICA_BATCH))):
            speed_up = two / by_batch[baseline]
            scaling.append({"backend": backend, "scaling": kind, "speed_up": speed_up,
                            "efficiency": speed_up / 2})
    return {"shape": shape_name, "layers_hidden_heads_intermediate": SHAPES[shape_name],
            "steps_per_call": steps, "rows": rows, "scaling": scaling, "processes": facts}


def print_table(result, threads):
    layers, hidden, _, _ = result["layers_hidden_heads_intermediate"]
    print(f"\n{result['shape']} L-{layers} H-{hidden}, sequence {LENGTH}, {PREDICTIONS} "
          f"predictions, fp32, per-replica batch {PER_REPLICA_BATCH}, {threads} threads, "
          f"os.cpu_count()={os.cpu_count()}; one call = fit of {result['steps_per_call']} steps")
    print(f"{'contender':46s} {'steps/s':>8s} {'ex/s':>7s}")
    for row in sorted(result["rows"], key=lambda r: (r["backend"], r["replicas"],
                                                      r["global_batch"])):
        print(f"{row['contender']:46s} {row['steps_per_s']:8.3f} {row['examples_per_s']:7.2f}")
    print(f"{'2 replicas vs 1 device':46s} {'speed-up':>8s} {'efficiency':>11s}")
    for row in result["scaling"]:
        print(f"{row['backend'] + ' ' + row['scaling']:46s} {row['speed_up']:8.2f} "
              f"{row['efficiency']:11.0%}")
    for facts in result["processes"]:
        print(f"  process {facts['backend']} {facts['strategy']}: devices {facts['devices']}, "
              f"TF_NUM_INTRAOP_THREADS={facts['env']['TF_NUM_INTRAOP_THREADS']} "
              f"TF_NUM_INTEROP_THREADS={facts['env']['TF_NUM_INTEROP_THREADS']}, "
              f"usable CPUs {facts['cpus_usable']}")


def main():
    parser = _workers.bench_parser(__doc__.splitlines()[0], SHAPES, ["mini"], 5, ["keras"])
    parser.set_defaults(backends=["tensorflow", "jax"])
    parser.add_argument("--steps", type=int, default=3, help="training steps per timed fit call")
    parser.add_argument("--replicas", type=int, choices=[1, 2], help=argparse.SUPPRESS)
    parser.add_argument("--facts", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "keras":
        return keras_worker(args.shape, args.replicas, args.steps, args.facts)
    unsupported = sorted(set(args.backends) - set(STRATEGIES))
    if unsupported:
        parser.error(f"--backends {unsupported}: Keras 3.15 has no multi-device training on "
                     f"torch; choose from {sorted(STRATEGIES)}.")

    results = _workers.results_header(
        args.threads, per_replica_batch=PER_REPLICA_BATCH, sequence_length=LENGTH,
        predictions=PREDICTIONS, vocabulary=VOCABULARY, shapes=[])
    for shape_name in args.shapes:
        result = run(shape_name, args.rounds, args.threads, args.backends, args.steps)
        results["shapes"].append(result)
        print_table(result, args.threads)
    print()
    print(MULTI_GPU_NOTE)
    _workers.write_results("distribution_scaling", results)


if __name__ == "__main__":
    main()
