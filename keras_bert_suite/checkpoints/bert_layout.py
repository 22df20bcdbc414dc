"""The module tree that Hugging Face and Google BERT checkpoints share, mapped onto our weight
table (`weight_table.py`).

Both formats name the same modules (`embeddings.word_embeddings`,
`encoder.layer.{i}.attention.self.query`, `pooler.dense`, ...); they differ only in spelling
(`.` vs `/`, `weight` vs `kernel`) and kernel layout. A format adapter reads one variable of a
module path in our layout:

    adapter.get(path, variable, shape)   variable: "kernel" [in, out], "bias", "gamma",
                                         "beta", or None for an embedding / a lone tensor
    adapter.has(path, variable)

The readers walk the table, so the names they return are the table's; a `ModuleTree` only
says where each of its modules sits in one family's tree (`BERT_TREE` in
families/module_tree.py; RoBERTa, ELECTRA, DistilBERT and ALBERT name theirs in their family
records). They ask in checkpoint order, so the first missing variable is the one reported.
"""

import numpy as np

from keras_bert_suite.checkpoints import weight_table
from keras_bert_suite.families.module_tree import BERT_TREE


def encoder_weights(config, adapter, tree=BERT_TREE):
    """{canonical encoder weight name: array} read through `adapter`. The pooler may be
    absent: transformers' token-classification, question-answering and masked-LM models have
    none, nor have DistilBERT's and ELECTRA's encoders (the encoder then keeps its initial
    pooler; see `encoder_from_checkpoint`)."""
    table = weight_table.encoder_weights(config)
    pooler = [weight for weight in table if weight.name.startswith("pooler/")]
    first = weight_table.split_template(pooler[0].template)[0]
    if first not in tree.modules or not adapter.has(*_location(pooler[0], tree, config)):
        table = [weight for weight in table if weight not in pooler]
    return _read(table, adapter, tree, config)


def head_paths(tree):
    """The module paths of the pretraining heads `tree` names (the inverse of the prefix rule:
    a writer puts these at the top level)."""
    return {path for module, path in tree.modules.items() if module in _HEAD_MODULE_NAMES}


_HEAD_MODULE_NAMES = frozenset(
    weight_table.split_template(template)[0]
    for table in weight_table.HEAD_WEIGHTS.values() for template in table)


def head_weights(config, adapter, tree=BERT_TREE):
    """The MLM and NSP head weights that the checkpoint has (a head is all there or absent;
    a tree that does not name a head has none). A head is there when its first and last
    weights are: ModernBERT's task classes keep a prediction head where its masked-LM
    class keeps the MLM transform, without the decoder."""
    weights = {}
    for head in weight_table.HEAD_WEIGHTS:
        table = weight_table.head_weights(head, config)
        module = weight_table.split_template(table[0].template)[0]
        if module in tree.modules and all(adapter.has(*_location(weight, tree, config))
                                          for weight in (table[0], table[-1])):
            weights.update(_read(table, adapter, tree, config))
    return weights


def _read(table, adapter, tree, config):
    weights = {}
    for weight in table:
        path, variable = _location(weight, tree, config)
        if weight.template.startswith("attention/qkv/"):
            weights[weight.name] = _stacked_qkv(adapter, path, variable, weight.shape, tree)
        else:
            weights[weight.name] = adapter.get(path, variable, weight.shape)
    return weights


def _location(weight, tree, config):
    module, variable = weight_table.split_template(weight.template)
    path = tree.modules[module]
    if weight.layer is not None:
        path = f"{tree.layer_path(weight.layer, config)}.{path}"
    return path, variable


def _stacked_qkv(adapter, path, variable, shape, tree):
    """Our one query | key | value projection from BERT's three. Each [H, H] kernel's columns
    are already head-major (BERT's transpose_for_scores), so stacking and reshaping is exact.
    A tree without `qkv` modules keeps the three fused, query | key | value, each head-major
    (ModernBERT's Wqkv): reshaping it is exact too."""
    if not tree.qkv:
        fused = (shape[0], int(np.prod(shape[1:]))) if variable == "kernel" else (
            int(np.prod(shape)),)
        return adapter.get(path, variable, fused).reshape(shape)
    if variable == "kernel":  # 3 x [H, H] -> [H, 3, N, Dh]
        hidden = shape[0]
        parts = [adapter.get(f"{path}.{part}", variable, (hidden, hidden)) for part in tree.qkv]
        return np.stack(parts, axis=1).reshape(shape)
    hidden = int(np.prod(shape[1:]))  # 3 x [H] -> [3, N, Dh]
    return np.stack([adapter.get(f"{path}.{part}", variable, (hidden,))
                     for part in tree.qkv]).reshape(shape)


def write_weights(weights, config, adapter, tree=BERT_TREE):
    """The inverse of reading: every canonical weight in `weights` (the encoder's, and a head's
    when all of it is there) goes to `adapter.put(path, variable, value)` in the family's module
    tree, our one qkv projection split into its query, key and value."""
    tables = [weight_table.encoder_weights(config)]
    for head in weight_table.HEAD_WEIGHTS:
        table = weight_table.head_weights(head, config)
        if table[0].name in weights:
            tables.append(table)
    for weight in (weight for table in tables for weight in table):
        module = weight_table.split_template(weight.template)[0]
        if module not in tree.modules:  # a pooler the family's encoder does not have
            continue
        path, variable = _location(weight, tree, config)
        value = np.asarray(weights[weight.name])
        if not weight.template.startswith("attention/qkv/"):
            adapter.put(path, variable, value)
            continue
        if not tree.qkv:  # one fused projection: [H, 3 N Dh] or [3 N Dh]
            fused = value.reshape(value.shape[0], -1) if variable == "kernel" else value.ravel()
            adapter.put(path, variable, np.ascontiguousarray(fused))
            continue
        hidden = int(np.prod(weight.shape[-2:]))  # N * Dh
        parts = (value.reshape(-1, 3, hidden).transpose(1, 0, 2) if variable == "kernel"
                 else value.reshape(3, hidden))  # 3 x [H, H] kernels or 3 x [H] biases
        for part, array in zip(tree.qkv, parts):
            adapter.put(f"{path}.{part}", variable, np.ascontiguousarray(array))
