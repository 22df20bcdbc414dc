"""BertFeatureExtractor: contextual token and sentence embeddings from a (frozen) encoder."""

import keras
from keras import ops

from keras_bert_suite.layers.scalar_mix import ScalarMix
from keras_bert_suite.checkpoints.task_heads import CheckpointForm
from keras_bert_suite.tasks.head_parts import encoder_inputs, freeze_unused_pooler, resolve_encoder
from keras_bert_suite.tasks.task import BertTask
from keras_bert_suite.tasks.feature_extractor.serving import serving_signatures

# The feature-based rows of the BERT paper's CoNLL-2003 table (section 5.3), plus ELMo's mix.
# "all" and "last four" count transformer layers, not the embedding output.
LAYER_CHOICES = ("embeddings", "last_hidden", "second_to_last", "sum_all", "sum_last_four",
                 "concat_last_four", "scalar_mix")
POOLING_CHOICES = ("cls", "mean")
# Fewest transformer layers each choice needs.
_MIN_LAYERS = {"second_to_last": 2, "sum_last_four": 4, "concat_last_four": 4}


def _token_features(layers, hidden_states, scalar_mix):
    """hidden_states [B, L + 1, T, H] (embedding output first) -> [B, T, D]."""
    if layers == "embeddings":
        return hidden_states[:, 0]
    if layers == "second_to_last":
        return hidden_states[:, -2]
    if layers == "sum_all":
        return ops.sum(hidden_states[:, 1:], axis=1)
    if layers == "sum_last_four":
        return ops.sum(hidden_states[:, -4:], axis=1)
    if layers == "concat_last_four":  # [B, T, 4H], layers in order L-3, L-2, L-1, L
        return ops.concatenate([hidden_states[:, i] for i in (-4, -3, -2, -1)], axis=-1)
    return scalar_mix(hidden_states[:, 1:])  # "scalar_mix"


def _pool(tokens, padding_mask, pooling):
    if pooling == "cls":
        return tokens[:, 0]  # the [CLS] vector itself (not the tanh pooler)
    mask = ops.cast(padding_mask, tokens.dtype)[:, :, None]  # [B, T, 1]
    count = ops.maximum(ops.sum(mask, axis=1), 1.0)  # [B, 1]
    return ops.sum(tokens * mask, axis=1) / count  # mean over real tokens only


def _features(encoded, padding_mask, layers, pooling, normalize, scalar_mix):
    if layers == "last_hidden":
        tokens = encoded["sequence_output"]  # [B, T, H]
    else:
        tokens = _token_features(layers, encoded["hidden_states"], scalar_mix)  # [B, T, D]
    sentence = _pool(tokens, padding_mask, pooling)  # [B, D]
    if normalize:
        sentence = ops.normalize(sentence, axis=-1)
    return {"token_embeddings": tokens, "sentence_embedding": sentence}


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertFeatureExtractor(BertTask):
    """Outputs {"token_embeddings": [B, T, D], "sentence_embedding": [B, D]}.

    Token features come from the layers the BERT paper compared for feature-based NER:
    `layers` = "embeddings" (embedding output), "last_hidden", "second_to_last",
    "sum_all" (sum of the L layer outputs), "sum_last_four", "concat_last_four" (D = 4H)
    or "scalar_mix" (ELMo's learned softmax weights and gamma over the L layer outputs).
    The sentence embedding pools them: "cls" (the [CLS] position) or "mean" (over real
    tokens, as sentence-transformers' all-MiniLM-L6-v2 does), L2-normalised when
    `normalize=True` (cosine similarity = dot product, for semantic search).

    Every choice but "last_hidden" reads the encoder's `hidden_states`, so the encoder
    must be built with `return_hidden_states=True` (`from_preset` does that). Freeze the
    encoder (`encoder.trainable = False`) for the paper's feature-based setting.

    Args:
        encoder (or backbone): a `BertEncoder`.
        layers: one of `LAYER_CHOICES`. (Stored as `feature_layers`: Keras models already
            have a `layers` attribute.)
        pooling: "cls" or "mean".
        normalize: L2-normalise `sentence_embedding`.
        preprocessor: optional `BertPreprocessor`; `predict(texts)` then takes raw text.

    Example (real all-MiniLM-L6-v2 weights: semantic similarity as a dot product):
    >>> extractor = BertFeatureExtractor.from_preset(
    ...     "minilm_l6_h384_uncased", pooling="mean", normalize=True, sequence_length=32)
    >>> texts = ["A man is eating food.", "A man is eating a meal.", "The stock market fell."]
    >>> vectors = extractor.predict(texts, verbose=0)["sentence_embedding"]
    >>> vectors.shape
    (3, 384)
    >>> print(f"{vectors[0] @ vectors[1]:.2f} {vectors[0] @ vectors[2]:.2f}")
    0.93 -0.04
    """

    preset_encoder_overrides = {"return_hidden_states": True}

    outputs_per_token = True  # token_embeddings
    task_name = "feature_extractor"

    def __init__(self, encoder=None, layers="last_hidden", pooling="cls", normalize=False,
                 preprocessor=None, backbone=None, **kwargs):
        encoder = resolve_encoder(encoder, backbone)
        if layers not in LAYER_CHOICES:
            raise ValueError(f"Unknown layers {layers!r}; choose one of {list(LAYER_CHOICES)}.")
        if pooling not in POOLING_CHOICES:
            raise ValueError(f"Unknown pooling {pooling!r}; choose one of "
                             f"{list(POOLING_CHOICES)}.")
        if layers != "last_hidden" and not encoder.return_hidden_states:
            raise ValueError(
                f"layers={layers!r} needs the encoder's hidden states: build it with "
                "return_hidden_states=True (e.g. BertEncoder.from_preset(name, "
                "return_hidden_states=True)) or use BertFeatureExtractor.from_preset.")
        if encoder.num_layers < _MIN_LAYERS.get(layers, 1):
            raise ValueError(f"layers={layers!r} needs at least {_MIN_LAYERS[layers]} "
                             f"transformer layers; the encoder has {encoder.num_layers}.")
        policy = encoder.layer_dtype_policy
        scalar_mix = ScalarMix(dtype=policy, name="scalar_mix") if layers == "scalar_mix" else None

        # === Functional graph ===
        inputs = encoder_inputs()
        outputs = _features(encoder(inputs), inputs["padding_mask"], layers, pooling,
                            normalize, scalar_mix)
        super().__init__(inputs, outputs, encoder, preprocessor, **kwargs)
        freeze_unused_pooler(encoder)  # the head reads sequence_output only

        self.feature_layers = layers
        self.pooling = pooling
        self.normalize = normalize
        self.scalar_mix = scalar_mix
        self.compile()

    def head_outputs(self, encoder_outputs, inputs):
        return _features(encoder_outputs, inputs["padding_mask"], self.feature_layers,
                         self.pooling, self.normalize, self.scalar_mix)

    def serving_signatures(self):
        return serving_signatures(self)

    # Elsewhere: the family's base model (BertModel, ...); the pooling is no weight.
    checkpoint_form = CheckpointForm()

    def get_config(self):
        config = super().get_config()
        config.update(layers=self.feature_layers, pooling=self.pooling,
                      normalize=self.normalize)
        return config
