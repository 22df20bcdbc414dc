"""`one_device` on every backend: the model is built and trained where the distribution
says, and training there gives the weights of a run with no distribution at all."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_suite.distribution import Distribution, create_distribution
from keras_bert_suite.training import create_optimizer
from tests.tiny_pretraining import RUN_EAGERLY, pretraining_batch, tiny_pretrainer

CPU = {"tensorflow": "/cpu:0", "jax": "cpu:0", "torch": "cpu"}[keras.backend.backend()]


def _two_steps(distribution):
    keras.utils.set_random_seed(0)
    with distribution.scope():
        pretrainer = tiny_pretrainer()
        pretrainer.compile(optimizer=create_optimizer(learning_rate=1e-2),
                           run_eagerly=RUN_EAGERLY,
                           steps_per_execution=distribution.steps_per_execution)
    x, y = pretraining_batch(batch=4)
    with distribution.run_scope():
        pretrainer.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(2), epochs=1,
                       verbose=0, shuffle=False)
    return pretrainer


def test_one_device_trains_there_like_no_distribution():
    distribution = create_distribution({"strategy": "one_device", "device": CPU})
    assert distribution.num_replicas == 1 and distribution.is_chief
    placed = _two_steps(distribution)
    assert int(keras.ops.convert_to_numpy(placed.optimizer.iterations)) == 2
    if keras.backend.backend() == "tensorflow":
        assert all(v.value.device.endswith("CPU:0") for v in placed.weights)
    plain = _two_steps(Distribution())
    for a, b in zip(placed.get_weights(), plain.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
