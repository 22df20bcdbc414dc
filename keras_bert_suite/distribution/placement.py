"""`Distribution`: what a runner needs to know about where training runs."""

import contextlib

import keras


class DistributionError(ValueError):
    """A distribution setting that cannot work here; the message says what to change."""


class Distribution:
    """What a runner needs to know about where training runs (see `create_distribution`).

    Attributes:
        strategy: the `distribution.strategy` name.
        num_replicas: synchronous model copies a global batch is split over.
        num_workers, worker_index: processes in the cluster, and which one this is (JAX
            across hosts: jax.process_count() and jax.process_index()).
        is_chief: this process writes checkpoints, logs and the final model (worker 0).
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
        keeps its own share). A no-op for a single worker, and under keras.distribution (JAX
        across hosts), where every process feeds the same global batches and Keras keeps
        each process's share of each batch (DataParallel.distribute_dataset)."""
        if self.num_workers == 1 or self.keras_distribution is not None:
            return dataset
        import tensorflow as tf

        policy = tf.data.experimental.AutoShardPolicy
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            policy.FILE if num_files >= self.num_workers else policy.DATA)
        return dataset.with_options(options)

    def whole_batches(self, dataset, batch_size):
        """`dataset` (batched, repeated) as whole global batches of `batch_size` under
        keras.distribution (JAX), which splits every batch evenly over the devices and, across
        hosts, the processes: a short last batch would not split (or leave a process without
        its share). With fixed-length batches it joins the next pass's examples. Batches cut
        to length buckets can't be joined (their lengths differ), so there the short last
        batch of each pass is left out; every pass reshuffles, so it leaves out different
        rows each time. Unchanged elsewhere (tf.distribute splits short batches itself)."""
        if self.keras_distribution is None:
            return dataset
        import tensorflow as tf

        specs = tf.nest.flatten(dataset.element_spec)
        if all(spec.shape[1:].is_fully_defined() for spec in specs):
            return dataset.rebatch(batch_size, drop_remainder=True)

        def whole(*batch):
            return tf.shape(tf.nest.flatten(batch)[0])[0] == batch_size

        def static_batch(*batch):  # Keras' distribute_dataset reads the batch size statically
            batch = batch if len(batch) > 1 else batch[0]
            return tf.nest.map_structure(lambda t: tf.ensure_shape(
                t, tf.TensorShape([batch_size]).concatenate(t.shape[1:])), batch)

        return dataset.filter(whole).map(static_batch)

    def describe(self):
        where = f"{self.num_replicas} replica(s)"
        if self.num_workers > 1:
            where += f" on {self.num_workers} workers (this is worker {self.worker_index}" + (
                ", the chief)" if self.is_chief else ")")
        return f"distribution {self.strategy}: {where}"
