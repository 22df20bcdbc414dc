"""The one "same model with a changed encoder config" mechanism: pruning (fewer heads and
neurons), masking, merging LoRA adapters and making a distillation student all rebuild the
model from its config with encoder changes and carry the weights over by canonical name."""

import keras
import numpy as np

from keras_bert_suite.transforms.find_encoder import encoder_of


def rebuild(model, encoder_changes, encoder_weights):
    """`type(model)` rebuilt from its config with `encoder_changes` in the encoder's config,
    the encoder's weights from `encoder_weights` ({canonical name: array}, see
    `BertEncoder.weight_map`) and every weight outside the encoder (task heads) copied in
    order. A task model comes back compiled with its defaults and shares `model`'s
    preprocessor."""
    encoder = encoder_of(model, "Rebuilding")
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


def weight_arrays(encoder):
    """{canonical name: NumPy copy} of the encoder's weights (merged kernels under LoRA)."""
    return {name: np.array(keras.ops.convert_to_numpy(value))
            for name, value in encoder.weight_map().items()}


def _outside(variables, encoder):
    inside = {id(variable) for variable in encoder.weights}
    return [variable for variable in variables if id(variable) not in inside]
