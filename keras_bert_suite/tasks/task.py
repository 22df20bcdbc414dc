"""BertTask: what the task models share (KerasHub's Task lifecycle); what each task declares
is tasks/contract.py, the raw-text plumbing tasks/text_batches.py, the presets
tasks/task_presets.py.

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

import logging

import keras

from keras_bert_suite.names import ENCODER_INPUTS
from keras_bert_suite.tasks.contract import TaskContract
from keras_bert_suite.tasks.head_parts import resolve_encoder
from keras_bert_suite.tasks.model_base import BertModelBase, compile_arguments
from keras_bert_suite.tasks.task_presets import TaskPresets
from keras_bert_suite.tasks.text_batches import TextBatching, TrainsOnTaskText
from keras_bert_suite.text import task_inputs

logger = logging.getLogger(__name__)


class BertTask(TaskContract, TaskPresets, TrainsOnTaskText, TextBatching, BertModelBase,
               keras.Model):
    """Base class of the task models: an encoder, a head and an optional preprocessor.

    Subclasses build their functional graph and call `super().__init__(inputs, outputs,
    encoder, preprocessor)`, and declare what tasks/contract.py lists (`task_name`,
    `serving_signatures`, `head_outputs`, `checkpoint_form`, compile defaults, ...).
    """

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

    def call_with_encoder(self, inputs, run_encoder):
        """The model's inference outputs with the encoder's pass done by `run_encoder`
        (encoder inputs -> encoder outputs), through the same head layers as the graph: how
        an export runs the task on the encoder's serving graph."""
        encoded = run_encoder({name: inputs[name] for name in ENCODER_INPUTS})
        return self.head_outputs(encoded, inputs)

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

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto",
                **kwargs):
        """`keras.Model.compile`; every "auto" argument gets this task's default.

        Optimizer: `create_optimizer("adamw", learning_rate=5e-5)` (constant rate, weight
        decay 0.01 except LayerNorm/bias, global clipnorm 1.0, as BERT fine-tuned).
        """
        super().compile(**compile_arguments(self, optimizer, loss, metrics, weighted_metrics,
                                            kwargs))
