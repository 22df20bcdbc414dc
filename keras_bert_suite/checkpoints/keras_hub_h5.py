"""Reading a KerasHub `.weights.h5` file (model.weights.h5, task.weights.h5) without building
a Keras model: {Keras variable path: array}, e.g. 'pooled_dense/kernel'."""

import numpy as np

from keras_bert_suite.checkpoints.tensors import TensorSource

# Keras writes each layer's variables to `<parent>/<attribute or class key>/vars/<index>` and,
# since Keras 3.x, the layer's name as the `name` attribute of `vars`. For files without it,
# these are the keys KerasHub's BertBackbone gets (class name, numbered in layer order).
_FALLBACK_LAYER_NAMES = {
    "reversible_embedding": "token_embedding",
    "embedding": "segment_embedding",
    "position_embedding": "position_embedding",
    "layer_normalization": "embeddings_layer_norm",
    "dense": "pooled_dense",
    "query_dense": "query",
    "key_dense": "key",
    "value_dense": "value",
    "output_dense": "attention_output",
    "masked_lm_head": "mlm_head",  # task.weights.h5 of a BertMaskedLM
}


def weights_source(weights_path, config_path):
    """A TensorSource over a KerasHub .weights.h5 file, by Keras variable path."""
    variables = read_weights_h5(weights_path)
    return TensorSource(list(variables), variables.__getitem__, where=weights_path,
                        config_file=config_path)


def read_weights_h5(path):
    """A .weights.h5 file -> {Keras variable path: float array}."""
    import h5py

    variables = {}
    with h5py.File(path, "r") as h5:
        for key, group in h5["layers"].items():
            _collect(group, _layer_name(key, group), variables)
    return variables


def _collect(group, path, variables):
    if "vars" in group:
        values = [group["vars"][index] for index in sorted(group["vars"], key=int)]
        for variable, dataset in zip(_variable_names(path), values):
            variables[f"{path}/{variable}"] = _to_array(dataset)
    for key, child in group.items():
        if key != "vars" and hasattr(child, "items"):
            _collect(child, f"{path}/{_layer_name(key, child)}", variables)


def _layer_name(key, group):
    name = group["vars"].attrs.get("name") if "vars" in group else None
    if name:
        return name.decode() if isinstance(name, bytes) else str(name)
    if key.startswith("transformer_encoder"):
        return f"transformer_layer_{key.rpartition('_')[2] if key[-1].isdigit() else 0}"
    return _FALLBACK_LAYER_NAMES.get(key, key.lstrip("_"))


def _variable_names(layer_path):
    """The order Keras creates variables in: Dense/EinsumDense, LayerNorm, Embedding."""
    layer = layer_path.rsplit("/", 1)[-1]
    if layer == "mlm_head":  # MaskedLMHead's own variable (its Dense and LayerNorm nest)
        return ("output_bias",)
    if layer == "rel_embedding":  # DebertaV3Backbone's relative embeddings, named as the layer
        return ("rel_embedding",)
    if layer.endswith("layer_norm"):
        return ("gamma", "beta")
    if layer.endswith("embedding"):
        return ("embeddings",)
    return ("kernel", "bias")


def _to_array(dataset):
    value = dataset[()]
    if dataset.attrs.get("dtype") == "bfloat16":  # Keras stores bf16 as raw 16-bit values
        import ml_dtypes

        value = np.asarray(value).view(ml_dtypes.bfloat16).astype(np.float32)
    return np.asarray(value)
