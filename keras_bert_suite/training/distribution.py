"""Where training runs: the one place that turns a recipe's `distribution` section into a
tf.distribute strategy or a keras.distribution, for the pretraining and fine-tuning runners
and for your own `fit` scripts.

    distribution = create_distribution({"strategy": "mirrored"})
    with distribution.scope():            # build and compile inside it
        model = BertClassifier.from_preset("minilm_l6_h384_uncased", num_classes=2)
        model.compile(steps_per_execution=distribution.steps_per_execution)
    with distribution.run_scope():        # fit, evaluate and predict inside this one
        model.fit(distribution.shard_input(train), ...)

Strategies (`distribution.strategy`) and the backend each needs:

    none            any       one process, Keras' default device placement
    one_device      any       TensorFlow: OneDeviceStrategy(`device`); JAX/PyTorch: keras.device
    mirrored        tensorflow  all local GPUs (or `num_devices` of them); on a machine without
                              GPUs, `num_devices` logical CPU devices (real synchronous replicas)
    multi_worker    tensorflow  MultiWorkerMirroredStrategy: the cluster from TF_CONFIG
    tpu             tensorflow  TPUStrategy via TPUClusterResolver(`tpu`): "local" on a TPU VM,
                              a TPU name, or a grpc:// address; bf16 by default
    data_parallel   jax       keras.distribution.DataParallel over `num_devices` devices
    model_parallel  jax       keras.distribution.ModelParallel on a (batch, model) mesh, with
                              `bert_layout_map` sharding the embeddings, attention and
                              feed-forward kernels over `model_parallel_size` devices

PyTorch: Keras 3.15 has no distribution support for the torch backend (no keras.distribution,
and `fit` does not wrap DistributedDataParallel), so only `none` and `one_device` run there;
the error for anything else says which backend to switch to.

Batch sizes: a recipe's `training.batch_size` is the GLOBAL batch (as google-research/bert's
`train_batch_size`); each of the `num_replicas` replicas gets batch_size / num_replicas.
`training.per_replica_batch_size`, when set, wins: global = it x num_replicas.

Input: `fit` receives the globally batched tf.data and splits it itself (tf.distribute's
`experimental_distribute_dataset` on TensorFlow, keras.distribution on JAX). Across workers,
`shard_input` sets tf.data's auto-shard policy: by FILE when the data comes from at least one
file per worker, by DATA otherwise, so no example is read by two workers.
"""

import contextlib
import json
import os
import re

import keras

STRATEGY_BACKENDS = {
    "none": ("tensorflow", "jax", "torch"),
    "one_device": ("tensorflow", "jax", "torch"),
    "mirrored": ("tensorflow",),
    "multi_worker": ("tensorflow",),
    "tpu": ("tensorflow",),
    "data_parallel": ("jax",),
    "model_parallel": ("jax",),
}

# The `distribution` section every recipe has, with its defaults.
DISTRIBUTION_DEFAULTS = {
    "strategy": "none",  # see STRATEGY_BACKENDS
    "tpu": None,  # tpu: "local" on a TPU VM, a TPU name, or "grpc://host:8470"
    "num_devices": None,  # mirrored / data_parallel / model_parallel: default all devices
    "model_parallel_size": None,  # model_parallel: devices per model copy (default all)
    # one_device: "/gpu:1" (TF), "gpu:1" (JAX), "cuda:1" or "cpu" (torch); default first GPU
    "device": None,
    # Train steps run per host call (fewer round trips; TPUs want ~100). 1 elsewhere.
    "steps_per_execution": None,
}


# tf.distribute strategies made in this process, by their devices: a second strategy over
# the same devices would reuse the first one's collective instance keys, and its all-reduces
# would meet the first one's ("Shape mismatch in the collective instance ..."), and
# MultiWorkerMirroredStrategy may only be set up once per process anyway.
_TF_STRATEGIES = {}


def _cached_strategy(key, make):
    if key not in _TF_STRATEGIES:
        _TF_STRATEGIES[key] = make()
    return _TF_STRATEGIES[key]


class DistributionError(ValueError):
    """A distribution setting that cannot work here; the message says what to change."""


class Distribution:
    """What a runner needs to know about where training runs (see `create_distribution`).

    Attributes:
        strategy: the `distribution.strategy` name.
        num_replicas: synchronous model copies a global batch is split over.
        num_workers, worker_index: processes in the cluster, and which one this is.
        is_chief: this process writes checkpoints, logs and the final model.
        steps_per_execution: for `compile()`.
        default_precision: the dtype policy "auto" means here ("mixed_bfloat16" on TPU).
        tf_strategy / keras_distribution: the object behind `scope()`, if any.
    """

    def __init__(self, strategy="none", num_replicas=1, num_workers=1, worker_index=0,
                 is_chief=True, steps_per_execution=1, default_precision="float32",
                 tf_strategy=None, keras_distribution=None, device=None):
        self.strategy = strategy
        self.num_replicas = num_replicas
        self.num_workers = num_workers
        self.worker_index = worker_index
        self.is_chief = is_chief
        self.steps_per_execution = steps_per_execution
        self.default_precision = default_precision
        self.tf_strategy = tf_strategy
        self.keras_distribution = keras_distribution
        self.device = device

    def scope(self):
        """Build and compile inside this context (variables are created under it)."""
        if self.tf_strategy is not None:
            return self.tf_strategy.scope()
        return self.run_scope()

    def run_scope(self):
        """Call fit/evaluate/predict inside this context. keras.distribution (JAX) must be
        active while they run; a tf.distribute model carries its strategy, and runs OUTSIDE
        its scope, so that what the chief alone does in callbacks (saving creates a scratch
        optimizer variable) creates no variable the other workers would have to mirror."""
        if self.keras_distribution is not None:
            return self.keras_distribution.scope()
        if self.device is not None:
            return keras.device(self.device)
        return contextlib.nullcontext()

    def global_batch_size(self, batch_size, per_replica_batch_size=None):
        """The global batch: `per_replica_batch_size` x replicas when that is given (it wins
        over `batch_size`), else `batch_size`, which must split evenly over the replicas."""
        if per_replica_batch_size is not None:
            return per_replica_batch_size * self.num_replicas
        if batch_size % self.num_replicas:
            raise DistributionError(
                f"training.batch_size={batch_size} (the global batch) does not split evenly "
                f"over {self.num_replicas} replicas ({self.strategy}); use a multiple of "
                f"{self.num_replicas} or set training.per_replica_batch_size.")
        return batch_size

    def shard_input(self, dataset, num_files=0):
        """Sets how tf.data splits `dataset` across workers: by file when it reads at least
        `num_workers` files, by element otherwise (every worker then reads everything and
        keeps its own share). A no-op for a single worker."""
        if self.num_workers == 1:
            return dataset
        import tensorflow as tf

        policy = tf.data.experimental.AutoShardPolicy
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            policy.FILE if num_files >= self.num_workers else policy.DATA)
        return dataset.with_options(options)

    def describe(self):
        where = f"{self.num_replicas} replica(s)"
        if self.num_workers > 1:
            where += f" on {self.num_workers} workers (this is worker {self.worker_index}" + (
                ", the chief)" if self.is_chief else ")")
        return f"distribution {self.strategy}: {where}"


def create_distribution(config=None, backend=None):
    """A `Distribution` for a recipe's `distribution` section (keys: DISTRIBUTION_DEFAULTS).

    Call it before any other TensorFlow work in the process: logical CPU devices and
    MultiWorkerMirroredStrategy's collectives must be set up before the runtime starts.
    """
    config = {**DISTRIBUTION_DEFAULTS, **(config or {})}
    unknown = sorted(set(config) - set(DISTRIBUTION_DEFAULTS))
    if unknown:
        raise DistributionError(f"Unknown distribution key(s) {unknown}; expected "
                                f"{sorted(DISTRIBUTION_DEFAULTS)}.")
    name = config["strategy"]
    backend = backend or keras.backend.backend()
    if name not in STRATEGY_BACKENDS:
        raise DistributionError(f"distribution.strategy={name!r} is not one of "
                                f"{sorted(STRATEGY_BACKENDS)}.")
    if backend not in STRATEGY_BACKENDS[name]:
        raise DistributionError(_wrong_backend_message(name, backend))
    steps = config["steps_per_execution"] or 1
    if name == "none":
        return Distribution(steps_per_execution=steps)
    if name == "one_device":
        return _one_device(config, backend, steps)
    if name == "tpu":
        return _tpu(config)
    if name in ("mirrored", "multi_worker"):
        return _mirrored(config, steps) if name == "mirrored" else _multi_worker(steps)
    return _jax_distribution(name, config, steps)


def _wrong_backend_message(name, backend):
    needs = STRATEGY_BACKENDS[name][0]
    message = (f"distribution.strategy={name!r} needs the {needs} backend (KERAS_BACKEND="
               f"{needs}); this process runs Keras on {backend}.")
    if backend == "torch":
        message += (" Keras 3.15 has no multi-device training for PyTorch (no "
                    "keras.distribution there, and fit() does not use DistributedDataParallel): "
                    "run on one device (strategy none or one_device), or switch to "
                    "tensorflow (mirrored, multi_worker, tpu) or jax (data_parallel, "
                    "model_parallel).")
    elif name in ("data_parallel", "model_parallel"):
        message += " On TensorFlow use mirrored, multi_worker or tpu instead."
    else:
        message += " On JAX use data_parallel or model_parallel instead."
    return message


def _one_device(config, backend, steps):
    """`distribution.device`, or by default the first GPU (the CPU on a machine without
    one); on JAX/PyTorch no device means Keras' own choice, which is the same."""
    device = config["device"]
    if backend == "tensorflow":
        import tensorflow as tf

        device = device or ("/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0")
        strategy = tf.distribute.OneDeviceStrategy(device)
        return Distribution("one_device", steps_per_execution=steps, tf_strategy=strategy)
    return Distribution("one_device", steps_per_execution=steps, device=device)


def _tpu(config):
    import tensorflow as tf

    address = config["tpu"]
    if not address:
        raise DistributionError(
            "distribution.strategy='tpu' needs distribution.tpu: 'local' on a TPU VM, the "
            "TPU's name (with gcloud credentials), or 'grpc://<ip>:8470'.")
    if address == "local" and not local_tpu_devices():
        raise DistributionError(
            "distribution.tpu='local' but this machine has no TPU chips (no /dev/accel* or "
            "/dev/vfio devices): run on a TPU VM, or give the TPU's name or grpc://<ip>:8470.")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu="" if address == "local" else address)
        if address != "local":  # a TPU VM's chips are local; a TPU node is a remote server
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        raise DistributionError(
            f"Could not reach the TPU {address!r}: {str(error).splitlines()[0]} "
            "(on a TPU VM use distribution.tpu=local; elsewhere the TPU name or "
            "grpc://<ip>:8470 of a TPU in the same zone).") from None
    strategy = tf.distribute.TPUStrategy(resolver)
    return Distribution(
        "tpu", num_replicas=strategy.num_replicas_in_sync,
        # Each host call runs this many steps on the TPU (the host is the bottleneck at 1).
        steps_per_execution=config["steps_per_execution"] or 100,
        default_precision="mixed_bfloat16", tf_strategy=strategy)


def local_tpu_devices():
    """The TPU chips of a TPU VM (v2-v4 expose /dev/accel*, v5e and later /dev/vfio/*)."""
    import glob

    return glob.glob("/dev/accel*") + [path for path in glob.glob("/dev/vfio/*")
                                       if not path.endswith("/vfio")]


def _mirrored(config, steps):
    import tensorflow as tf

    wanted = config["num_devices"]
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if wanted and wanted > len(gpus):
            raise DistributionError(f"distribution.num_devices={wanted} but this machine has "
                                    f"{len(gpus)} GPU(s).")
        devices = [f"/gpu:{i}" for i in range(wanted or len(gpus))]
    else:
        devices = [f"/cpu:{i}" for i in range(_logical_cpus(wanted or 1))]
    strategy = _cached_strategy(("mirrored", *devices),
                                lambda: tf.distribute.MirroredStrategy(devices))
    return Distribution("mirrored", num_replicas=strategy.num_replicas_in_sync,
                        steps_per_execution=steps, tf_strategy=strategy)


def _logical_cpus(count):
    """Splits the CPU into `count` logical devices (real, synchronous replicas: how the
    mirrored code path is exercised on a machine without GPUs)."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) == count:
        return count
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:
        have = len(tf.config.list_logical_devices("CPU"))
        if have >= count:
            return count
        raise DistributionError(
            f"distribution.num_devices={count} logical CPU devices must be set up before "
            f"TensorFlow starts, and this process already runs with {have}. Create the "
            "distribution first thing (kbs pretrain/finetune do).") from None
    return count


def _multi_worker(steps):
    import tensorflow as tf

    class MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
        """Works around two Keras 3.15 `fit` bugs with this strategy (MirroredStrategy is
        unaffected): fit reduces the whole first batch (a dict of per-replica tensors) in one
        `reduce` call, which these collectives reject ("Attempt to convert a value
        ({'token_ids': PerReplica...}) to a Tensor"), and it averages every scalar metric
        with `axis=0` ("Invalid reduction dimension 0 for input with 0 dimensions").
        Reducing leaf by leaf, scalars without an axis, is what both calls mean."""

        def reduce(self, reduce_op, value, axis):
            def reduce_leaf(leaf):
                rank = self.experimental_local_results(leaf)[0].shape.rank
                return super(MultiWorkerMirroredStrategy, self).reduce(
                    reduce_op, leaf, axis if rank else None)

            return tf.nest.map_structure(reduce_leaf, value)

    cluster = _tf_config()
    strategy = _cached_strategy(("multi_worker",), MultiWorkerMirroredStrategy)
    resolver = strategy.cluster_resolver
    task_type, task_id = resolver.task_type, resolver.task_id
    workers = cluster["cluster"]
    num_workers = len(workers.get("worker", [])) + len(workers.get("chief", []))
    # The chief is task "chief" if the cluster names one, else worker 0 (TF's convention).
    is_chief = task_type == "chief" or (task_type == "worker" and task_id == 0
                                         and "chief" not in workers)
    index = task_id + (1 if "chief" in workers and task_type == "worker" else 0)
    return Distribution("multi_worker", num_replicas=strategy.num_replicas_in_sync,
                        num_workers=num_workers, worker_index=index, is_chief=is_chief,
                        steps_per_execution=steps, tf_strategy=strategy)


def _tf_config():
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise DistributionError(
            "distribution.strategy='multi_worker' reads the cluster from the TF_CONFIG "
            "environment variable, which is not set. Start every worker with e.g. "
            'TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}\' (index 1 on the second host).')
    try:
        config = json.loads(raw)
        config["cluster"], config["task"]["type"], config["task"]["index"]
    except (ValueError, KeyError, TypeError) as error:
        raise DistributionError(f"TF_CONFIG is not a valid cluster description ({error!r}): "
                                f"{raw[:200]}") from None
    return config


def _jax_distribution(name, config, steps):
    from keras import distribution as kd

    devices = kd.list_devices()
    wanted = config["num_devices"] or len(devices)
    if wanted > len(devices):
        raise DistributionError(
            f"distribution.num_devices={wanted} but JAX sees {len(devices)} device(s) "
            f"({devices}). On a CPU-only machine, start the process with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={wanted}.")
    devices = devices[:wanted]
    if name == "data_parallel":
        distribution = kd.DataParallel(devices=devices)
        return Distribution(name, num_replicas=wanted, steps_per_execution=steps,
                            keras_distribution=distribution)
    model_size = config["model_parallel_size"] or wanted
    if wanted % model_size:
        raise DistributionError(
            f"distribution.model_parallel_size={model_size} must divide num_devices={wanted}.")
    mesh = kd.DeviceMesh((wanted // model_size, model_size), ("batch", "model"), devices)
    distribution = kd.ModelParallel(layout_map=bert_layout_map(mesh), batch_dim_name="batch")
    return Distribution(name, num_replicas=wanted // model_size, steps_per_execution=steps,
                        keras_distribution=distribution)


# Megatron-style tensor parallelism for BERT's weights (paths as `variable.path` spells them):
# the first matmul of each pair is split by output column, the second by input row, so each
# pair needs one all-reduce. Embedding tables are split along the hidden axis. Everything
# else (LayerNorm, biases of row-split kernels, the pooler, heads) is replicated.
BERT_LAYOUT = {
    r"embeddings/(token_embedding/embeddings|position_embedding)$": (None, "model"),
    r"transformer_layer_\d+/attention/qkv/kernel$": (None, "model"),
    r"transformer_layer_\d+/attention/qkv/bias$": ("model",),
    r"transformer_layer_\d+/attention/output/kernel$": ("model", None),
    r"transformer_layer_\d+/intermediate/kernel$": (None, "model"),
    r"transformer_layer_\d+/intermediate/bias$": ("model",),
    r"transformer_layer_\d+/output/kernel$": ("model", None),
}


def bert_layout_map(device_mesh):
    """A keras.distribution.LayoutMap with BERT_LAYOUT's rules on `device_mesh` (axes
    "batch" and "model")."""
    from keras import distribution as kd

    layout_map = kd.LayoutMap(device_mesh)
    for pattern, axes in BERT_LAYOUT.items():
        layout_map[pattern] = axes
    return layout_map


def expected_layout(path):
    """The axes BERT_LAYOUT gives the variable at `path` (None: replicated)."""
    matches = [axes for pattern, axes in BERT_LAYOUT.items() if re.search(pattern, path)]
    return matches[0] if matches else None
