"""BertEncoder: the BERT backbone (embeddings, N transformer blocks, tanh pooler)."""

import keras
from keras import ops

from keras_bert_suite.layers import BertEmbeddings, TransformerBlock
from keras_bert_suite.layers.gather_rows import gather_rows
from keras_bert_suite.models import weight_names


def _attention_mask(padding_mask):
    """[B, T] 1/0 padding mask -> [B, 1, 1, T] booleans (True = attend), as attention takes it."""
    return ops.cast(padding_mask, "bool")[:, None, None, :]


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertEncoder(keras.Model):
    """The BERT encoder as a functional Keras model.

    Inputs (a dict): `token_ids`, `segment_ids`, `padding_mask`, each [B, T] integers
    (`padding_mask` is 1 for real tokens, 0 for padding).
    Outputs (a dict): `sequence_output` [B, T, H], `pooled_output` [B, H] (tanh dense on
    [CLS]) and, when `return_hidden_states=True`, `hidden_states` [B, L + 1, T, H] —
    the embedding output followed by every layer's output.

    Example:
    >>> encoder = BertEncoder.from_preset("bert_tiny_en_uncased")
    >>> outputs = encoder({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        layer_norm_epsilon=1e-12,  # the released BERT checkpoints were trained with 1e-12
        initializer_range=0.02,
        return_hidden_states=False,
        dtype=None,
        **kwargs,
    ):
        policy = keras.dtype_policies.get(dtype) if dtype is not None else None
        embeddings = BertEmbeddings(
            vocabulary_size, max_sequence_length, num_segments, hidden_dim, dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon, initializer_range=initializer_range,
            dtype=policy, name="embeddings")
        blocks = [
            TransformerBlock(
                num_heads, hidden_dim, intermediate_dim, dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon, initializer_range=initializer_range,
                dtype=policy, name=f"transformer_layer_{i}")
            for i in range(num_layers)
        ]
        pooler = keras.layers.Dense(
            hidden_dim, activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=policy, name="pooler")

        # === Functional graph ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        attention_mask = _attention_mask(padding_mask)

        x = embeddings(token_ids, segment_ids)
        hidden_states = [x]
        for block in blocks:
            x = block(x, attention_mask)
            hidden_states.append(x)
        outputs = {"sequence_output": x, "pooled_output": pooler(x[:, 0, :])}
        if return_hidden_states:
            outputs["hidden_states"] = ops.stack(hidden_states, axis=1)  # [B, L + 1, T, H]
        super().__init__(
            inputs={"token_ids": token_ids, "segment_ids": segment_ids,
                    "padding_mask": padding_mask},
            outputs=outputs,
            dtype=policy,
            **kwargs,
        )

        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.return_hidden_states = return_hidden_states

    def encode_at(self, inputs, positions):
        """The last layer's output at `positions` only, computed at those rows only.

        Returns {"gathered_output": [B, Q, H], "pooled_output": [B, H]}: exactly
        `self(inputs)["sequence_output"]` gathered at `positions` [B, Q] and the pooled
        output (its [CLS] row is computed too), for a caller that reads a few rows — the
        pretrainer's MLM head reads P ~ 0.15 T. The last layer's query projection, attention
        output, FFN and LayerNorms then run on Q + 1 rows instead of T (13% of a BERT-mini
        pretraining step's FLOPs). Usable on symbolic inputs, in a functional graph.
        """
        positions = ops.cast(positions, "int32")
        x = self.embeddings(inputs["token_ids"], inputs["segment_ids"])
        attention_mask = _attention_mask(inputs["padding_mask"])
        with_cls = ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)
        if not self.transformer_layers:  # nothing to skip: the rows are the embeddings'
            rows = gather_rows(x, with_cls)
        else:
            for block in self.transformer_layers[:-1]:
                x = block(x, attention_mask)
            rows = self.transformer_layers[-1](x, attention_mask, positions=with_cls)
        # rows: [B, 1 + Q, H], [CLS] first
        return {"gathered_output": rows[:, 1:], "pooled_output": self.pooler(rows[:, 0, :])}

    @property
    def token_embedding(self):
        """The token embedding layer (the MLM decoder ties its weights to it)."""
        return self.embeddings.token_embedding

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            # The functional Model drops the policy it was given; the layers keep it.
            "dtype": keras.dtype_policies.serialize(self.embeddings.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "dropout": self.dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
            "return_hidden_states": self.return_hidden_states,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    # === Weights by name (the checkpoint converters' common currency) ===

    def weight_map(self):
        """{canonical weight name: keras.Variable}; see `weight_names.py` for the scheme."""
        return weight_names.encoder_variables(self)

    def load_weight_map(self, weights):
        """Assigns {canonical name: array}; names the first missing or mis-shaped weight."""
        weight_names.assign(self.weight_map(), weights, owner="BertEncoder")

    @classmethod
    def from_preset(cls, preset, load_weights=True, **overrides):
        """Builds an encoder from a built-in preset name or a checkpoint directory.

        `preset` is a built-in name (`keras_bert_suite.list_presets()`), a preset directory
        saved by `save_preset`, a Hugging Face BERT directory (`config.json` +
        `model.safetensors` / `pytorch_model.bin`), an original Google BERT checkpoint
        directory (`bert_config.json` + `bert_model.ckpt.*`) or a KerasHub preset directory.
        `overrides` replace config values (e.g. `dropout=0.0`, `return_hidden_states=True`).
        """
        from keras_bert_suite.models.presets import load_encoder

        return load_encoder(cls, preset, load_weights=load_weights, **overrides)

    def save_preset(self, directory, vocabulary=None, lowercase=True):
        """Writes config.json, model.weights.npz and (optionally) vocab.txt to `directory`."""
        from keras_bert_suite.checkpoints import preset_dir

        preset_dir.save(directory, self.get_config(), self.weight_map(), vocabulary, lowercase)
