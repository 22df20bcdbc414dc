"""Dropout whose random mask costs less on torch CPU and on JAX; Keras' own elsewhere."""

import keras

from keras_bert_suite import backend_kernels


@keras.saving.register_keras_serializable(package="keras_bert_suite")
class BertDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with cheaper masks where Keras' were a measured cost.

    While training, with 0 < rate < 1 and no noise_shape, the mask comes from
    `backend_kernels.dropout` (torch on CPU without a seed, JAX; the reasons and timings
    are there). Everything else (TensorFlow, torch on CUDA, noise_shape, inference) is
    Keras' Dropout unchanged. Masks keep Keras' semantics: drop `rate`, scale the rest by
    1 / (1 - rate), a fresh mask per call.
    """

    def call(self, inputs, training=False):
        if training and 0.0 < self.rate < 1.0 and self.noise_shape is None:
            dropped = backend_kernels.dropout(inputs, self.rate, self.seed, self.seed_generator)
            if dropped is not None:
                return dropped
        return super().call(inputs, training=training)
