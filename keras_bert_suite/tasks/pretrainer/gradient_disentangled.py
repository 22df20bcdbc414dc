"""DeBERTa-v3's gradient-disentangled embedding sharing (GDES; He et al. 2021, "DeBERTaV3",
section 3): the discriminator's token table is E_D = stop_gradient(E_G) + E_Delta, where E_G is
the generator's table and E_Delta starts at zeros. The generator's MLM loss alone trains E_G;
the discriminator's replaced-token loss trains E_Delta only, so the two losses no longer pull
one table two ways (ELECTRA's sharing, which DeBERTa-v3 calls a "tug-of-war"). After training
the discriminator keeps E_G + E_Delta."""

import keras
from keras import ops

from keras_bert_suite.models.encoder import _encode

# ElectraPretrainer's `embedding_sharing`: ELECTRA's one table trained by both losses, or GDES.
SHARED = "shared"
GRADIENT_DISENTANGLED = "gradient_disentangled"
EMBEDDING_SHARING = (SHARED, GRADIENT_DISENTANGLED)


def check_embedding_sharing(embedding_sharing):
    if embedding_sharing not in EMBEDDING_SHARING:
        raise ValueError(f"embedding_sharing is one of {list(EMBEDDING_SHARING)} (ELECTRA's "
                         f"one table, DeBERTa-v3's GDES), got {embedding_sharing!r}.")


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class GradientDisentangledDiscriminator(keras.layers.Layer):
    """Encoder inputs -> the discriminator's sequence output [B, T, H]: `encoder`'s layers,
    its token rows read as E_G[ids] without gradient + E_Delta[ids].

    `encoder`'s own token table is E_G (the generator shares the embeddings block with it);
    this layer holds E_Delta (`token_delta`, [V, E], zeros at first). The rest of the
    embeddings block (segment and position rows, LayerNorm) is the encoder's, as ELECTRA shares
    it. `token_table()` is E_G + E_Delta, the discriminator's table once folded.
    """

    def __init__(self, encoder, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        embeddings = encoder.embeddings
        self.token_delta = self.add_weight(
            name="token_delta", shape=(embeddings.vocabulary_size, embeddings.hidden_dim),
            initializer="zeros")
        self.built = True

    # The tables `BertEmbeddings.embed_with` reads: the encoder's, but the token rows.
    @property
    def has_segments(self):
        return self.encoder.embeddings.has_segments

    def rows(self, table, ids):
        rows = self.encoder.embeddings.rows(table, ids)
        if table != "token_embedding":
            return rows
        delta = ops.take(self.token_delta, ops.cast(ids, "int32"), axis=0)
        return ops.stop_gradient(rows) + ops.cast(delta, rows.dtype)  # [B, T, E]

    def norm(self, x):
        return self.encoder.embeddings.norm(x)

    def _embed(self, token_ids, segment_ids, padding_mask, **call_options):
        return self.encoder.embeddings.embed_with(self, token_ids, segment_ids, padding_mask,
                                                  **call_options)

    def call(self, inputs):
        parts = self.encoder.parts._replace(embeddings=self._embed)
        sequence, _, _ = _encode(parts, inputs)
        return sequence

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape["token_ids"]) + (self.encoder.hidden_dim,)

    def token_table(self):
        """E_G + E_Delta [V, E]: the discriminator's token table."""
        return ops.convert_to_numpy(self.encoder.token_embedding.embeddings) + \
            ops.convert_to_numpy(self.token_delta)

    def get_config(self):
        return {**super().get_config(), "encoder": keras.layers.serialize(self.encoder)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)
