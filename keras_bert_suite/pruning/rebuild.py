"""A new model of the same class as a task model (or encoder) with a changed encoder config:
what structural pruning and masking return. The task's head weights, preprocessor, label
names and other arguments carry over; the encoder's weights are given by canonical name."""

import logging

import keras
import numpy as np

from keras_bert_suite.models.lora import without_lora
from keras_bert_suite.models.quantization import refuse_quantized
from keras_bert_suite.pruning.units import encoder_of

logger = logging.getLogger(__name__)


def rebuild(model, encoder_changes, encoder_weights):
    """`type(model)` rebuilt from its config with `encoder_changes` in the encoder's config,
    the encoder's weights from `encoder_weights` ({canonical name: array}, see
    `BertEncoder.weight_map`) and every other weight (task heads) copied. A task model comes
    back compiled with its defaults and shares `model`'s preprocessor. `model` has no LoRA
    adapters (merge them first: `without_adapters`)."""
    refuse_quantized(model, "Pruning or masking")
    encoder = encoder_of(model)
    config = dict(model.get_config())  # new dicts for what changes, never get_config's own
    if model is encoder:
        config.update(encoder_changes)
    else:
        serialized = dict(config["encoder"])
        serialized["config"] = {**serialized["config"], **encoder_changes}
        config["encoder"] = serialized
    preprocessor = getattr(model, "preprocessor", None)
    if "preprocessor" in config:
        config["preprocessor"] = None  # shared, not rebuilt
    new = type(model).from_config(config)
    new_encoder = encoder_of(new)
    new_encoder.load_weight_map(encoder_weights)

    sources = _outside(model.weights, encoder)
    targets = _outside(new.weights, new_encoder)
    if len(sources) != len(targets):
        raise RuntimeError(f"Rebuilding {type(model).__name__}: {len(sources)} weights outside "
                           f"the encoder, but {len(targets)} in the new model.")
    for source, target in zip(sources, targets):
        if tuple(source.shape) != tuple(target.shape):
            raise RuntimeError(f"Rebuilding {type(model).__name__}: '{source.path}' "
                               f"{tuple(source.shape)} does not fit '{target.path}' "
                               f"{tuple(target.shape)}.")
        # A copy: on JAX assigning the source's array would share its buffer, which a jitted
        # step of either model donates (and deletes) from under the other.
        target.assign(np.array(keras.ops.convert_to_numpy(source)))
    if preprocessor is not None:
        new.preprocessor = preprocessor
    return new


def _outside(variables, encoder):
    inside = {id(variable) for variable in encoder.weights}
    return [variable for variable in variables if id(variable) not in inside]


def without_adapters(model):
    """`model` with LoRA adapters folded into its kernels (pruning slices plain kernels);
    `model` itself when it has none."""
    if encoder_of(model).lora_rank is not None:
        logger.info("Pruning merges the LoRA adapters into the kernels; the pruned model has "
                    "none (call enable_lora on it to fine-tune with adapters again).")
        return without_lora(model)
    return model
