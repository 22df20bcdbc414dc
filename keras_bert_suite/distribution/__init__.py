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
                              (on several hosts: of each host; see below)
    model_parallel  jax       keras.distribution.ModelParallel on a (batch, model) mesh, with
                              `BertEncoder.get_layout_map` splitting the embeddings, attention
                              heads and feed-forward kernels over `model_parallel_size` devices

JAX on several hosts: each host runs the same recipe with `coordinator_address` ("host:port"
of process 0), `num_processes` and its own `process_id`, or leaves them null and sets the
variables keras.distribution.initialize reads (KERAS_DISTRIBUTION_JOB_ADDRESSES,
KERAS_DISTRIBUTION_NUM_PROCESSES, KERAS_DISTRIBUTION_PROCESS_ID). `create_distribution` joins
the processes (keras.distribution.initialize, gloo collectives on CPU) before any JAX
computation; data_parallel / model_parallel then span every host's devices, process 0 is the
chief (it alone writes), and a model copy never spans hosts (`model_parallel_size` divides a
host's devices, default all of them).

PyTorch: Keras 3.15 has no distribution support for the torch backend (no keras.distribution,
and `fit` does not wrap DistributedDataParallel), so only `none` and `one_device` run there;
the error for anything else says which backend to switch to.

Batch sizes: a recipe's `training.batch_size` is the GLOBAL batch (as google-research/bert's
`train_batch_size`); each of the `num_replicas` replicas gets batch_size / num_replicas.
`training.per_replica_batch_size`, when set, wins: global = it x num_replicas.

Input: `fit` receives the globally batched tf.data and splits it itself (tf.distribute's
`experimental_distribute_dataset` on TensorFlow, keras.distribution on JAX). Across
tf.distribute workers, `shard_input` sets tf.data's auto-shard policy: by FILE when the data
comes from at least one file per worker, by DATA otherwise, so no example is read by two
workers. Across JAX hosts every process reads the same stream and Keras keeps its share of
each global batch (global batch / processes rows); `whole_batches` makes every batch whole,
which that split needs (fixed-length batches: the short last batch joins the next pass's rows;
length-bucketed ones: it is left out, different rows each pass).

Modules: `config` (the recipe section, the strategy/backend table, `create_distribution`,
`start_distribution`), `placement` (the `Distribution` a runner holds), `tf_strategies`
(tf.distribute) and `keras_distribution` (keras.distribution on JAX, keras.device).
"""

from keras_bert_suite.distribution.config import (
    DISTRIBUTION_DEFAULTS,
    STRATEGY_BACKENDS,
    create_distribution,
    start_distribution,
)
from keras_bert_suite.distribution.placement import Distribution, DistributionError
