"""The module tree that Hugging Face and Google BERT checkpoints share, mapped to our names.

Both formats name the same modules (`embeddings.word_embeddings`,
`encoder.layer.{i}.attention.self.query`, `pooler.dense`, ...); they differ only in spelling
(`.` vs `/`, `weight` vs `kernel`) and kernel layout. A format adapter turns a module path
into arrays in our layout:

    adapter.embedding(path, shape)            -> [rows, H]
    adapter.layer_norm(path, dim)             -> (gamma, beta)
    adapter.dense(path, in_dim, out_dim)      -> (kernel [in, out], bias [out])

`encoder_weights` asks for the modules in checkpoint order, so the first missing variable
is the one reported.
"""

import numpy as np


def encoder_weights(config, adapter):
    hidden, intermediate = config["hidden_dim"], config["intermediate_dim"]
    heads = config["num_heads"]
    weights = {
        "embeddings/token_embedding": adapter.embedding(
            "embeddings.word_embeddings", (config["vocabulary_size"], hidden)),
        "embeddings/segment_embedding": adapter.embedding(
            "embeddings.token_type_embeddings", (config["num_segments"], hidden)),
        "embeddings/position_embedding": adapter.embedding(
            "embeddings.position_embeddings", (config["max_sequence_length"], hidden)),
    }
    _put_layer_norm(weights, "embeddings/layer_norm",
                    adapter.layer_norm("embeddings.LayerNorm", hidden))
    for i in range(config["num_layers"]):
        module, ours = f"encoder.layer.{i}", f"layer_{i}"
        query, key, value = (
            adapter.dense(f"{module}.attention.self.{part}", hidden, hidden)
            for part in ("query", "key", "value"))
        # Our attention projects query | key | value with one [H, 3, N, Dh] kernel; each
        # [H, H] kernel's columns are already head-major (BERT's transpose_for_scores).
        weights[f"{ours}/attention/qkv/kernel"] = np.stack(
            [query[0], key[0], value[0]], axis=1).reshape(hidden, 3, heads, hidden // heads)
        weights[f"{ours}/attention/qkv/bias"] = np.stack(
            [query[1], key[1], value[1]]).reshape(3, heads, hidden // heads)
        _put_dense(weights, f"{ours}/attention/output",
                   adapter.dense(f"{module}.attention.output.dense", hidden, hidden))
        _put_layer_norm(weights, f"{ours}/attention_layer_norm",
                        adapter.layer_norm(f"{module}.attention.output.LayerNorm", hidden))
        _put_dense(weights, f"{ours}/intermediate",
                   adapter.dense(f"{module}.intermediate.dense", hidden, intermediate))
        _put_dense(weights, f"{ours}/output",
                   adapter.dense(f"{module}.output.dense", intermediate, hidden))
        _put_layer_norm(weights, f"{ours}/output_layer_norm",
                        adapter.layer_norm(f"{module}.output.LayerNorm", hidden))
    _put_dense(weights, "pooler", adapter.dense("pooler.dense", hidden, hidden))
    return weights


def mlm_transform_weights(config, adapter, module):
    """The MLM head's dense + LayerNorm (`cls.predictions.transform` in both formats)."""
    hidden = config["hidden_dim"]
    weights = {}
    _put_dense(weights, "mlm/transform", adapter.dense(f"{module}.dense", hidden, hidden))
    _put_layer_norm(weights, "mlm/layer_norm", adapter.layer_norm(f"{module}.LayerNorm", hidden))
    return weights


def _put_dense(weights, name, kernel_and_bias):
    weights[f"{name}/kernel"], weights[f"{name}/bias"] = kernel_and_bias


def _put_layer_norm(weights, name, gamma_and_beta):
    weights[f"{name}/gamma"], weights[f"{name}/beta"] = gamma_and_beta
