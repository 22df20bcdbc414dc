"""The canonical weight names every checkpoint converter maps to.

    embeddings/token_embedding                 [V, H]
    embeddings/segment_embedding               [S, H]
    embeddings/position_embedding              [P, H]
    embeddings/layer_norm/{gamma,beta}         [H]
    layer_{i}/attention/qkv/kernel             [H, 3, N, H/N]  (query | key | value, head,
    layer_{i}/attention/qkv/bias               [3, N, H/N]      dimension within the head)
    layer_{i}/attention/output/{kernel,bias}   [H, H], [H]
    layer_{i}/attention_layer_norm/{gamma,beta}
    layer_{i}/intermediate/{kernel,bias}       [H, I], [I]
    layer_{i}/output/{kernel,bias}             [I, H], [H]
    layer_{i}/output_layer_norm/{gamma,beta}
    pooler/{kernel,bias}                       [H, H], [H]

Pretraining heads (BertPretrainer; `cls/predictions`, `cls/seq_relationship` in checkpoints):
    mlm/transform/{kernel,bias}                [H, H], [H]
    mlm/layer_norm/{gamma,beta}                [H]
    mlm/output_bias                            [V]  (the decoder matrix is the token embedding)
    nsp/{kernel,bias}                          [H, 2], [2]

Kernels are [in, out] (Keras layout); converters transpose PyTorch's [out, in]. The qkv
kernel in memory is the [H, 3H] concatenation of the query, key and value kernels (each
head-major, as BERT splits heads); its head axis is separate so that a model-parallel layout
can give each device whole heads (`BertEncoder.get_layout_map`). Files written before it
stored that [H, 3H] array and load reshaped: preset directories of format_version 1
(`preset_dir.load`), `.keras` and `.weights.h5` files (the attention layer's qkv projection).
"""

import numpy as np

# One error class for "weights do not fit", whether a reader or the model notices it.
from keras_bert_suite.checkpoints.errors import CheckpointMismatchError  # noqa: F401


def _dense(prefix, layer):
    return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def _layer_norm(prefix, layer):
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def encoder_variables(encoder):
    embeddings = encoder.embeddings
    variables = {
        "embeddings/token_embedding": embeddings.token_embedding.embeddings,
        "embeddings/segment_embedding": embeddings.segment_embedding.embeddings,
        "embeddings/position_embedding": embeddings.position_embedding,
        **_layer_norm("embeddings/layer_norm", embeddings.layer_norm),
    }
    for i, block in enumerate(encoder.transformer_layers):
        prefix = f"layer_{i}"
        variables.update(_dense(f"{prefix}/attention/qkv", block.attention.qkv))
        variables.update(_dense(f"{prefix}/attention/output", block.attention.output_dense))
        variables.update(_layer_norm(f"{prefix}/attention_layer_norm", block.attention_layer_norm))
        variables.update(_dense(f"{prefix}/intermediate", block.intermediate_dense))
        variables.update(_dense(f"{prefix}/output", block.output_dense))
        variables.update(_layer_norm(f"{prefix}/output_layer_norm", block.output_layer_norm))
    variables.update(_dense("pooler", encoder.pooler))
    return variables


def masked_lm_head_variables(head):
    return {
        **_dense("mlm/transform", head.transform),
        **_layer_norm("mlm/layer_norm", head.layer_norm),
        "mlm/output_bias": head.output_bias,
    }


def next_sentence_head_variables(dense):
    return _dense("nsp", dense)


def assign(variables, weights, owner):
    """Checks every name and shape first, then assigns, so a bad checkpoint changes nothing."""
    for name, variable in variables.items():
        if name not in weights:
            raise CheckpointMismatchError(
                f"{owner}: the checkpoint has no weight for '{name}' (expected shape "
                f"{tuple(variable.shape)}). Is it a BERT checkpoint with the same number of layers?")
        shape = tuple(np.shape(weights[name]))
        if shape != tuple(variable.shape):
            raise CheckpointMismatchError(
                f"{owner}: weight '{name}' has shape {shape} in the checkpoint but the model "
                f"expects {tuple(variable.shape)}. Does the config match the weights?")
    for name, variable in variables.items():
        variable.assign(np.asarray(weights[name], dtype=variable.dtype))
