"""Building models from presets; the preset registry itself is checkpoints/presets.py."""

import logging

from keras_bert_suite.checkpoints.presets import PRESETS, list_presets, resolve_checkpoint  # noqa: F401

logger = logging.getLogger(__name__)


def load_encoder(cls, preset, load_weights=True, **overrides):
    checkpoint = resolve_checkpoint(preset, load_weights=load_weights)
    return encoder_from_checkpoint(cls, checkpoint, preset, load_weights, **overrides)


def encoder_from_checkpoint(cls, checkpoint, preset, load_weights=True, **overrides):
    """Builds `cls` from an already resolved checkpoint (models that also read head weights
    resolve once and share it)."""
    encoder = cls(**{**checkpoint.config, **overrides})
    if checkpoint.weights is not None:
        encoder.load_weight_map(checkpoint.weights)
    elif load_weights:
        logger.warning(
            "Preset '%s' is an architecture only: the encoder is randomly initialised.", preset)
    return encoder
