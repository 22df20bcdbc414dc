"""BertPretrainer: the encoder plus BERT's two pretraining heads (masked LM, next sentence)."""

import numbers

import keras
from keras import ops

from keras_bert_suite.layers import packed_rows
from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.layers.masked_lm_head import MaskedLMHead
from keras_bert_suite.models import weight_names
from keras_bert_suite.models.encoder import BertEncoder
from keras_bert_suite.names import ENCODER_INPUTS, MASK_POSITIONS
from keras_bert_suite.checkpoints.task_heads import PRETRAINING, CheckpointForm
from keras_bert_suite.tasks.head_parts import freeze_unused_pooler, resolve_encoder
from keras_bert_suite.tasks.model_base import is_auto
from keras_bert_suite.tasks.task import BertTask
from keras_bert_suite.training.losses import MaskedLMLoss
from keras_bert_suite.training.metrics import MaskedLMAccuracy, MaskedLMPerplexity
from keras_bert_suite.training.optimizers import create_optimizer
from keras_bert_suite.layers.initializer import BertInitializer

# Label names in `y` / `sample_weight` -> the output each one is scored against.
LABEL_OUTPUTS = {"mlm_labels": "mlm_logits", "nsp_labels": "nsp_logits"}


def _link_perplexity(loss, weighted_metrics):
    """Lets the MLM perplexity reuse the loss's cross-entropy instead of a second softmax.

    Done on every compile, so a model reloaded from `.keras` (compiled from its saved
    loss and metric objects) is linked again.
    """
    mlm_loss = loss.get("mlm_logits") if isinstance(loss, dict) else None
    metrics = (weighted_metrics.get("mlm_logits")
               if isinstance(weighted_metrics, dict) else None)
    if not isinstance(mlm_loss, MaskedLMLoss) or not isinstance(metrics, (list, tuple)):
        return
    for metric in metrics:
        if isinstance(metric, MaskedLMPerplexity):
            mlm_loss.link_perplexity(metric)
            return  # one loss feeds one metric; any other computes its own


def _pretraining_outputs(masked_lm_head, next_sentence_head, gathered, pooled):
    """{"mlm_logits": [B, P, V]} from the rows at the masked positions, and "nsp_logits"
    [B, 2] (packed rows: [B, K, 2]) from the pooled output when there is an NSP head."""
    outputs = {"mlm_logits": masked_lm_head(gathered)}
    if next_sentence_head is not None:
        outputs["nsp_logits"] = next_sentence_head(pooled)
    return outputs


def check_pretraining_inputs(model, inputs):
    """A pretraining model's inputs: the encoder's plus `mask_positions`, from the data
    pipeline (BertPretrainer, ElectraPretrainer)."""
    expected = ENCODER_INPUTS + (MASK_POSITIONS,)
    if not isinstance(inputs, dict) or set(inputs) != set(expected):
        got = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        raise ValueError(f"{type(model).__name__} takes a dict with keys {list(expected)} (mask "
                         f"positions from the data pipeline); got {got}.")


def _check_max_instances(max_instances_per_row):
    if max_instances_per_row is not None and (
            isinstance(max_instances_per_row, bool)
            or not isinstance(max_instances_per_row, numbers.Integral)
            or max_instances_per_row < 1):
        raise ValueError(f"max_instances_per_row must be None (one instance per row) or a "
                         f"positive integer (packed rows), got {max_instances_per_row!r}.")


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertPretrainer(BertTask):
    """BERT pretraining: masked-LM and (optionally) next-sentence prediction on an encoder.

    Inputs (a dict): `token_ids`, `segment_ids`, `padding_mask` [B, T] as for `BertEncoder`,
    and `mask_positions` [B, P], the positions to predict (pad with any valid index, e.g. 0).
    Outputs (a dict): `mlm_logits` [B, P, V], decoded at `mask_positions` only, and, with
    `next_sentence_prediction=True`, `nsp_logits` [B, 2] (label 1 = "B is a random segment",
    as in BERT's data).

    Labels for `fit`/`evaluate`, a dict (the original BERT TFRecord features
    `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels` under our names):
        mlm_labels   [B, P] token ids at `mask_positions`
        mlm_weights  [B, P] 1.0 for a real prediction, 0.0 for a padded prediction slot
                     (optional: without it every slot counts)
        nsp_labels   [B] 0 = B follows A, 1 = random (only with next_sentence_prediction)
    The weights may instead come as `sample_weight={"mlm_labels": weights}` (handy in a
    tf.data pipeline); for NumPy inputs Keras wants one sample weight per label, which is
    why they travel inside `y` by default.

    Packed rows (`max_instances_per_row=K`): several instances share a row, `padding_mask`
    numbering them 1, 2, ... (0 = padding; the encoder keeps them apart, see
    `keras_bert_suite.layers.packed_rows`), `mask_positions` being row positions. The NSP
    (ALBERT: sentence order) head then reads each instance's first token: `nsp_logits` is
    [B, K, 2], with labels `nsp_labels` [B, K] and `nsp_weights` [B, K] (1.0 for an instance,
    0.0 for an empty slot); the NSP loss is the mean over instances. So every instance's
    losses are those it has alone in a row. `tasks/pretrainer/data/packing.py` packs them.

    A task like the others (`tasks/task.py`): `encoder=` or `backbone=`, compiled on
    construction, `from_preset` / `save_to_preset`. `compile()` defaults: AdamW as BERT (`training.create_optimizer`, constant 1e-4 unless an
    optimizer is given), MLM loss = cross-entropy averaged over the real predictions
    (padded slots count for nothing) plus NSP cross-entropy, and weighted metrics logged
    as `mlm_logits_accuracy`, `mlm_logits_perplexity`, `nsp_logits_accuracy` (and
    `mlm_logits_loss`, `nsp_logits_loss` beside the total `loss`).

    Args:
        encoder (or backbone): a `BertEncoder`; the MLM decoder is tied to its token
            embedding.
        preprocessor: optional text preprocessor kept with the model (for export); `fit`
            does not apply it, since pretraining data come masked from the data pipeline.
        next_sentence_prediction: add the NSP head and its output (False = MLM only,
            RoBERTa style).
        max_instances_per_row: None (one instance per row) or K, for packed rows of up to
            K instances.

    Example (one batch of 2 sequences of 8 tokens, 2 masked positions each; real batches come
    from `tasks/pretrainer/`'s instances and masking):
    >>> import numpy as np
    >>> pretrainer = BertPretrainer(BertEncoder.from_preset(
    ...     "bert_tiny_uncased", load_weights=False))
    >>> pretrainer.compile(optimizer=create_optimizer(  # BERT's schedule instead of constant
    ...     learning_rate=1e-4, num_train_steps=10_000, num_warmup_steps=1_000))
    >>> ids = np.array([[101, 2023, 103, 2003, 102, 2204, 103, 102]] * 2, "int32")  # 103 [MASK]
    >>> x = {"token_ids": ids, "segment_ids": np.array([[0] * 5 + [1] * 3] * 2, "int32"),
    ...      "padding_mask": np.ones((2, 8), "int32"),
    ...      "mask_positions": np.array([[2, 6], [2, 6]], "int32")}
    >>> y = {"mlm_labels": np.array([[3185, 3319], [3185, 0]], "int32"),
    ...      "mlm_weights": np.array([[1.0, 1.0], [1.0, 0.0]], "float32"),  # one padded slot
    ...      "nsp_labels": np.array([0, 1], "int32")}
    >>> history = pretrainer.fit(x, y, batch_size=2, verbose=0)
    >>> sorted(history.history)
    ['loss', 'mlm_logits_accuracy', 'mlm_logits_loss', 'mlm_logits_perplexity',
     'nsp_logits_accuracy', 'nsp_logits_loss']
    """

    task_name = "pretrainer"
    # Elsewhere: transformers' {Family}ForPreTraining or ForMaskedLM, KerasHub's BertMaskedLM,
    # Google's `cls/` heads (the heads travel in `weight_map`); no serving signatures:
    # export its encoder.
    checkpoint_form = CheckpointForm(transformers=PRETRAINING, keras_hub="masked_lm",
                                     google_bert=True)

    def __init__(self, encoder=None, preprocessor=None, next_sentence_prediction=True,
                 backbone=None, max_instances_per_row=None, **kwargs):
        _check_max_instances(max_instances_per_row)
        encoder = resolve_encoder(encoder, backbone)
        policy = encoder.layer_dtype_policy
        masked_lm_head = MaskedLMHead(
            encoder.token_embedding, layer_norm_epsilon=encoder.layer_norm_epsilon,
            initializer_range=encoder.initializer_range, activation=encoder.activation,
            use_bias=encoder.block_kind.encoder.mlm_bias, dtype=policy, name="masked_lm_head")
        next_sentence_head = None
        if next_sentence_prediction:
            next_sentence_head = keras.layers.Dense(
                2, kernel_initializer=BertInitializer(
                    stddev=encoder.initializer_range),
                dtype=policy, name="next_sentence_head")

        # === Functional graph ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ENCODER_INPUTS + (MASK_POSITIONS,)}
        # The last layer runs at [CLS] (every instance's, packed) and the masked positions
        # only (encode_at): the heads read nothing else, and those rows are exactly the
        # full encoder's.
        encoder_inputs = {name: inputs[name] for name in ENCODER_INPUTS}
        if max_instances_per_row is None:
            encoded = encoder.encode_at(encoder_inputs, inputs[MASK_POSITIONS])
            gathered, pooled = encoded["gathered_output"], encoded["pooled_output"]
        else:
            starts = packed_rows.instance_starts(inputs["padding_mask"],
                                                 max_instances_per_row)  # [B, K]
            rows = encoder.encode_at(encoder_inputs, ops.concatenate(
                [starts, ops.cast(inputs[MASK_POSITIONS], "int32")], axis=1))["gathered_output"]
            gathered = rows[:, max_instances_per_row:]  # [B, P, H]
            pooled = encoder.pooler(rows[:, :max_instances_per_row])  # [B, K, H]
        outputs = _pretraining_outputs(masked_lm_head, next_sentence_head, gathered, pooled)
        # BertTask names the outputs by their dict keys (sorted, as Keras flattens a dict),
        # so compile()'s loss / metric dicts and the labels line up by those names.
        super().__init__(inputs, outputs, encoder, preprocessor, **kwargs)
        self.next_sentence_prediction = next_sentence_prediction
        self.max_instances_per_row = max_instances_per_row
        self.masked_lm_head = masked_lm_head
        self.next_sentence_head = next_sentence_head
        if not next_sentence_prediction:
            freeze_unused_pooler(encoder)  # nothing reads the pooled output without NSP
        self.compile()

    def head_outputs(self, encoder_outputs, inputs):
        """The heads on a full encoder pass (the graph runs the last layer at the masked
        positions only; those rows are the same)."""
        sequence = encoder_outputs["sequence_output"]
        gathered = gather_rows(sequence, inputs[MASK_POSITIONS])
        pooled = encoder_outputs["pooled_output"]
        if self.max_instances_per_row is not None:
            pooled = self.encoder.pooler(gather_rows(sequence, packed_rows.instance_starts(
                inputs["padding_mask"], self.max_instances_per_row)))  # [B, K, H]
        return _pretraining_outputs(self.masked_lm_head, self.next_sentence_head, gathered,
                                    pooled)

    def _check_inputs(self, inputs):
        check_pretraining_inputs(self, inputs)

    # === Training set-up ===

    def default_optimizer(self):
        return create_optimizer("adamw")  # BERT's pretraining rate, 1e-4, constant

    def default_loss(self):
        # BERT's sum(w · CE) / sum(w): padded prediction slots do not dilute the loss.
        loss = {"mlm_logits": MaskedLMLoss(name="mlm_loss")}
        if self.next_sentence_prediction:
            # Packed: the mean over the instances (nsp_weights 0 on empty slots).
            reduction = ("sum_over_batch_size" if self.max_instances_per_row is None
                         else "mean_with_sample_weight")
            loss["nsp_logits"] = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction=reduction, name="nsp_loss")
        return loss

    def default_weighted_metrics(self):
        # Keras prefixes metric names with the output name when there are several
        # outputs; adding it ourselves for an MLM-only model keeps the logged names
        # the same either way: mlm_logits_accuracy, mlm_logits_perplexity, ...
        mlm_prefix = "" if self.next_sentence_prediction else "mlm_logits_"
        metrics = {"mlm_logits": [MaskedLMAccuracy(name=f"{mlm_prefix}accuracy"),
                                  MaskedLMPerplexity(name=f"{mlm_prefix}perplexity")]}
        if self.next_sentence_prediction:
            metrics["nsp_logits"] = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        return metrics

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto",
                **kwargs):
        """`BertTask.compile`; the perplexity metric reuses the MLM loss's cross-entropy."""
        loss = self.default_loss() if is_auto(loss) else loss
        if is_auto(weighted_metrics):
            weighted_metrics = self.default_weighted_metrics()
        _link_perplexity(loss, weighted_metrics)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                        weighted_metrics=weighted_metrics, **kwargs)

    def labels_by_output(self, y, sample_weight):
        """Re-keys labels and weights from their data names to this model's output names."""
        if y is None:
            return y, sample_weight
        y = dict(y) if isinstance(y, dict) else {"mlm_labels": y}
        weights = dict(sample_weight) if isinstance(sample_weight, dict) else (
            {} if sample_weight is None else {"mlm_labels": sample_weight})
        for name, label in (("mlm_weights", "mlm_labels"), ("nsp_weights", "nsp_labels")):
            if name in y:
                if label in weights:
                    raise ValueError(f"Give the {label} weights once: as y['{name}'] or as "
                                     f"sample_weight['{label}'], not both.")
                weights[label] = y.pop(name)
        outputs = {label: output for label, output in LABEL_OUTPUTS.items()
                   if output in self.output_names}
        if set(y) != set(outputs):
            raise ValueError(
                f"BertPretrainer expects labels {sorted(outputs)} (+ optional 'mlm_weights', "
                f"'nsp_weights') "
                f"with next_sentence_prediction={self.next_sentence_prediction}; got {sorted(y)}.")
        y = {output: y[label] for label, output in outputs.items()}
        if weights:
            sample_weight = {output: weights.get(label) for label, output in outputs.items()}
        return y, sample_weight

    # === Weights by name ===

    def weight_map(self):
        """The encoder's weight names plus `mlm/...` and (with NSP) `nsp/...`."""
        variables = self.encoder.weight_map()
        variables.update(weight_names.masked_lm_head_variables(self.masked_lm_head))
        if self.next_sentence_head is not None:
            variables.update(weight_names.next_sentence_head_variables(self.next_sentence_head))
        return variables

    def load_weight_map(self, weights):
        weight_names.assign(self.weight_map(), weights, owner="BertPretrainer")

    def _load_head_weights(self, weights, preset):
        heads = {"masked LM": weight_names.masked_lm_head_variables(self.masked_lm_head)}
        if self.next_sentence_head is not None:
            heads["next sentence"] = weight_names.next_sentence_head_variables(
                self.next_sentence_head)
        self._load_heads(heads, weights, preset)

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, preprocessor=None,
                    encoder_overrides=None, **task_arguments):
        """`BertTask.from_preset`, and the heads are loaded too when the checkpoint has them
        (transformers' *ForPreTraining / *ForMaskedLM of every family, Google
        `cls/predictions/*` / `cls/seq_relationship/*`, or a preset saved by
        `save_to_preset`); otherwise they start random, with a warning. A checkpoint with a
        masked-LM head decides `next_sentence_prediction` unless it is given: True when it
        has a sentence-pair head (BERT's next sentence, ALBERT's sentence order). No preprocessor
        unless asked for ("auto"): pretraining data come packed and masked from the data
        pipeline."""
        return super().from_preset(preset, load_weights, sequence_length, preprocessor,
                                   encoder_overrides, **task_arguments)

    @classmethod
    def _from_checkpoint(cls, preset, load_weights, encoder_overrides, preprocessor,
                         task_arguments):
        checkpoint, encoder, _ = cls._checkpoint_and_encoder(preset, load_weights,
                                                             encoder_overrides)
        weights = checkpoint.weights or {}
        if "mlm/output_bias" in weights:  # a pretraining checkpoint: its heads, no others
            task_arguments.setdefault("next_sentence_prediction", "nsp/kernel" in weights)
        pretrainer = cls(encoder, preprocessor=preprocessor, **task_arguments)
        if checkpoint.weights is not None:
            pretrainer._load_head_weights(checkpoint.weights, preset)
        return pretrainer

    def preset_weights(self):
        return self.weight_map()  # the heads travel with the encoder

    # === Serialization ===

    def get_config(self):
        return {**super().get_config(), "next_sentence_prediction": self.next_sentence_prediction,
                "max_instances_per_row": self.max_instances_per_row}

