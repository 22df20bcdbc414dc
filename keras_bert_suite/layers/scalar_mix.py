"""ELMo's scalar mix: a learned, softmax-normalised weighted sum of layer outputs."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class ScalarMix(keras.layers.Layer):
    """gamma · Σ_j softmax(s)_j · h_j over the N stacked layer outputs h (Peters et al. 2018).

    The weights s start at zero (an equal-weight average) and gamma at 1; both train with
    the task (the BERT paper's "weighted sum" feature-based rows).

    Input: hidden states [B, N, T, H] (e.g. `BertEncoder` `hidden_states`).
    Output: [B, T, H].

    Example:
    >>> from keras_bert_suite import BertEncoder, BertPreprocessor
    >>> preset = "bert_uncased_L-2_H-128_A-2"
    >>> encoder = BertEncoder.from_preset(  # random weights
    ...     preset, load_weights=False, return_hidden_states=True)
    >>> inputs = BertPreprocessor.from_preset(preset, sequence_length=16)(["a fine film"])
    >>> hidden_states = encoder.predict_on_batch(inputs)["hidden_states"]  # [B, 1 + L, T, H]
    >>> hidden_states.shape
    (1, 3, 16, 128)
    >>> mix = ScalarMix()
    >>> tuple(mix(hidden_states[:, 1:]).shape)  # mix the L layer outputs
    (1, 16, 128)
    """

    def build(self, hidden_states_shape):
        num_states = hidden_states_shape[1]
        if num_states is None:
            raise ValueError("ScalarMix needs a known number of stacked layers (axis 1), "
                             f"got shape {hidden_states_shape}.")
        self.scalar_weights = self.add_weight(
            name="scalar_weights", shape=(num_states,), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def call(self, hidden_states):
        weights = ops.softmax(ops.cast(self.scalar_weights, self.compute_dtype))  # [N]
        mixed = ops.einsum("n,bnth->bth", weights, hidden_states)  # [B, T, H]
        return ops.cast(self.gamma, self.compute_dtype) * mixed

    def compute_output_shape(self, hidden_states_shape):
        return (hidden_states_shape[0],) + tuple(hidden_states_shape[2:])
