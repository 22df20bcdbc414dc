"""keras.distribution on JAX (data_parallel, model_parallel) and keras.device (one_device on
JAX and PyTorch)."""

from keras_bert_suite.distribution.placement import Distribution, DistributionError


def one_device(config, steps):
    """`distribution.device`; none means Keras' own choice (the first GPU, else the CPU)."""
    return Distribution("one_device", steps_per_execution=steps, device=config["device"])


def jax_distribution(name, config, steps):
    """DataParallel over `num_devices` devices, or ModelParallel on a (batch, model) mesh
    whose model axis has `model_parallel_size` devices, split as BertEncoder.get_layout_map
    says."""
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
    from keras_bert_suite.models.encoder import BertEncoder

    mesh = kd.DeviceMesh((wanted // model_size, model_size), ("batch", "model"), devices)
    distribution = kd.ModelParallel(layout_map=BertEncoder.get_layout_map(mesh),
                                    batch_dim_name="batch")
    return Distribution(name, num_replicas=wanted // model_size, steps_per_execution=steps,
                        keras_distribution=distribution)
