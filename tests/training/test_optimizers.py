"""create_optimizer: BERT's weight-decay exclusions on real variables, dense embedding
gradients, gradient accumulation."""

import keras
import numpy as np
import pytest

from keras_bert_suite.training import PerUpdateSchedule, WarmupPolynomialDecay, create_optimizer
from tests.conftest import to_numpy
from tests.tiny_pretraining import RUN_EAGERLY, pretraining_batch, tiny_pretrainer


def _numpy_weights(model):
    return {name: to_numpy(variable) for name, variable in model.weight_map().items()}


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norms_and_biases(name):
    """With a zero gradient only the decoupled decay moves a variable: decayed kernels and
    embeddings shrink by (1 - lr · decay), LayerNorm gammas/betas and biases stay put."""
    pretrainer = tiny_pretrainer()
    optimizer = create_optimizer(name, learning_rate=0.1, weight_decay=0.5)
    before = _numpy_weights(pretrainer)
    variables = pretrainer.trainable_variables
    optimizer.apply([keras.ops.zeros(v.shape) for v in variables], variables)

    after = _numpy_weights(pretrainer)
    kept = {n for n in before if n.endswith(("gamma", "beta", "bias"))}
    assert {"embeddings/layer_norm/gamma", "layer_1/output_layer_norm/beta",
            "mlm/layer_norm/gamma", "mlm/output_bias", "nsp/bias"} <= kept
    for weight_name in before:
        factor = 1.0 if weight_name in kept else 1.0 - 0.1 * 0.5
        np.testing.assert_allclose(after[weight_name], factor * before[weight_name], rtol=1e-6,
                                   err_msg=weight_name)


def test_bert_defaults():
    optimizer = create_optimizer(num_train_steps=1000, num_warmup_steps=100,
                                 gradient_accumulation_steps=4)
    assert isinstance(optimizer, keras.optimizers.AdamW)
    assert optimizer.epsilon == 1e-6 and optimizer.weight_decay == 0.01
    assert optimizer.global_clipnorm == 1.0 and optimizer.clipnorm is None
    assert isinstance(optimizer._learning_rate, PerUpdateSchedule)
    assert isinstance(optimizer._learning_rate.schedule, WarmupPolynomialDecay)
    with pytest.raises(ValueError, match="adamw"):
        create_optimizer("sgd")


def test_accumulated_steps_match_one_large_batch():
    """2 updates from 2 x 2 accumulated batches of 4 == 2 updates from batches of 8, with the
    schedule, clipping and weight decay of create_optimizer."""
    x, y = pretraining_batch(batch=8)  # each half holds the same number of real predictions

    def train(batch_size, gradient_accumulation_steps, initial_weights=None):
        pretrainer = tiny_pretrainer(num_layers=1)  # one layer: half the compile time
        if initial_weights is not None:
            pretrainer.set_weights(initial_weights)
        weights = pretrainer.get_weights()
        pretrainer.compile(optimizer=create_optimizer(
            # Decaying to 0 over 4 updates: a schedule read per micro-batch would give other
            # rates than the large-batch run sees.
            learning_rate=1e-2, num_train_steps=4,
            gradient_accumulation_steps=gradient_accumulation_steps), run_eagerly=RUN_EAGERLY)
        pretrainer.fit(x, y, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
        assert int(to_numpy(pretrainer.optimizer.iterations)) == 2
        return weights, pretrainer

    initial, large_batch = train(8, None)
    _, accumulated = train(4, 2, initial)
    expected, actual = _numpy_weights(large_batch), _numpy_weights(accumulated)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    moved = [np.abs(after - before).max()
             for after, before in zip(large_batch.get_weights(), initial)]
    assert max(moved) > 1e-3


@keras.saving.register_keras_serializable(package="test_optimizers")
class OneHotEmbedding(keras.layers.Embedding):
    """An Embedding whose lookup is a one-hot matmul: a dense gradient on every backend."""

    def call(self, inputs):
        return keras.ops.matmul(keras.ops.one_hot(inputs, self.input_dim), self.embeddings)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_repeated_ids_train_as_with_dense_gradients(name):
    """Looked-up rows (a tf.IndexedSlices gradient on TensorFlow, duplicates included) get
    the same update as through a one-hot matmul."""
    ids = np.array([[0, 0, 0, 1], [1, 0, 0, 2]], "int32")  # [B, T], repeated ids
    targets = np.arange(16, dtype="float32").reshape(2, 8) / 16

    def train(embedding):
        model = keras.Sequential([keras.Input((4,), dtype="int32"), embedding,
                                  keras.layers.Flatten()])
        embedding.embeddings.assign(np.full((3, 2), 0.5, "float32"))
        # No clipping: Keras' clipping happens to densify the gradient on its own.
        model.compile(optimizer=create_optimizer(name, learning_rate=0.1, global_clipnorm=None),
                      loss="mse")
        model.fit(ids, targets, batch_size=2, epochs=3, verbose=0)
        return to_numpy(embedding.embeddings)

    np.testing.assert_allclose(train(keras.layers.Embedding(3, 2)),
                               train(OneHotEmbedding(3, 2)), rtol=1e-5)


def test_first_fit_builds_the_step_once():
    """A task's first `fit` of one batch runs `train_step` once on every backend: traced once
    (TensorFlow, JAX) or run once (PyTorch). On TensorFlow Keras left the optimizer's slots to
    the trace, and a tf.function that creates variables is traced twice."""
    from keras_bert_suite import BertClassifier, BertEncoder

    encoder = BertEncoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
                          intermediate_dim=16)
    classifier = BertClassifier(encoder, num_classes=2)
    calls = []
    step = classifier.train_step

    def counted_step(*args):  # JAX's step also takes the state
        calls.append(1)
        return step(*args)

    classifier.train_step = counted_step
    x = {"token_ids": np.array([[2, 5, 7, 3], [2, 9, 3, 0]], "int32"),
         "segment_ids": np.zeros((2, 4), "int32"),
         "padding_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]], "int32")}
    classifier.fit(x, np.array([0, 1]), batch_size=2, epochs=1, verbose=0)
    assert len(calls) == 1, f"train_step ran {len(calls)} times for one batch"
    assert classifier.optimizer.built and int(to_numpy(classifier.optimizer.iterations)) == 1
