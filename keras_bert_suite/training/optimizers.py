"""BERT's optimizer set-up, built from Keras' own AdamW and Lamb, and FusedAdamW: Keras'
AdamW numbers in one pass per variable."""

import keras

from keras_bert_suite import backend_kernels, keras_compat
from keras_bert_suite.training.schedules import PerUpdateSchedule, WarmupPolynomialDecay

# BERT decays every weight except LayerNorm scales/offsets and biases. Keras names
# LayerNormalization's weights `gamma`/`beta`, and every bias here ends in `bias`
# (including the MLM head's `output_bias`); matched against `variable.name`.
NO_WEIGHT_DECAY = ("gamma", "beta", "bias")


def _dense_gradients(gradients, keep_rows=None):
    """Turns TensorFlow's sparse embedding gradients into ordinary tensors (except where
    `keep_rows[i]`: those stay row slices, summed per id by `_summed_rows`).

    On the TensorFlow backend a lookup's gradient reaches the optimizer as a
    `tf.IndexedSlices` with one row per looked-up id, duplicates unsummed (every [CLS],
    every segment id). Keras 3.15's global-norm clipping measures those rows unsummed
    (a different norm, so a different clipping factor for every variable), and without
    clipping its Adam/Lamb square them before they are summed (second moment sum(g_i^2)
    instead of (sum g_i)^2). Either way training on TensorFlow would drift from JAX and
    PyTorch, whose gradients are dense. Summing first, as `tf.convert_to_tensor` does,
    gives the gradient the other backends (and google-research/bert) use.
    """
    if keras.backend.backend() != "tensorflow":
        return gradients
    import tensorflow as tf  # only reached on the TensorFlow backend

    keep_rows = keep_rows or [False] * len(gradients)
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) and not keep else g
            for g, keep in zip(gradients, keep_rows)]


def _summed_rows(gradients):
    """TensorFlow row slices with each id once, its rows summed: the rows of the dense
    gradient the other backends see (so clipping measures the same norm)."""
    if keras.backend.backend() != "tensorflow":
        return gradients
    import tensorflow as tf  # only reached on the TensorFlow backend

    def summed(g):
        if not isinstance(g, tf.IndexedSlices):
            return g
        ids, positions = tf.unique(g.indices)
        rows = tf.math.unsorted_segment_sum(g.values, positions, tf.shape(ids)[0])
        return tf.IndexedSlices(rows, ids, g.dense_shape)

    return [summed(g) for g in gradients]


def _scaled(gradient, scale):
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # only reached on the TensorFlow backend

        if isinstance(gradient, tf.IndexedSlices):
            return tf.IndexedSlices(gradient.values * scale, gradient.indices,
                                    gradient.dense_shape)
    return gradient * scale


def _summed_over_replicas(gradients):
    """Under a tf.distribute strategy, the gradients summed over the replicas.

    Keras 3.15's TensorFlow optimizer clips by global norm BEFORE it sums the replicas'
    gradients, so each replica clips its own partial gradient with its own factor: with two
    replicas, one step differs from the same global batch on one device whenever clipping is
    active. Summing first (and skipping Keras' later sum: keras_compat.gradients_already_summed)
    gives the one-device result: the norm of the whole batch's gradient, one factor for all.
    """
    if keras.backend.backend() != "tensorflow":
        return gradients  # JAX shards one jitted step; nothing is summed after clipping
    import tensorflow as tf  # only reached on the TensorFlow backend

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return gradients
    present = [g for g in gradients if g is not None]
    summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
    return [None if g is None else next(summed) for g in gradients]


@keras_compat.gradients_already_summed  # summed in `apply` (TensorFlow backend only)
class _BertGradients:
    """Mixin for Keras' optimizers: dense (and, under a strategy, replica-summed) gradients
    before clipping, on every backend; the names excluded from weight decay are part of the
    config (Keras keeps them out of it, so a reloaded optimizer decayed LayerNorm and bias)."""

    def __init__(self, *args, exclude_from_weight_decay_names=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.exclude_from_weight_decay_names = None
        if exclude_from_weight_decay_names:
            self.exclude_from_weight_decay(var_names=list(exclude_from_weight_decay_names))

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        super().exclude_from_weight_decay(var_list=var_list, var_names=var_names)
        self.exclude_from_weight_decay_names = list(var_names) if var_names else None

    def get_config(self):
        return {**super().get_config(),
                "exclude_from_weight_decay_names": self.exclude_from_weight_decay_names}

    def updates_touched_rows(self, variable):
        """Whether `variable` takes a row-wise (lazy) update (FusedAdamW's option)."""
        return False

    def apply(self, grads, trainable_variables=None):
        variables = self._trainable_variables if trainable_variables is None else trainable_variables
        keep_rows = [self.updates_touched_rows(v) for v in variables]
        grads = _summed_rows(_summed_over_replicas(_dense_gradients(grads, keep_rows)))
        return super().apply(grads, trainable_variables)


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class AdamW(_BertGradients, keras.optimizers.AdamW):
    """Keras' AdamW, given dense, replica-summed gradients (see `_dense_gradients`,
    `_summed_over_replicas`)."""


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class Lamb(_BertGradients, keras.optimizers.Lamb):
    """Keras' Lamb, given dense, replica-summed gradients (see `_dense_gradients`,
    `_summed_over_replicas`)."""


@keras_compat.update_replaces_weight_decay
@keras.saving.register_keras_serializable(package="keras_bert_suite")
class FusedAdamW(AdamW):
    """`AdamW` (the same config, the same numbers within float32 rounding) whose decay and
    update are one fused kernel per variable: TensorFlow's ResourceApplyAdam, torch's
    fused AdamW kernel, one jitted function on JAX (backend_kernels.adamw_update). Keras'
    AdamW runs ~15 element-wise ops per variable, each a pass over the weights; with
    AMSGrad it is Keras' step. The global norm for clipping is one reduction per gradient
    (`backend_kernels.global_norm`) where Keras' is two passes.

    `touched_rows_names`: variables whose path contains one of these names (e.g.
    "token_embedding") are updated row-wise: only the rows this step's gradient touches
    move, with their moments and their decay (a "lazy" Adam, as TensorFlow 1's
    LazyAdamOptimizer; docs/training.md has the measured trade-off). Not with AMSGrad,
    gradient accumulation or per-variable clipping (then every row is updated).
    """

    def __init__(self, *args, touched_rows_names=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.touched_rows_names = list(touched_rows_names) if touched_rows_names else None

    def get_config(self):
        config = super().get_config()
        if self.touched_rows_names:  # only when set: AdamW.from_config takes the rest
            config["touched_rows_names"] = self.touched_rows_names
        return config

    def updates_touched_rows(self, variable):
        if not self.touched_rows_names or len(variable.shape) != 2:
            return False
        if self.gradient_accumulation_steps or self.clipnorm or self.clipvalue:
            return False
        path = getattr(variable, "path", variable.name)
        return self.decays_in_update() and any(name in path for name in self.touched_rows_names)

    def _clip_gradients(self, grads):
        norm = backend_kernels.global_norm(grads) if self.global_clipnorm else None
        if norm is None:
            return super()._clip_gradients(grads)
        clip = self.global_clipnorm  # Keras' factor; (norm - norm) makes it NaN for inf/NaN
        scale = clip * keras.ops.minimum(1.0 / norm, 1.0 / clip) + (norm - norm)
        return [g if g is None else _scaled(g, scale) for g in grads]

    def decays_in_update(self):
        """Whether the fused step runs (it applies the decay itself): not with AMSGrad."""
        if self.amsgrad:
            return False
        return (keras.backend.backend() != "torch"
                or backend_kernels.torch_has_fused_adamw())

    def _moments(self, variable):
        index = self._get_variable_index(variable)
        return self._momentums[index], self._velocities[index]

    def _hyper(self):
        return dict(step=self.iterations + 1, beta_1=self.beta_1, beta_2=self.beta_2,
                    epsilon=self.epsilon)

    def update_all(self, grads, trainable_variables, learning_rate):
        if not self.decays_in_update():
            return False
        momentums, velocities = zip(*map(self._moments, trainable_variables))
        return backend_kernels.adamw_update(
            trainable_variables, grads, momentums, velocities,
            decayed=[self._use_weight_decay(v) for v in trainable_variables],
            row_wise=[self.updates_touched_rows(v) for v in trainable_variables],
            learning_rate=learning_rate, weight_decay=self.weight_decay, **self._hyper())

    def update_step(self, gradient, variable, learning_rate):
        if not self.decays_in_update():
            return super().update_step(gradient, variable, learning_rate)
        momentum, velocity = (m.value for m in self._moments(variable))  # tf.Variables
        decay = self.weight_decay if self._use_weight_decay(variable) else None
        variable = variable.value if isinstance(variable, keras.Variable) else variable
        if backend_kernels.is_row_slices(gradient):
            backend_kernels.adamw_touched_rows(
                variable, gradient, momentum, velocity, learning_rate=learning_rate,
                decay=decay, **self._hyper())
            return
        backend_kernels.adamw_variable_update(
            variable, gradient, momentum, velocity, learning_rate=learning_rate, decay=decay,
            **self._hyper())


# "adamw" builds FusedAdamW: Keras AdamW's steps (tests/training/test_fused_adamw.py), at
# a fraction of its per-step cost. `.keras` files saved with AdamW still load as AdamW.
OPTIMIZERS = {"adamw": FusedAdamW, "lamb": Lamb}


def create_optimizer(
    name="adamw",
    learning_rate=1e-4,  # BERT's pretraining rate; fine-tuning used 2e-5 to 5e-5
    num_train_steps=None,
    num_warmup_steps=0,
    weight_decay=0.01,
    global_clipnorm=1.0,  # clip by the norm of all gradients together, as BERT did
    gradient_accumulation_steps=None,
    end_learning_rate=0.0,
    power=1.0,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,  # BERT's AdamWeightDecayOptimizer value; Keras' default is 1e-7
    exclude_from_weight_decay=NO_WEIGHT_DECAY,
    **kwargs,
):
    """An AdamW (or LAMB, for large batches) optimizer configured as BERT trained.

    `num_train_steps` and `num_warmup_steps` count optimizer updates (with gradient
    accumulation, one update per `gradient_accumulation_steps` batches). With neither
    given the learning rate is constant. Extra `kwargs` go to the Keras optimizer.

    "adamw" is `FusedAdamW`: Keras' AdamW step, fused into one kernel per variable.
    Differences from the original code that Keras' optimizers bring: Adam's moments are
    bias-corrected, and Keras' Lamb applies the decoupled weight decay outside its trust
    ratio and computes the trust ratio for LayerNorm and bias variables too.

    Example:
    >>> optimizer = create_optimizer("adamw", learning_rate=1e-4, num_train_steps=100_000,
    ...                              num_warmup_steps=10_000)
    >>> type(optimizer).__name__, float(optimizer.learning_rate)  # 0 at the warm-up's start
    ('FusedAdamW', 0.0)
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer '{name}'; expected one of {sorted(OPTIMIZERS)}.")
    schedule = learning_rate
    if num_train_steps or num_warmup_steps:
        schedule = WarmupPolynomialDecay(
            learning_rate, total_steps=num_train_steps, warmup_steps=num_warmup_steps,
            end_learning_rate=end_learning_rate, power=power)
        if gradient_accumulation_steps:
            schedule = PerUpdateSchedule(schedule, gradient_accumulation_steps)
    optimizer = OPTIMIZERS[name](
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=global_clipnorm,
        gradient_accumulation_steps=gradient_accumulation_steps,
        **kwargs,
    )
    if weight_decay and exclude_from_weight_decay:
        optimizer.exclude_from_weight_decay(var_names=list(exclude_from_weight_decay))
    return optimizer


def build_optimizer_before_tracing(model):
    """Creates the optimizer's slot variables before `fit` traces its train step.

    Keras' TensorFlow trainer, with no tf.distribute strategy, leaves them to the first trace
    of the step; a tf.function that creates variables is traced twice (once creating them,
    once guaranteed not to), so every first `fit` of a model paid for its train step twice
    (a 2-layer classifier's first fit: 6.8 s, 3.9 s with this). Keras builds them this same
    way under a strategy (in its scope); a model with unbuilt layers is left to Keras.
    """
    if keras.backend.backend() != "tensorflow":
        return
    import tensorflow as tf  # only reached on the TensorFlow backend

    if tf.distribute.has_strategy():  # fit inside a strategy's scope: Keras' placement
        return
    # Outside every scope, a model built under a strategy keeps it; any other model's is
    # TensorFlow's one default strategy.
    if model.distribute_strategy is not tf.distribute.get_strategy():
        return
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built:
        return
    if all(layer.built for layer in keras_compat.all_layers(model)):
        optimizer.build(model.trainable_variables)
