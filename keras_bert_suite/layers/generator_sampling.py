"""ELECTRA's corruption step: tokens sampled from the generator, put at the masked positions."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class SampleTokens(keras.layers.Layer):
    """MLM logits [B, P, V] -> token ids [B, P] drawn from softmax(logits), without gradient
    (ELECTRA trains the generator by its MLM loss only). In training the seed generator is
    the layer's state, so every step (JAX's stateless ones too) draws new samples; in
    inference the draw uses the fixed `seed` (0 when None), so evaluating or predicting a
    batch twice gives the same samples and the same scores."""

    def __init__(self, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, logits, training=None):
        logits = ops.stop_gradient(ops.cast(logits, "float32"))
        shape = ops.shape(logits)
        flat = ops.reshape(logits, (-1, shape[-1]))
        seed = self.seed_generator if training else (self.seed or 0)
        sampled = keras.random.categorical(flat, 1, seed=seed, dtype="int32")
        return ops.reshape(sampled, shape[:-1])

    def compute_output_shape(self, logits_shape):
        return tuple(logits_shape[:-1])

    # The seed generator's position is training state: a run resumed from a backup must draw
    # the samples (so the discriminator's labels) an unbroken run would. Keras saves a
    # layer's weights only, not its seed generators.
    def save_own_variables(self, store):
        super().save_own_variables(store)
        store[SEED_STATE] = ops.convert_to_numpy(self.seed_generator.state)

    def load_own_variables(self, store):
        # Not Layer's: it counts the stored entries against the layer's weights (none here).
        if SEED_STATE in store:  # files saved before it was kept have none
            self.seed_generator.state.assign(store[SEED_STATE][...])

    def get_config(self):
        return {**super().get_config(), "seed": self.seed}


SEED_STATE = "seed_generator_state"


def at_positions(positions, values, length):
    """([B, T] True where a real slot of `positions` [B, P] points, [B, T] its `values`).
    A real slot has a position > 0: padded slots point at 0 ([CLS], never masked)."""
    positions = ops.cast(positions, "int32")
    one_hot = ops.one_hot(positions, length, dtype="int32")  # [B, P, T]
    one_hot = one_hot * ops.cast(ops.greater(positions, 0), "int32")[..., None]
    hit = ops.greater(ops.sum(one_hot, axis=1), 0)  # [B, T]
    value = ops.sum(one_hot * ops.cast(values, "int32")[..., None], axis=1)  # [B, T]
    return hit, value


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ReplaceTokens(keras.layers.Layer):
    """(token_ids [B, T], mask_positions [B, P], sampled ids [B, P]) -> the discriminator's
    input: `token_ids` with the samples at the real masked positions."""

    def call(self, token_ids, mask_positions, sampled):
        hit, value = at_positions(mask_positions, sampled, ops.shape(token_ids)[1])
        return ops.where(hit, value, ops.cast(token_ids, "int32"))

    def compute_output_shape(self, token_ids_shape, mask_positions_shape, sampled_shape):
        return tuple(token_ids_shape)
