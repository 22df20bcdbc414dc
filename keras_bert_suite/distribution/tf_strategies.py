"""tf.distribute strategies: one_device, mirrored, multi_worker (with a Keras `fit`
workaround) and tpu. TensorFlow is imported only when one is asked for."""

import glob
import json
import os

from keras_bert_suite.distribution.placement import Distribution, DistributionError

# tf.distribute strategies made in this process, by their devices: a second strategy over
# the same devices would reuse the first one's collective instance keys, and its all-reduces
# would meet the first one's ("Shape mismatch in the collective instance ..."), and
# MultiWorkerMirroredStrategy may only be set up once per process anyway.
_TF_STRATEGIES = {}


def _cached_strategy(key, make):
    if key not in _TF_STRATEGIES:
        _TF_STRATEGIES[key] = make()
    return _TF_STRATEGIES[key]


def one_device(config, steps):
    """`distribution.device`, or by default the first GPU (the CPU on a machine without one)."""
    import tensorflow as tf

    device = config["device"] or (
        "/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0")
    strategy = tf.distribute.OneDeviceStrategy(device)
    return Distribution("one_device", steps_per_execution=steps, tf_strategy=strategy)


def tpu(config):
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
    return glob.glob("/dev/accel*") + [path for path in glob.glob("/dev/vfio/*")
                                       if not path.endswith("/vfio")]


def mirrored(config, steps):
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


def _keras_fit_multi_worker_strategy():
    """MultiWorkerMirroredStrategy with two Keras 3.15 `fit` bugs worked around."""
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

    return MultiWorkerMirroredStrategy()


def multi_worker(steps):
    cluster = _tf_config()
    strategy = _cached_strategy(("multi_worker",), _keras_fit_multi_worker_strategy)
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
