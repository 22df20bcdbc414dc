"""Builds a BertEncoder from a `checkpoints.Checkpoint`: what `from_preset` does once
`presets.resolve_checkpoint` has read the config and weights (the preset table lives in
presets/, the format detection in checkpoints/; neither imports models/)."""

import logging

from keras_bert_suite.models import weight_names
from keras_bert_suite.presets import resolve_checkpoint

logger = logging.getLogger(__name__)


def load_encoder(cls, preset, load_weights=True, **overrides):
    """`cls.from_preset`: resolves `preset` (a built-in name or a path) and builds `cls`."""
    checkpoint = resolve_checkpoint(preset, load_weights=load_weights)
    return encoder_from_checkpoint(cls, checkpoint, preset, load_weights, **overrides)


def encoder_from_checkpoint(cls, checkpoint, preset, load_weights=True, **overrides):
    """Builds `cls` from an already resolved checkpoint (models that also read head weights
    resolve once and share it); `overrides` replace config values (`lora_rank` /
    `lora_alpha`: adapters added once the checkpoint's weights are in)."""
    lora_rank, lora_alpha = overrides.pop("lora_rank", None), overrides.pop("lora_alpha", None)
    encoder = cls(**{**checkpoint.config, **overrides})
    if checkpoint.weights is not None:
        variables = encoder.weight_map()
        # e.g. transformers' token classifier
        if not any(name.startswith("pooler/") for name in checkpoint.weights):
            logger.warning("Preset '%s' has no pooler weights: the pooler is randomly "
                           "initialised (only [CLS]-pooling heads read it).", preset)
            variables = {name: variable for name, variable in variables.items()
                         if not name.startswith("pooler/")}
        weight_names.assign(variables, checkpoint.weights, owner=cls.__name__)
    elif load_weights:
        logger.warning(
            "Preset '%s' is an architecture only: the encoder is randomly initialised.", preset)
    if lora_rank is not None:
        encoder.enable_lora(lora_rank, lora_alpha)
    return encoder
