"""The BertConfig JSON that Hugging Face (config.json) and Google (bert_config.json) share."""

from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
from keras_bert_suite.encoder_config import CHECKPOINT_KEYS, FAMILY_DEFAULTS

# BertEncoder's architecture arguments (what `Checkpoint.config` holds), and the values of the
# family's (embedding_dim ... layers_per_group) that a format lacking them implies: BERT's.
ENCODER_CONFIG_KEYS = CHECKPOINT_KEYS
BERT_FAMILY_DEFAULTS = FAMILY_DEFAULTS

# The encoder's `activation` -> the `hidden_act` transformers writes for it: the exact erf
# GELU, or its tanh approximation ("gelu_new", what ALBERT was trained with).
HIDDEN_ACTS = {"gelu": "gelu", "gelu_approximate": "gelu_new"}
# transformers' `hidden_act` -> the encoder's `activation` (two more spellings of each form).
ACTIVATIONS = {**{name: activation for activation, name in HIDDEN_ACTS.items()},
               "gelu_python": "gelu", "gelu_pytorch_tanh": "gelu_approximate"}


def feed_forward_activation(name, config_file):
    if name not in ACTIVATIONS:
        raise UnsupportedCheckpointError(
            f"{config_file}: hidden_act '{name}' is not supported; the encoder computes the "
            f"exact GELU ('gelu') or its tanh approximation ('gelu_new'), and another "
            f"activation would give different numbers.")
    return ACTIVATIONS[name]


def require_keys(config_json, keys, family, config_file):
    """Refuses a config.json that lacks one of the architecture `keys` of `family`."""
    missing = [key for key in keys if key not in config_json]
    if missing:
        raise UnsupportedCheckpointError(f"{config_file} lacks the {family} keys {missing}.")


def encoder_config(bert_json, config_file):
    """Maps BertConfig keys to BertEncoder arguments; rejects architectures we cannot run.
    RoBERTa's, ELECTRA's and ALBERT's configs use the same keys (their families add theirs)."""
    activation = feed_forward_activation(bert_json.get("hidden_act", "gelu"), config_file)
    position_type = bert_json.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise UnsupportedCheckpointError(
            f"{config_file}: position_embedding_type '{position_type}' is not supported; "
            f"BertEncoder has learned absolute position embeddings only.")
    if bert_json.get("add_cross_attention"):
        raise UnsupportedCheckpointError(
            f"{config_file}: a BERT decoder with cross-attention is not supported (a decoder "
            f"without it, is_decoder alone, is read as a causal encoder).")
    require_keys(bert_json, ("vocab_size", "hidden_size", "num_hidden_layers",
                             "num_attention_heads", "intermediate_size"), "BERT", config_file)
    # is_decoder: attention to earlier positions only (BertLMHeadModel's left-to-right LM).
    causal = {"causal": True} if bert_json.get("is_decoder") else {}
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
        **BERT_FAMILY_DEFAULTS,
        "activation": activation,
        **causal,
    }


def bert_json(config):
    """BertConfig keys for BertEncoder arguments `config` (the inverse of `encoder_config`)."""
    return {
        "vocab_size": config["vocabulary_size"],
        "hidden_size": config["hidden_dim"],
        "num_hidden_layers": config["num_layers"],
        "num_attention_heads": config["num_heads"],
        "intermediate_size": config["intermediate_dim"],
        "hidden_act": hidden_act(config.get("activation", "gelu")),
        "hidden_dropout_prob": config["dropout"],
        "attention_probs_dropout_prob": config["dropout"],
        "max_position_embeddings": config["max_sequence_length"],
        "type_vocab_size": config["num_segments"],
        "initializer_range": config["initializer_range"],
        "layer_norm_eps": config["layer_norm_epsilon"],
        "position_embedding_type": "absolute",
        "pad_token_id": 0,
    }


def hidden_act(activation):
    """The encoder's `activation` as transformers' `hidden_act`."""
    return HIDDEN_ACTS[activation]
