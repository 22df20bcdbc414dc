"""ReplacedTokenDetector: ELECTRA's discriminator, an encoder that tells for every token
whether it is the original or a replacement."""

import keras

from keras_bert_suite.layers.replaced_token_head import ReplacedTokenHead
from keras_bert_suite.models import weight_names
from keras_bert_suite.models.encoder import BertEncoder
from keras_bert_suite.checkpoints.task_heads import REPLACED_TOKEN, CheckpointForm
from keras_bert_suite.tasks.head_parts import encoder_inputs, freeze_unused_pooler, resolve_encoder
from keras_bert_suite.tasks.task import BertTask
from keras_bert_suite.training.losses import ReplacedTokenLoss
from keras_bert_suite.training.metrics import ReplacedTokenAccuracy
from keras_bert_suite.training.optimizers import create_optimizer


def _real_tokens(x, sample_weight):
    """`sample_weight`, or by default the inputs' padding mask: padding counts for nothing
    (and every real token once, in a packed row's instances 2, 3, ... too)."""
    if sample_weight is None and isinstance(x, dict) and "padding_mask" in x:
        return keras.ops.cast(keras.ops.greater(x["padding_mask"], 0), "float32")
    return sample_weight


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ReplacedTokenDetector(BertTask):
    """Encoder inputs -> logits [B, T], positive where a token replaced the original (ELECTRA's
    replaced-token detection; transformers' `ElectraForPreTraining`).

    Labels [B, T]: 1 where the token was replaced, 0 where it is the original. The default
    loss is sigmoid cross-entropy averaged over real tokens (padding, from the inputs'
    padding_mask, counts for nothing), as ELECTRA's discriminator loss; the metric is the
    per-token accuracy. The discriminator of a trained ELECTRA fine-tunes as an encoder
    (`detector.encoder`).

    Args:
        encoder (or backbone): a `BertEncoder` (an ELECTRA discriminator's, usually).
        preprocessor: optional text preprocessor kept with the model.

    Example (a tiny random ELECTRA-shaped encoder; token 7 replaced in the first row):
    >>> import numpy as np
    >>> detector = ReplacedTokenDetector(BertEncoder(
    ...     vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
    ...     embedding_dim=4, pooler_activation="gelu"))
    >>> x = {"token_ids": np.array([[2, 7, 9, 3], [2, 5, 3, 0]], "int32"),
    ...      "segment_ids": np.zeros((2, 4), "int32"),
    ...      "padding_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]], "int32")}
    >>> history = detector.fit(x, np.array([[0, 1, 0, 0], [0, 0, 0, 0]]), verbose=0)
    >>> detector.predict(x, verbose=0).shape  # one logit per token
    (2, 4)
    """

    task_name = "replaced_token_detector"
    head_layer_name = "replaced_token_head"
    # Elsewhere: ElectraForPreTraining (its head travels in `weight_map`); no serving
    # signatures: export its encoder.
    checkpoint_form = CheckpointForm(transformers=REPLACED_TOKEN)

    def __init__(self, encoder=None, preprocessor=None, backbone=None, **kwargs):
        encoder = resolve_encoder(encoder, backbone)
        head = ReplacedTokenHead(encoder.hidden_dim, activation=encoder.activation,
                                 initializer_range=encoder.initializer_range,
                                 dtype=encoder.layer_dtype_policy, name="replaced_token_head")

        # === Functional graph ===
        inputs = encoder_inputs()
        logits = head(encoder(inputs)["sequence_output"])  # [B, T]
        super().__init__(inputs, logits, encoder, preprocessor, **kwargs)
        freeze_unused_pooler(encoder)  # the head reads sequence_output only
        self.replaced_token_head = head
        self.compile()

    def head_outputs(self, encoder_outputs, inputs=None):
        return self.replaced_token_head(encoder_outputs["sequence_output"])

    def default_optimizer(self):
        return create_optimizer("adamw")  # pretraining's constant 1e-4

    def default_loss(self):
        return ReplacedTokenLoss()

    def default_weighted_metrics(self):
        return [ReplacedTokenAccuracy()]

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return super().compute_loss(x=x, y=y, y_pred=y_pred,
                                    sample_weight=_real_tokens(x, sample_weight),
                                    training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(x, y, y_pred, sample_weight=_real_tokens(x, sample_weight))

    # === Weights by name ===

    def weight_map(self):
        """The encoder's weight names plus `rtd/...`."""
        return {**self.encoder.weight_map(),
                **weight_names.replaced_token_head_variables(self.replaced_token_head)}

    def preset_weights(self):
        return self.weight_map()  # the head travels with the encoder

    @classmethod
    def _from_checkpoint(cls, preset, load_weights, encoder_overrides, preprocessor,
                         task_arguments):
        checkpoint, encoder, _ = cls._checkpoint_and_encoder(preset, load_weights,
                                                             encoder_overrides)
        detector = cls(encoder, preprocessor=preprocessor, **task_arguments)
        if checkpoint.weights is not None:
            detector._load_heads({"replaced-token": weight_names.replaced_token_head_variables(
                detector.replaced_token_head)}, checkpoint.weights, preset)
        return detector
