"""The parts a task model's head is built from: the encoder argument checked, symbolic
encoder inputs, BERT's fresh head layers, argument checks."""

import keras

from keras_bert_suite.layers.dropout import BertDropout
from keras_bert_suite.layers.initializer import BertInitializer
from keras_bert_suite.models.encoder import BertEncoder
from keras_bert_suite.names import ENCODER_INPUTS


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


def token_rows(encoder, encoder_outputs):
    """What a token-level head (tags, spans) reads, [B, T, H]: the last layer's rows, or each
    of them through the pooler where the block kind says so
    (`EncoderPieces.tokens_through_pooler`: ModernBERT's prediction head on every token)."""
    rows = encoder_outputs["sequence_output"]
    if encoder.block_kind.encoder.tokens_through_pooler:
        return encoder.pooler(rows)
    return rows


def freeze_unused_pooler(encoder):
    """Heads that read `token_rows` leave the [CLS] pooler without a gradient unless the
    rows go through it; freezing it (as transformers' `add_pooling_layer=False` drops it)
    spares Keras' "Gradients do not exist" warning and the optimizer's moments for it. The
    encoder object is shared, so a classifier later built on the same encoder finds its
    pooler frozen too."""
    if not encoder.block_kind.encoder.tokens_through_pooler:
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
