"""The BertConfig JSON that Hugging Face (config.json) and Google (bert_config.json) share."""

from keras_bert_suite.checkpoints.errors import UnsupportedCheckpointError

# BertEncoder's architecture arguments (DESIGN.md names); what `Checkpoint.config` holds.
ENCODER_CONFIG_KEYS = (
    "vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
    "max_sequence_length", "num_segments", "dropout", "layer_norm_epsilon", "initializer_range",
)

# Both spell the exact erf GELU the encoder computes; "gelu_new" & co. are the tanh approximation.
_EXACT_GELU = ("gelu", "gelu_python")


def encoder_config(bert_json, config_file):
    """Maps BertConfig keys to BertEncoder arguments; rejects architectures we cannot run."""
    activation = bert_json.get("hidden_act", "gelu")
    if activation not in _EXACT_GELU:
        raise UnsupportedCheckpointError(
            f"{config_file}: hidden_act '{activation}' is not supported; BertEncoder computes "
            f"the exact GELU ('gelu'), so the weights would give different numbers.")
    position_type = bert_json.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise UnsupportedCheckpointError(
            f"{config_file}: position_embedding_type '{position_type}' is not supported; "
            f"BertEncoder has learned absolute position embeddings only.")
    if bert_json.get("is_decoder") or bert_json.get("add_cross_attention"):
        raise UnsupportedCheckpointError(
            f"{config_file}: a BERT decoder / cross-attention model is not supported.")
    required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size")
    missing = [key for key in required if key not in bert_json]
    if missing:
        raise UnsupportedCheckpointError(f"{config_file} lacks the BERT keys {missing}.")
    return {
        "vocabulary_size": bert_json["vocab_size"],
        "num_layers": bert_json["num_hidden_layers"],
        "num_heads": bert_json["num_attention_heads"],
        "hidden_dim": bert_json["hidden_size"],
        "intermediate_dim": bert_json["intermediate_size"],
        "max_sequence_length": bert_json.get("max_position_embeddings", 512),
        "num_segments": bert_json.get("type_vocab_size", 2),
        "dropout": bert_json.get("hidden_dropout_prob", 0.1),
        # Google's bert_config.json has no epsilon: the original code hard-wires 1e-12.
        "layer_norm_epsilon": bert_json.get("layer_norm_eps", 1e-12),
        "initializer_range": bert_json.get("initializer_range", 0.02),
    }
