"""BertTask: what the five task models share (KerasHub's Task lifecycle).

* built with `encoder=` (or KerasHub's `backbone=`) and an optional task preprocessor, and
  compiled on construction with the task's defaults (`compile()` again to override);
* inputs: the encoder's dict {"token_ids", "segment_ids", "padding_mask"}, int32 [B, T]
  ([B, C, T] for multiple choice), checked with errors that say what to pass instead;
* raw text in `fit` / `evaluate` / `predict` when a preprocessor is set: text in memory is
  preprocessed once into rows, batched and shuffled every epoch (`batch_size` counts rows:
  windows for the span labeler, sentence chunks for the token classifier), a
  `tf.data.Dataset` of text is mapped in tf.data (as KerasHub's Task does); tasks whose
  rows are windows (span labeler, token classifier) return their postprocessed answers from
  `predict` on raw text;
* length buckets on raw text (`bucket_boundaries="auto"`, text/length_buckets.py): each
  batch is cut to its longest row rounded up to a bucket boundary instead of padding to
  `sequence_length`, and `fit` groups rows of similar length (`group_by_length` batches per
  group); `bucket_boundaries=None` keeps fixed-length batches (TPUs);
* `serving_signatures()`: what export traces into the SavedModel (raw text in);
* `get_config` / `from_config` / `.keras` round trip; `from_preset` and `save_to_preset`.
"""

import inspect
import json
import logging
import os

import keras
import numpy as np

from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.models import weight_names
from keras_bert_suite.models.encoder import BertEncoder
from keras_bert_suite.tasks.model_base import BertModelBase, compile_arguments, is_auto
from keras_bert_suite.text import length_buckets, task_inputs
from keras_bert_suite.text.preprocessor import BertPreprocessor
from keras_bert_suite.training.optimizers import build_optimizer_before_tracing, create_optimizer
from keras_bert_suite.layers.initializer import BertInitializer
from keras_bert_suite.names import ENCODER_INPUTS

# The top of the BERT paper's fine-tuning grid (2e-5 .. 5e-5). The number of training steps
# is unknown at compile time, so the default rate is constant; for BERT's warm-up + linear
# decay pass `create_optimizer(learning_rate=..., num_train_steps=..., num_warmup_steps=...)`.
DEFAULT_LEARNING_RATE = 5e-5
# Beside an encoder preset's files, a task preset keeps the whole task (head + preprocessor).
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"

logger = logging.getLogger(__name__)


def resolve_encoder(encoder, backbone):
    """`encoder=` or KerasHub's `backbone=` (one of them), checked."""
    if encoder is not None and backbone is not None and encoder is not backbone:
        raise ValueError("Pass the encoder once: encoder= or backbone= (KerasHub's name), "
                         "not both.")
    encoder = encoder if encoder is not None else backbone
    if not isinstance(encoder, BertEncoder):
        raise ValueError(f"encoder (or backbone) must be a BertEncoder, got "
                         f"{type(encoder).__name__}.")
    return encoder


def encoder_inputs(shape=(None,)):
    """Symbolic int32 encoder inputs; `shape` excludes the batch axis."""
    return {name: keras.Input(shape=shape, dtype="int32", name=name) for name in ENCODER_INPUTS}


def head_initializer(encoder):
    """Fresh task heads start as BERT's did: truncated normal, stddev 0.02."""
    return BertInitializer(stddev=encoder.initializer_range)


def dropout_and_dense(encoder, units, dropout, name="logits"):
    """BERT's fine-tuning head layers: (Dropout, a fresh Dense(units)), in the encoder's dtype
    policy."""
    policy = encoder.layer_dtype_policy
    return (BertDropout(dropout, dtype=policy, name="classifier_dropout"),
            keras.layers.Dense(units, kernel_initializer=head_initializer(encoder), dtype=policy,
                               name=name))


class BertTask(BertModelBase, keras.Model):
    """Base class of the task models: an encoder, a head and an optional preprocessor.

    Subclasses build their functional graph and call `super().__init__(inputs, outputs,
    encoder, preprocessor)`; they override `default_loss`, `default_metrics` and, when their
    labels are not keyed by output name, `labels_by_output`.
    """

    # [B, T] inputs; BertMultipleChoice takes [B, C, T].
    input_rank = 2
    # Labels (and sample weights) with one entry per token: cut with a batch's length bucket.
    labels_per_token = False
    # Outputs with one entry per token: `predict` keeps sequence_length so batches line up.
    outputs_per_token = False
    input_legend = "[batch, sequence_length]"

    # The attribute holding the head's Dense layer, which other libraries' task checkpoints
    # (transformers' BertFor*, KerasHub's BertTextClassifier) have too; None: no such head.
    head_layer_name = None

    # The preprocessor `from_preset` builds, and its default sequence length.
    preprocessor_class = BertPreprocessor
    default_sequence_length = 128

    def __init__(self, inputs, outputs, encoder, preprocessor=None, **kwargs):
        encoder = resolve_encoder(encoder, None)
        # The encoder's layers carry its dtype policy (a functional model's own is float32).
        super().__init__(inputs=inputs, outputs=outputs,
                         dtype=encoder.layer_dtype_policy, **kwargs)
        # Keras names functional outputs after their layers; ours are the dict keys (or
        # "logits" for one tensor), so compile()'s dicts and the labels line up by name.
        self.output_names = sorted(outputs) if isinstance(outputs, dict) else ["logits"]
        self.encoder = encoder
        self.preprocessor = preprocessor

    @property
    def head_layer(self):
        return getattr(self, self.head_layer_name)

    @property
    def backbone(self):
        """The encoder, under KerasHub's name."""
        return self.encoder

    # === Inputs ===

    def __call__(self, *args, **kwargs):
        inputs = args[0] if args else kwargs.get("inputs")
        self._check_inputs(inputs)
        return super().__call__(*args, **kwargs)

    def _check_inputs(self, inputs):
        name = type(self).__name__
        if task_inputs.is_text(inputs):
            fix = ("use predict()/fit()/evaluate(), which apply the preprocessor, or call "
                   "model(model.preprocessor(text))" if self.preprocessor is not None else
                   "give the model a preprocessor (e.g. BertPreprocessor.from_preset(...)) "
                   "or pass token ids")
            raise ValueError(f"{name} was called on raw text; {fix}.")
        if not isinstance(inputs, dict):
            raise ValueError(f"{name} takes a dict with keys {list(ENCODER_INPUTS)}, got "
                             f"{type(inputs).__name__}.")
        missing = [key for key in ENCODER_INPUTS if key not in inputs]
        unexpected = sorted(set(inputs) - set(ENCODER_INPUTS))
        if missing or unexpected:
            raise ValueError(f"{name} takes inputs {list(ENCODER_INPUTS)}; missing {missing}, "
                             f"unexpected {unexpected}.")
        for key in ENCODER_INPUTS:
            shape = tuple(getattr(inputs[key], "shape", ()))
            if len(shape) != self.input_rank:
                raise ValueError(f"{name}: '{key}' must be {self.input_legend}, got shape "
                                 f"{shape}.")

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Raw text (and labels) -> (encoder inputs, labels, weights): eagerly on text in
        memory, inside tf.data on a dataset of text."""
        return self.preprocessor(x, y=y, sample_weight=sample_weight)

    def _text_pipeline(self, x, y=None, sample_weight=None, batch_size=None, verbose=0):
        """Raw text -> what Keras takes instead: a preprocessing `tf.data` pipeline for a
        dataset of text, `(inputs, y, sample_weight)` numpy arrays for text in memory
        (`task_inputs.preprocessed_arrays`); None when `x` is encoder inputs already."""
        if isinstance(x, dict):
            return None
        if task_inputs.is_dataset(x):
            spec = x.element_spec
            features = spec[0] if isinstance(spec, tuple) else spec
            if isinstance(features, dict) or self.preprocessor is None:
                return None
        elif not task_inputs.is_text(x):
            return None
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} got raw text but has no preprocessor: "
                             "pass preprocessor=BertPreprocessor.from_preset(...) or token ids.")
        if task_inputs.is_dataset(x):
            if y is not None or sample_weight is not None or batch_size is not None:
                raise ValueError("When x is a tf.data.Dataset, do not pass y, sample_weight or "
                                 "batch_size: the dataset yields batches of (text, label).")
            return task_inputs.text_dataset(self.preprocess_samples, x)
        return task_inputs.preprocessed_arrays(self.preprocess_samples, x, y, sample_weight,
                                               verbose=verbose)

    def keras_data(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False,
                   verbose=0, bucket_boundaries=None, group_by_length=0, sort_by_length=False):
        """`(x, y, sample_weight, batch_size, shuffle)` for Keras' own fit / evaluate /
        predict, with raw text preprocessed (see `_text_pipeline`) and, with
        `bucket_boundaries` ("auto" or lengths), batched in length buckets
        (text/length_buckets.py): shuffled in groups of `group_by_length` length-sorted
        batches, or, with `sort_by_length` (evaluate, predict), all rows sorted by length."""
        return self._keras_rows(x, y, sample_weight, batch_size, shuffle, verbose,
                                bucket_boundaries, group_by_length, sort_by_length)[:5]

    def _keras_rows(self, x, y, sample_weight, batch_size, shuffle, verbose,
                    bucket_boundaries, group_by_length, sort_by_length):
        """`keras_data`'s five values and the order of the rows in them: None when they
        keep the caller's, else the caller's index of each row (predict puts its outputs
        back with it)."""
        pipeline = self._text_pipeline(x, y, sample_weight, batch_size, verbose=verbose)
        if pipeline is None:
            if task_inputs.is_dataset(x):
                shuffle = False  # a dataset shuffles itself; Keras would only warn
            return x, y, sample_weight, batch_size, shuffle, None
        if task_inputs.is_dataset(pipeline):
            boundaries = self._boundaries(pipeline.element_spec, bucket_boundaries)
            if boundaries is not None:
                pipeline = pipeline.map(
                    lambda *batch: length_buckets.cut_to_bucket(
                        batch if len(batch) > 1 else batch[0], boundaries,
                        self.labels_per_token))
            return pipeline, None, None, None, False, None
        inputs, labels, weights = pipeline
        batch_size = batch_size or 32
        boundaries = self._boundaries(inputs, bucket_boundaries)
        if boundaries is None:
            return inputs, labels, weights, batch_size, shuffle, None
        rows = tuple(part for part in (inputs, labels, weights) if part is not None)
        order = None
        if sort_by_length:  # evaluate / predict: sorted by length, so batches cut the most
            order = np.argsort(length_buckets.row_lengths(inputs).numpy(), kind="stable")
            rows = tuple(keras.tree.map_structure(lambda a: a[order], part) for part in rows)
        batches = length_buckets.bucketed_batches(
            length_buckets.rows_dataset(rows), batch_size, boundaries, shuffle=shuffle,
            group_batches=group_by_length or 0, per_token_labels=self.labels_per_token)
        return batches, None, None, None, False, order

    def _boundaries(self, inputs, bucket_boundaries):
        """The bucket lengths for inputs whose token axis is `inputs["token_ids"]`'s last,
        or None (fixed length)."""
        if bucket_boundaries is None:
            return None
        if isinstance(inputs, tuple):
            inputs = inputs[0]
        length = inputs["token_ids"].shape[-1]
        if length is None:  # a dataset of text mapped to unknown lengths: nothing to cut
            return None
        return length_buckets.bucket_boundaries(int(length), bucket_boundaries)

    def _validation_data(self, validation_data, batch_size, bucket_boundaries=None):
        if validation_data is None:
            return None
        if task_inputs.is_dataset(validation_data):
            x, y, sample_weight, batch_size = validation_data, None, None, None
        else:
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(validation_data)
        data = self.keras_data(x, y, sample_weight, batch_size,
                               bucket_boundaries=bucket_boundaries, sort_by_length=True)
        if data[0] is x:  # not raw text: Keras takes it as it is
            return validation_data
        if task_inputs.is_dataset(data[0]):
            return data[0]
        return tuple(part for part in data[:3] if part is not None)

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, validation_data=None,
            shuffle=True, bucket_boundaries="auto",
            group_by_length=length_buckets.DEFAULT_GROUP_BATCHES, **kwargs):
        """`keras.Model.fit`; with a preprocessor, `x` may be raw text (see the class doc),
        batched in length buckets (`bucket_boundaries`: "auto", a list of lengths, or None
        for fixed-length batches) with rows of similar length grouped (`group_by_length`
        batches per group; 0: plain shuffle)."""
        x, y, sample_weight, batch_size, validation_data, shuffle = self.fit_inputs(
            x, y, sample_weight, batch_size, validation_data, shuffle,
            kwargs.get("validation_split"), kwargs.get("verbose", "auto"),
            bucket_boundaries, group_by_length)
        build_optimizer_before_tracing(self)
        return super().fit(x, y, batch_size=batch_size, sample_weight=sample_weight,
                           validation_data=validation_data, shuffle=shuffle, **kwargs)

    def fit_inputs(self, x, y, sample_weight, batch_size, validation_data, shuffle,
                   validation_split=None, verbose=0, bucket_boundaries=None,
                   group_by_length=0):
        """`fit`'s data with raw text preprocessed (also what a model that trains this task,
        such as `BertDistiller`, feeds to its own fit)."""
        if validation_split and task_inputs.is_text(x):
            raise ValueError("validation_split does not work on raw text (it would split "
                             "windows of one example apart); pass validation_data=(texts, "
                             "labels) instead.")
        x, y, sample_weight, batch_size, shuffle = self.keras_data(
            x, y, sample_weight, batch_size, shuffle, verbose=verbose,
            bucket_boundaries=bucket_boundaries, group_by_length=group_by_length)
        return (x, y, sample_weight, batch_size,
                self._validation_data(validation_data, batch_size, bucket_boundaries), shuffle)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None,
                 bucket_boundaries="auto", **kwargs):
        """`keras.Model.evaluate`; raw text is batched in length buckets as in `fit`."""
        x, y, sample_weight, batch_size, _ = self.keras_data(
            x, y, sample_weight, batch_size, verbose=kwargs.get("verbose", "auto"),
            bucket_boundaries=bucket_boundaries, sort_by_length=True)
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight,
                                **kwargs)

    def predict(self, x, batch_size=None, bucket_boundaries="auto", **kwargs):
        """`keras.Model.predict`; raw text is batched in length buckets as in `fit`, unless
        the task's outputs have a token axis (their batches must line up)."""
        if self.outputs_per_token:
            bucket_boundaries = None
        x, _, _, batch_size, _, order = self._keras_rows(
            x, None, None, batch_size, False, kwargs.get("verbose", "auto"),
            bucket_boundaries, 0, sort_by_length=True)
        outputs = super().predict(x, batch_size=batch_size, **kwargs)
        if order is None:
            return outputs
        inverse = np.argsort(order)  # row i of the sorted batches is the caller's order[i]
        return keras.tree.map_structure(lambda array: array[inverse], outputs)

    def _predict_text(self, text_path, columns, batch_size=None, verbose="auto",
                      chunk_size=256, **options):
        """Runs a task's text path (`text_path(preprocessor, run_model, *columns, **options)`,
        the function its export serves) over raw-text `columns` in chunks of examples; returns
        {output: numpy [N, ...]}, strings decoded to str."""
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} got raw text but has no preprocessor; "
                             "build it with one (from_preset does) or pass encoder inputs.")
        columns = [task_inputs.as_string_array(column) for column in columns]
        count = len(columns[0])
        if any(len(column) != count for column in columns):
            raise ValueError(f"{type(self).__name__}.predict: the text inputs have different "
                             f"lengths {[len(c) for c in columns]}; give one row per example.")

        def run_model(inputs):
            inputs = {name: np.asarray(value) for name, value in inputs.items()}
            outputs = keras.Model.predict(self, inputs, batch_size=batch_size or 32, verbose=0)
            # named as the serving functions see them (graph_model_call)
            return outputs if isinstance(outputs, dict) else {"logits": outputs}

        show = verbose == 1 or (verbose == "auto" and count > chunk_size)
        progress = keras.utils.Progbar(count, verbose=1) if show else None
        parts = []
        for begin in range(0, max(count, 1), chunk_size):
            chunk = [column[begin:begin + chunk_size] for column in columns]
            outputs = text_path(self.preprocessor, run_model, *chunk, **options)
            parts.append({name: np.asarray(value) for name, value in outputs.items()})
            if progress is not None:
                progress.add(len(chunk[0]))
        return {name: task_inputs.decode_strings(_concatenate_rows([p[name] for p in parts]))
                for name in parts[0]}

    def head_outputs(self, encoder_outputs, inputs):
        """The task's outputs from the encoder's ({"sequence_output", "pooled_output"}) and
        the task's `inputs`: the head alone, the same layers as the model's graph. Lets a
        caller that runs the encoder itself (distillation reads its hidden states) finish
        the forward pass without running the encoder twice."""
        raise NotImplementedError(
            f"{type(self).__name__} has no head_outputs; distill it on its logits only "
            "(hidden_weight=0, attention_weight=0).")

    def call_with_encoder(self, inputs, run_encoder):
        """The model's inference outputs with the encoder's pass done by `run_encoder`
        (encoder inputs -> encoder outputs), through the same head layers as the graph: how
        an export runs the task on the encoder's serving graph."""
        encoded = run_encoder({name: inputs[name] for name in ENCODER_INPUTS})
        return self.head_outputs(encoded, inputs)

    def serving_signatures(self, **options):
        """{signature name: export.signature.ServingSignature} with "serving_default" (raw
        text in) first; `options` are the task's answer options. Each task defines it."""
        raise NotImplementedError(
            f"{type(self).__name__} declares no serving signatures; export its encoder "
            "(export_saved_model(model.encoder, preprocessor=...)) or a task model instead.")

    # === Training set-up ===

    def enable_lora(self, rank, alpha=None):
        """Parameter-efficient fine-tuning: LoRA adapters of rank `rank` on the encoder's
        attention and feed-forward projections (`BertEncoder.enable_lora`); only they and
        the task head train. Re-compile afterwards if the model was already trained, so the
        optimizer sees the new trainable weights.

        >>> from keras_bert_suite import BertClassifier
        >>> classifier = BertClassifier.from_preset(
        ...     "minilm_l6_h384_uncased", num_classes=2, sequence_length=32)
        >>> classifier.enable_lora(8)
        >>> import math
        >>> trained = sum(math.prod(v.shape) for v in classifier.trainable_weights)
        >>> total = sum(math.prod(v.shape) for v in classifier.weights)
        >>> round(100 * trained / total, 2)  # percent of the weights that train
        1.29
        """
        self.encoder.enable_lora(rank, alpha)
        if self.optimizer is not None and self.optimizer.built:
            logger.info("LoRA enabled after the optimizer was built: compile() again.")

    def default_optimizer(self):
        return create_optimizer("adamw", learning_rate=DEFAULT_LEARNING_RATE)

    def default_loss(self):
        return None

    def default_metrics(self):
        return None

    def default_weighted_metrics(self):
        return None

    def default_loss_weights(self):
        return None

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto",
                **kwargs):
        """`keras.Model.compile`; every "auto" argument gets this task's default.

        Optimizer: `create_optimizer("adamw", learning_rate=5e-5)` (constant rate, weight
        decay 0.01 except LayerNorm/bias, global clipnorm 1.0, as BERT fine-tuned).
        """
        super().compile(**compile_arguments(self, optimizer, loss, metrics, weighted_metrics,
                                            kwargs))

    # === Presets and serialization ===

    # Encoder config values a task needs (BertFeatureExtractor wants hidden states).
    preset_encoder_overrides = {}

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, preprocessor="auto",
                    encoder_overrides=None, **task_arguments):
        """The task from `preset`, as KerasHub's `Task.from_preset`.

        `preset` is anything `BertEncoder.from_preset` takes. A directory written by this
        class's `save_to_preset` comes back whole (fine-tuned head, preprocessor, label
        names) unless `task_arguments` are given; otherwise the encoder (and its weights)
        comes from `preset` and the head is new. `preprocessor="auto"` builds the task's
        preprocessor from the preset's vocabulary with `sequence_length` (the task's default
        when None); pass None for none. `encoder_overrides` go to the encoder (e.g.
        `{"dropout": 0.0}`), `task_arguments` to the task (e.g. `num_classes=2`);
        `lora_rank=` (and `lora_alpha=`) load the weights, then `enable_lora`.
        """
        lora = {key: task_arguments.pop(key) for key in ("lora_rank", "lora_alpha")
                if task_arguments.get(key) is not None}
        saved = _saved_task(preset, cls)
        if saved is not None and not task_arguments and not encoder_overrides:
            task = _load_saved_task(preset, saved, load_weights, sequence_length, preprocessor)
            if lora and task.encoder.lora_rank is None:
                task.enable_lora(lora["lora_rank"], lora.get("lora_alpha"))
            return task
        if saved is not None:
            logger.info("%s holds a saved %s; building a new head because task arguments "
                        "were given.", preset, saved["class_name"])
        overrides = {**cls.preset_encoder_overrides, **(encoder_overrides or {}), **lora}
        if is_auto(preprocessor):
            preprocessor = cls.preprocessor_class.from_preset(
                preset, sequence_length=sequence_length or cls.default_sequence_length)
        return cls._from_checkpoint(preset, load_weights, overrides, preprocessor,
                                    task_arguments)

    @classmethod
    def _from_checkpoint(cls, preset, load_weights, encoder_overrides, preprocessor,
                         task_arguments):
        """The task with its encoder from `preset`, and its head too when the checkpoint is
        this task fine-tuned elsewhere (transformers' BertFor*, KerasHub's
        BertTextClassifier) and `task_arguments` agree with it; else a new head."""
        checkpoint, encoder = cls._checkpoint_and_encoder(preset, load_weights,
                                                          encoder_overrides)
        head = checkpoint.task_head
        if head is None or head["task"] != cls.__name__:
            return cls(encoder, preprocessor=preprocessor, **task_arguments)
        units = head["kernel"].shape[1]
        if ("num_classes" in inspect.signature(cls.__init__).parameters
                and task_arguments.get("num_classes", units) == units):
            task_arguments = {"num_classes": units, "label_names": head["label_names"],
                              **task_arguments}
        task = cls(encoder, preprocessor=preprocessor, **task_arguments)
        dense = task.head_layer
        if tuple(dense.kernel.shape) != head["kernel"].shape:
            logger.info("%s holds a %d-unit %s head; num_classes=%s asks for another: the "
                        "head is new.", preset, units, cls.__name__,
                        task_arguments.get("num_classes"))
            return task
        dense.kernel.assign(head["kernel"])
        dense.bias.assign(head["bias"])
        return task

    @staticmethod
    def _checkpoint_and_encoder(preset, load_weights, encoder_overrides):
        """(the checkpoint of `preset`, read once, and the BertEncoder built from it)."""
        from keras_bert_suite.presets import resolve_checkpoint
        from keras_bert_suite.models.from_checkpoint import encoder_from_checkpoint

        checkpoint = resolve_checkpoint(preset, load_weights=load_weights)
        return checkpoint, encoder_from_checkpoint(
            BertEncoder, checkpoint, preset, load_weights, **encoder_overrides)

    def _load_heads(self, heads, weights, preset):
        """Assigns each of `heads` ({head's name: its variables by canonical name}) from a
        checkpoint's `weights` where the checkpoint has that head; a head it lacks stays
        random, with a warning."""
        for head, variables in heads.items():
            if any(name in weights for name in variables):
                weight_names.assign(variables, weights,
                                    owner=f"{type(self).__name__} {head} head")
            else:
                logger.warning("Preset '%s' has no %s head weights: that head is randomly "
                               "initialised.", preset, head)

    def preset_weights(self):
        """{canonical weight name: variable} written to the preset's model.weights.npz."""
        return self.encoder.weight_map()

    def save_to_preset(self, directory, vocabulary=None, lowercase=None):
        """Writes a preset directory: the encoder preset (config.json, model.weights.npz,
        vocab.txt: `BertEncoder.from_preset` and other tasks read it) plus task.json (this
        task's config, head and preprocessor included) and task.weights.h5, so
        `type(self).from_preset(directory)` returns this task as it is now. The vocabulary
        is the preprocessor's unless `vocabulary` (a path, a token list or a tokenizer) is
        given. `directory` may be any path tf.io.gfile reaches (gs://bucket/preset): the
        preset is written locally, then uploaded."""
        from keras_bert_suite.checkpoints import preset_dir
        from keras_bert_suite import storage

        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        vocabulary = vocabulary if vocabulary is not None else tokenizer
        if lowercase is None:
            lowercase = getattr(vocabulary, "lowercase", getattr(tokenizer, "lowercase", True))
        with storage.local_directory(directory) as local:
            preset_dir.save(local, self.encoder.get_config(), self.preset_weights(), vocabulary,
                            lowercase)
            with open(os.path.join(local, TASK_CONFIG_FILE), "w") as f:
                json.dump(keras.saving.serialize_keras_object(self), f)
            keras.saving.save_weights(self, os.path.join(local, TASK_WEIGHTS_FILE),
                                      objects_to_skip=_optimizer_of(self))
        return directory


def _concatenate_rows(arrays):
    """Concatenates chunks of rows; [rows, width, ...] chunks of different widths are padded
    (with b"" or 0) to the widest first."""
    if arrays[0].ndim < 2:
        return np.concatenate(arrays)
    width = max(array.shape[1] for array in arrays)
    padded = []
    for array in arrays:
        full = np.full((array.shape[0], width) + array.shape[2:],
                       b"" if array.dtype == object else 0, dtype=array.dtype)
        full[:, :array.shape[1]] = array
        padded.append(full)
    return np.concatenate(padded)


def _optimizer_of(model):
    # keras.saving.save_weights / load_weights leave these objects out (`objects_to_skip`, as
    # KerasHub's task weights): a preset carries the model's weights, not a training run's
    # optimizer state.
    return [model.optimizer] if getattr(model, "optimizer", None) is not None else None


def _saved_task(preset, cls):
    """The task.json of a preset directory saved from `cls` (or a subclass), else None."""
    path = os.path.join(os.fspath(preset), TASK_CONFIG_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    saved_class = keras.saving.get_registered_object(saved.get("registered_name", ""))
    if saved_class is None or not issubclass(saved_class, cls):
        return None
    return saved


def _load_saved_task(preset, saved, load_weights, sequence_length, preprocessor):
    task = keras.saving.deserialize_keras_object(saved)
    if load_weights:
        keras.saving.load_weights(task, os.path.join(os.fspath(preset), TASK_WEIGHTS_FILE),
                                  objects_to_skip=_optimizer_of(task))
    if preprocessor is None:
        task.preprocessor = None
    elif not is_auto(preprocessor):
        task.preprocessor = preprocessor
    elif sequence_length is not None and task.preprocessor is not None:
        config = task.preprocessor.get_config()
        config["sequence_length"] = sequence_length
        task.preprocessor = type(task.preprocessor).from_config(config)
    return task


def freeze_unused_pooler(encoder):
    """Heads that read `sequence_output` leave the [CLS] pooler without a gradient; freezing
    it (as transformers' `add_pooling_layer=False` drops it) spares Keras' "Gradients do not
    exist" warning and the optimizer's moments for it. The encoder object is shared, so a
    classifier later built on the same encoder finds its pooler frozen too."""
    encoder.pooler.trainable = False


def check_num_classes(num_classes, minimum=1, what="num_classes"):
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {num_classes!r}.")


def check_label_names(label_names, num_classes):
    if label_names is None:
        return None
    label_names = [str(name) for name in label_names]
    if len(label_names) != num_classes:
        raise ValueError(f"label_names has {len(label_names)} names for num_classes="
                         f"{num_classes}; give one name per class.")
    return label_names


class LabelledHeadTask(BertTask):
    """A task whose head is dropout -> Dense(num_classes) with optional label names (the
    classifier's and the token classifier's): what they keep and serialize alike."""

    def keep_head(self, num_classes, dropout, label_names, dropout_layer, head):
        """Called at the end of __init__, once the functional graph exists."""
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = label_names
        self.classifier_dropout = dropout_layer
        self.classifier_head = head
        self.compile()

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes,
                "dropout": self.dropout, "label_names": self.label_names}

