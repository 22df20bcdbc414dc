"""KerasHub's variable paths for our weight table's templates: a backbone's blocks, its
embeddings and pooler (each backbone's own), and its tasks' heads.

KerasHub names a weight by its Keras variable path (`backbone.weights[i].path`). Every
backbone's blocks use BertBackbone's names under the block's layer name
(`transformer_layer_{i}`, ALBERT's `group_{g}_inner_layer_{j}`; keras_hub_backbones.py says
which), e.g.:

    transformer_layer_{i}/self_attention_layer/{query,key,value}/kernel  [H, N, H/N]
    transformer_layer_{i}/self_attention_layer/{query,key,value}/bias    [N, H/N]
    transformer_layer_{i}/self_attention_layer/attention_output/kernel   [N, H/N, H]
"""

# Template of a block's weight -> its path under the block's layer name. `{part}`: KerasHub
# keeps query, key and value in three variables; ours stacks them (split_heads.py).
BLOCK_NAMES = {
    "attention/qkv/kernel": "self_attention_layer/{part}/kernel",  # 3 x [H, N, Dh], axis 1
    "attention/qkv/bias": "self_attention_layer/{part}/bias",  # 3 x [N, Dh], axis 0
    "attention/output/kernel": "self_attention_layer/attention_output/kernel",  # [N, Dh, H]
    "attention/output/bias": "self_attention_layer/attention_output/bias",
    "attention_layer_norm/gamma": "self_attention_layer_norm/gamma",
    "attention_layer_norm/beta": "self_attention_layer_norm/beta",
    "intermediate/kernel": "feedforward_intermediate_dense/kernel",
    "intermediate/bias": "feedforward_intermediate_dense/bias",
    "output/kernel": "feedforward_output_dense/kernel",
    "output/bias": "feedforward_output_dense/bias",
    "output_layer_norm/gamma": "feedforward_layer_norm/gamma",
    "output_layer_norm/beta": "feedforward_layer_norm/beta",
}

# The pooler: in BertBackbone, AlbertBackbone and ElectraBackbone; in RoBERTa's and
# DistilBERT's TextClassifier (task.weights.h5), whose backbones have none.
POOLED_DENSE_NAMES = {"pooler/kernel": "pooled_dense/kernel", "pooler/bias": "pooled_dense/bias"}
_LAYER_NORM = {"embeddings/layer_norm/gamma": "embeddings_layer_norm/gamma",
               "embeddings/layer_norm/beta": "embeddings_layer_norm/beta"}
# BERT's, ALBERT's and ELECTRA's: token, segment and position embeddings at the top.
SEPARATE_EMBEDDING_NAMES = {
    "embeddings/token_embedding": "token_embedding/embeddings",
    "embeddings/segment_embedding": "segment_embedding/embeddings",
    "embeddings/position_embedding": "position_embedding/embeddings",
    **_LAYER_NORM, **POOLED_DENSE_NAMES}
ROBERTA_EMBEDDING_NAMES = {
    "embeddings/token_embedding": "embeddings/token_embedding/embeddings",
    "embeddings/position_embedding": "embeddings/position_embedding/embeddings", **_LAYER_NORM}
DISTILBERT_EMBEDDING_NAMES = {
    "embeddings/token_embedding": "token_and_position_embedding/token_embedding/embeddings",
    "embeddings/position_embedding": "token_and_position_embedding/position_embedding/embeddings",
    **_LAYER_NORM}
ALBERT_EMBEDDING_NAMES = {**SEPARATE_EMBEDDING_NAMES,
                          "embeddings/projection/kernel": "embedding_projection/kernel",
                          "embeddings/projection/bias": "embedding_projection/bias"}
ELECTRA_EMBEDDING_NAMES = {**SEPARATE_EMBEDDING_NAMES,  # only when embedding_dim != hidden_dim
                           "embeddings/projection/kernel": "embeddings_projection/kernel",
                           "embeddings/projection/bias": "embeddings_projection/bias"}

# DeBERTa-v3's: no segment or position rows; the relative embeddings and their LayerNorm.
DEBERTA_V3_EMBEDDING_NAMES = {
    "embeddings/token_embedding": "token_embedding/embeddings", **_LAYER_NORM,
    "relative_embeddings": "rel_embedding/rel_embedding",
    "relative_embeddings/layer_norm/gamma": "rel_embedding/rel_embeddings_layer_norm/gamma",
    "relative_embeddings/layer_norm/beta": "rel_embedding/rel_embeddings_layer_norm/beta"}

# A TextClassifier's head: a Dense named "logits" (our BertClassifier's classifier_head).
CLASSIFIER_HEAD_NAMES = {"kernel": "logits/kernel", "bias": "logits/bias"}
# Our MLM head (a BertPretrainer's) -> BertMaskedLM's `mlm_head` variables (a task variable).
MASKED_LM_HEAD_NAMES = {
    "mlm/transform/kernel": "mlm_head/intermediate_dense/kernel",
    "mlm/transform/bias": "mlm_head/intermediate_dense/bias",
    "mlm/layer_norm/gamma": "mlm_head/intermediate_layer_norm/gamma",
    "mlm/layer_norm/beta": "mlm_head/intermediate_layer_norm/beta",
    "mlm/output_bias": "mlm_head/output_bias",
}
