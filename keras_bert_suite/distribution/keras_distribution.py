"""keras.distribution on JAX (data_parallel, model_parallel, on one host or several) and
keras.device (one_device on JAX and PyTorch).

Several hosts: every host runs the same recipe, and `keras.distribution.initialize` (which
wraps `jax.distributed.initialize`) joins them before any JAX computation; the mesh then
spans every process's devices (`keras.distribution.list_devices()` lists them all). Each
process feeds the same GLOBAL batches to `fit`: Keras' DataParallel / ModelParallel keep this
process's share of each one (`distribute_dataset`: rebatch to global / processes, then every
num_processes-th piece), and assemble the global arrays from the processes' pieces.
"""

import collections
import os

from keras_bert_suite.distribution.placement import Distribution, DistributionError

# The recipe keys for JAX across hosts, and the environment variable that
# keras.distribution.initialize itself reads for each (when the recipe leaves it null).
CLUSTER_ENVIRONMENT = {
    "coordinator_address": "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "num_processes": "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "process_id": "KERAS_DISTRIBUTION_PROCESS_ID",
}
JaxCluster = collections.namedtuple("JaxCluster",
                                    ["coordinator_address", "num_processes", "process_id"])


def one_device(config, steps):
    """`distribution.device`; none means Keras' own choice (the first GPU, else the CPU)."""
    return Distribution("one_device", steps_per_execution=steps, device=config["device"])


def jax_cluster(config, name, backend):
    """The `JaxCluster` this process joins (recipe keys, else Keras' environment variables),
    or None for a single process. Checks the settings; starts nothing."""
    given = [key for key in CLUSTER_ENVIRONMENT if config[key] is not None]
    if given and backend != "jax":
        raise DistributionError(
            f"distribution.{given[0]} is for JAX across hosts (data_parallel or model_parallel "
            f"with KERAS_BACKEND=jax); this process runs Keras on {backend}. "
            + ("Several TensorFlow workers are strategy multi_worker, with TF_CONFIG."
               if backend == "tensorflow" else
               "Keras 3.15 has no multi-process training for PyTorch."))
    if name not in ("data_parallel", "model_parallel"):
        if given:
            raise DistributionError(
                f"distribution.{given[0]} joins hosts into one JAX mesh, which needs "
                f"distribution.strategy data_parallel or model_parallel, not {name!r}.")
        return None
    values = {}
    for key, variable in CLUSTER_ENVIRONMENT.items():
        value, source = config[key], f"distribution.{key}"
        if value is None and os.environ.get(variable, "").strip():
            value, source = os.environ[variable].strip(), variable
        if value is not None and key != "coordinator_address":
            value = _integer(value, source)
        values[key] = (value, source)
    (address, address_source), (processes, processes_source), (process, process_source) = (
        values[key] for key in CLUSTER_ENVIRONMENT)
    if address is None and processes is None and process is None:
        return None
    if address is None:
        setting = (f"{processes_source}={processes}" if processes is not None
                   else f"{process_source}={process}")
        raise DistributionError(
            f"{setting} but no coordinator address: set distribution.coordinator_address (or "
            "KERAS_DISTRIBUTION_JOB_ADDRESSES) to host:port of process 0, the same on every "
            "host.")
    # Keras' variable may list every process's address; process 0's, the coordinator's, is first.
    addresses = [part.strip() for part in str(address).split(",") if part.strip()]
    address = addresses[0] if addresses else ""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise DistributionError(f"{address_source}={address!r} must be host:port of process 0 "
                                "(e.g. 10.0.0.1:1234).")
    if processes is None:
        raise DistributionError(
            f"{address_source} is set but not the number of processes: set "
            "distribution.num_processes (or KERAS_DISTRIBUTION_NUM_PROCESSES).")
    if processes < 1:
        raise DistributionError(f"{processes_source}={processes} must be at least 1.")
    if len(addresses) > 1 and len(addresses) != processes:
        raise DistributionError(f"{address_source} lists {len(addresses)} addresses but "
                                f"{processes_source}={processes}.")
    if process is None:
        raise DistributionError(
            "Each host needs its own process id: set distribution.process_id (or "
            f"KERAS_DISTRIBUTION_PROCESS_ID) to 0 .. {processes - 1}, 0 on the coordinator's "
            "host.")
    if not 0 <= process < processes:
        raise DistributionError(f"{process_source}={process} is outside 0 .. {processes - 1} "
                                f"({processes_source}={processes}).")
    return JaxCluster(address, processes, process)


def _integer(value, source):
    if isinstance(value, bool):
        raise DistributionError(f"{source}={value!r} must be an integer.")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DistributionError(f"{source}={value!r} must be an integer.") from None


def join_jax_cluster(cluster):
    """keras.distribution.initialize for `cluster` (once per process: a second call with the
    same cluster is a no-op). It must come before any JAX computation in the process."""
    import jax
    import keras

    if jax.distributed.is_initialized():
        joined = (jax.process_count(), jax.process_index())
        if joined != (cluster.num_processes, cluster.process_id):
            raise DistributionError(
                f"This process already joined a JAX cluster as process {joined[1]} of "
                f"{joined[0]}; it cannot join as process {cluster.process_id} of "
                f"{cluster.num_processes}.")
        return
    # On CPU, collectives between processes need an implementation: gloo (over TCP).
    # It is jax 0.10's default; a null setting would leave the CPU client without any.
    if not jax.config.jax_cpu_collectives_implementation:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        keras.distribution.initialize(job_addresses=cluster.coordinator_address,
                                      num_processes=cluster.num_processes,
                                      process_id=cluster.process_id)
    except RuntimeError as error:
        if "before" not in str(error):
            raise
        raise DistributionError(
            "JAX across hosts must be set up before any JAX computation in the process "
            f"({str(error).splitlines()[0]}): create the distribution first thing (kbs "
            "pretrain/finetune do), before building a model or listing devices.") from None


def _cluster_devices(per_process):
    """The first `per_process` devices (None: all) of every process, process by process, in
    the form keras.distribution takes ("cpu:2048"): a model copy over consecutive devices
    then stays on one host."""
    import jax

    by_process = {}
    for device in sorted(jax.devices(), key=lambda device: (device.process_index, device.id)):
        by_process.setdefault(device.process_index, []).append(device)
    local = min(len(devices) for devices in by_process.values())
    if per_process is not None and per_process > local:
        raise DistributionError(
            f"distribution.num_devices={per_process} (devices per host across hosts) but a "
            f"host has {local}. On a CPU-only machine, start each process with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={per_process}.")
    return [f"{device.platform}:{device.id}" for devices in by_process.values()
            for device in devices[:per_process or local]]


def jax_distribution(name, config, steps, cluster=None):
    """DataParallel over `num_devices` devices, or ModelParallel on a (batch, model) mesh
    whose model axis has `model_parallel_size` devices, split as BertEncoder.get_layout_map
    says. With a `cluster`, this process joins it first and the mesh spans `num_devices`
    devices of every process (default all); process 0 is the chief."""
    from keras import distribution as kd

    workers = {}
    if cluster is None:
        devices = kd.list_devices()
    else:  # num_devices counts each host's devices, as MirroredStrategy's on TensorFlow
        join_jax_cluster(cluster)
        devices = _cluster_devices(config["num_devices"])
        workers = {"num_workers": cluster.num_processes, "worker_index": cluster.process_id,
                   "is_chief": cluster.process_id == 0}
    wanted = len(devices) if cluster is not None else config["num_devices"] or len(devices)
    if wanted > len(devices):
        raise DistributionError(
            f"distribution.num_devices={wanted} but JAX sees {len(devices)} device(s) "
            f"({devices}). On a CPU-only machine, start the process with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={wanted}.")
    devices = devices[:wanted]
    if name == "data_parallel":
        distribution = kd.DataParallel(devices=devices)
        return Distribution(name, num_replicas=wanted, steps_per_execution=steps,
                            keras_distribution=distribution, **workers)
    # Default: one model copy over all devices; across hosts, over each host's devices.
    model_size = config["model_parallel_size"] or (
        wanted // cluster.num_processes if cluster is not None else wanted)
    if cluster is not None and (wanted // cluster.num_processes) % model_size:
        raise DistributionError(
            f"distribution.model_parallel_size={model_size} must divide each host's "
            f"{wanted // cluster.num_processes} device(s): the chief writes the model from "
            "its own devices, so every host holds whole copies of it.")
    if wanted % model_size:
        raise DistributionError(
            f"distribution.model_parallel_size={model_size} must divide num_devices={wanted}.")
    from keras_bert_suite.models.encoder import BertEncoder

    mesh = kd.DeviceMesh((wanted // model_size, model_size), ("batch", "model"), devices)
    distribution = kd.ModelParallel(layout_map=BertEncoder.get_layout_map(mesh),
                                    batch_dim_name="batch")
    return Distribution(name, num_replicas=wanted // model_size, steps_per_execution=steps,
                        keras_distribution=distribution, **workers)
