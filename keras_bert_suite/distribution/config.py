"""A recipe's `distribution` section -> a `Distribution` (and what a runner does first)."""

import keras

from keras_bert_suite.distribution import keras_distribution, tf_strategies
from keras_bert_suite.distribution.placement import Distribution, DistributionError

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
    # mirrored / data_parallel / model_parallel: default all devices (on each host)
    "num_devices": None,
    "model_parallel_size": None,  # model_parallel: devices per model copy (default all)
    # one_device: "/gpu:1" (TF), "gpu:1" (JAX), "cuda:1" or "cpu" (torch); default first GPU
    "device": None,
    # Train steps run per host call (fewer round trips; TPUs want ~100). 1 elsewhere.
    "steps_per_execution": None,
    # JAX on several hosts (data_parallel / model_parallel over every host's devices): each
    # host runs the same recipe; null reads the variables keras.distribution.initialize reads,
    # KERAS_DISTRIBUTION_JOB_ADDRESSES / _NUM_PROCESSES / _PROCESS_ID, so only they differ.
    "coordinator_address": None,  # "host:port" of process 0 (the chief), reachable by all
    "num_processes": None,
    "process_id": None,  # 0 .. num_processes - 1; 0 is the chief
}


def create_distribution(config=None, backend=None):
    """A `Distribution` for a recipe's `distribution` section (keys: DISTRIBUTION_DEFAULTS).

    Call it before any other TensorFlow work in the process: logical CPU devices and
    MultiWorkerMirroredStrategy's collectives must be set up before the runtime starts; the
    same for JAX across hosts (`coordinator_address`), before any JAX computation.
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
    cluster = keras_distribution.jax_cluster(config, name, backend)
    steps = config["steps_per_execution"] or 1
    if name == "none":
        return Distribution(steps_per_execution=steps)
    if name == "one_device":
        if backend == "tensorflow":
            return tf_strategies.one_device(config, steps)
        return keras_distribution.one_device(config, steps)
    if name == "tpu":
        return tf_strategies.tpu(config)
    if name == "mirrored":
        return tf_strategies.mirrored(config, steps)
    if name == "multi_worker":
        return tf_strategies.multi_worker(steps)
    return keras_distribution.jax_distribution(name, config, steps, cluster)


def start_distribution(recipe, log):
    """What both recipe runners do first: the recipe's Distribution (devices are set up
    before TF starts) and the global batch size and precision it implies."""
    distribution = create_distribution(recipe["distribution"])
    training = recipe["training"]
    batch_size = distribution.global_batch_size(training["batch_size"],
                                                training["per_replica_batch_size"])
    precision = training["precision"]
    if precision == "auto":
        precision = distribution.default_precision
    if distribution.strategy != "none":
        log(f"{distribution.describe()}; global batch {batch_size} "
            f"({batch_size // distribution.num_replicas} per replica), {precision}")
    return distribution, batch_size, precision


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
