"""Where a checkpoint family keeps the modules of our weight table (checkpoints/weight_table.py),
and BERT's tree, the one every family starts from. The readers and writers that walk a tree are
checkpoints/bert_layout.py; a family record (families/*.py) only names its modules."""

from typing import Callable, NamedTuple


class ModuleTree(NamedTuple):
    """Where a checkpoint family keeps the weight table's modules.

    modules: table module -> module path; a transformer layer's under `layer_path`.
    layer_path: (block index, encoder config) -> the path of that transformer block.
    qkv: the three modules under modules["attention/qkv"] that hold query, key and value;
        empty when it is one fused module (ModernBERT's Wqkv).
    group_pattern: a regex whose group 1 numbers the groups of blocks (one block each but
        ALBERT's `layers_per_group`), for the check that a checkpoint has no more than its
        config says.
    """

    modules: dict
    layer_path: Callable = lambda index, config: f"encoder.layer.{index}"
    qkv: tuple = ("query", "key", "value")
    group_pattern: str = r"(?:^|\.)encoder\.layer\.(\d+)\."


# Table module -> BERT module path (under `encoder.layer.{i}.` for a transformer layer's).
ENCODER_MODULES = {
    "embeddings/token_embedding": "embeddings.word_embeddings",
    "embeddings/segment_embedding": "embeddings.token_type_embeddings",
    "embeddings/position_embedding": "embeddings.position_embeddings",
    "embeddings/layer_norm": "embeddings.LayerNorm",
    "attention/qkv": "attention.self",  # three modules: .query, .key, .value
    "attention/output": "attention.output.dense",
    "attention_layer_norm": "attention.output.LayerNorm",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
    "output_layer_norm": "output.LayerNorm",
    "pooler": "pooler.dense",
}
# BERT's pretraining heads. A head's module paths are never under the family's prefix
# (`bert.`); the output bias names a tensor, not a module (the families' end in `.bias`).
HEAD_MODULES = {
    "mlm/transform": "cls.predictions.transform.dense",
    "mlm/layer_norm": "cls.predictions.transform.LayerNorm",
    "mlm/output_bias": "cls.predictions.output_bias",
    "nsp": "cls.seq_relationship",
}
MODULES = {**ENCODER_MODULES, **HEAD_MODULES}
BERT_TREE = ModuleTree(MODULES)
