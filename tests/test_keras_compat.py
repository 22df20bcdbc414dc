"""What keras_bert_suite assumes about Keras, checked on Keras itself, on every backend.

First one test per hook of keras_bert_suite/keras_compat.py (the only code that touches
Keras' private attributes): each fails, by name, when a Keras release changes what the hook
relies on. Then the public-but-undocumented behaviour the library uses instead of private
attributes (`objects_to_skip`, what `kernel` returns once quantized, the variable named
"kernel", ModelParallel's tensor layouts). Plain Keras layers and models only: a failure here
is Keras' change, not ours."""

import warnings

import keras
import numpy as np
import pytest

from keras_bert_suite import keras_compat
from keras_bert_suite.layers.lora_dense import stored_kernel
from tests.conftest import to_numpy


class _Block(keras.layers.Layer):
    """A layer holding layers (as our transformer blocks do)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inner = keras.layers.Dense(4, name="inner")
        self.norm = keras.layers.LayerNormalization(name="norm")

    def build(self, input_shape):
        self.inner.build(input_shape)
        self.norm.build(input_shape[:-1] + (4,))

    def call(self, x):
        return self.norm(self.inner(x))


def _nested_model():
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(2, name="head")(_Block(name="block")(inputs))
    return keras.Model(inputs, outputs)


# === keras_compat's hooks ===

def test_all_layers_is_every_layer_model_quantize_walks():
    model = _nested_model()
    names = [layer.name for layer in keras_compat.all_layers(model, include_self=False)]
    assert {"block", "inner", "norm", "head"} <= set(names)  # sublayers of sublayers too
    assert model.name not in names
    assert keras_compat.all_layers(model)[0] is model
    # Model.quantize offers each layer of its walk to `filters`: the same layers, in order.
    offered = []
    model.quantize("int8", filters=lambda layer: offered.append(layer) and False)
    assert [id(layer) for layer in offered] == [id(layer) for layer in
                                                 keras_compat.all_layers(model)]


def test_state_tracking_unlocked_lets_a_built_layer_add_variables():
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    with pytest.raises(ValueError, match="cannot add new elements of state"):
        layer.add_weight(name="late", shape=(2,))
    with keras_compat.state_tracking_unlocked(layer):
        late = layer.add_weight(name="late", shape=(2,))
    assert any(variable is late for variable in layer.weights)  # tracked, saved
    with pytest.raises(ValueError, match="cannot add new elements of state"):
        layer.add_weight(name="later", shape=(2,))  # locked again, as it was


def test_state_tracking_unlocked_keeps_a_model_open_through_quantize():
    """Our models take a preprocessor after quantize; Keras' quantize wrapper locks them."""
    model = _nested_model()
    with keras_compat.state_tracking_unlocked(model):
        model.quantize("int8", filters=lambda layer: isinstance(layer, keras.layers.Dense))
    assert model.get_layer("head").kernel.dtype == "int8"
    model.extra = keras.layers.Dense(1)  # a new sublayer: raises if the model stayed locked


class _SubclassedDense(keras.layers.Dense):
    def quantize(self, mode=None, type_check=True, config=None):
        keras_compat.quantize_subclass(super().quantize, mode, config)


def test_quantize_subclass_quantizes_a_dense_subclass():
    keras.utils.set_random_seed(0)
    x = np.random.uniform(-1, 1, (4, 8)).astype("float32")
    plain = keras.layers.Dense(6)
    plain.build((None, 8))
    subclass = _SubclassedDense(6)
    subclass.build((None, 8))
    subclass.set_weights(plain.get_weights())
    plain.quantize("int8")
    subclass.quantize("int8")
    assert subclass.quantization_mode == "int8" and subclass.kernel.dtype == "int8"
    np.testing.assert_array_equal(to_numpy(subclass.kernel), to_numpy(plain.kernel))
    np.testing.assert_array_equal(to_numpy(subclass(x)), to_numpy(plain(x)))


def test_keras_sums_replica_gradients_only_in_the_hook_we_replace():
    """gradients_already_summed replaces `_all_reduce_sum_gradients`: on TensorFlow Keras'
    optimizer must still sum the replicas there (and only there); elsewhere Keras has no such
    step, so the replacement is inert."""
    from keras_bert_suite.training.optimizers import AdamW

    grads_and_vars = [(np.ones(2), "variable")]
    assert AdamW(learning_rate=1e-3)._all_reduce_sum_gradients(grads_and_vars) is grads_and_vars
    keras_has_it = hasattr(keras.optimizers.AdamW, "_all_reduce_sum_gradients")
    if keras.backend.backend() != "tensorflow":
        assert not keras_has_it, "Keras now sums gradients on this backend too: check the hook"
        return
    assert keras_has_it
    import tensorflow as tf

    summed = []

    class Spy(keras.optimizers.SGD):
        def _all_reduce_sum_gradients(self, grads_and_vars):
            summed.append(True)
            return super()._all_reduce_sum_gradients(grads_and_vars)

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        variable = keras.Variable(np.ones(3, "float32"))
        optimizer = Spy(learning_rate=0.5)
        optimizer.build([variable])
    strategy.run(lambda: optimizer.apply([tf.ones(3)], [variable]))
    assert summed, "Keras' TensorFlow optimizer no longer calls _all_reduce_sum_gradients"
    np.testing.assert_allclose(to_numpy(variable), np.full(3, 0.5))

def test_keras_decays_and_updates_only_in_the_hooks_we_replace():
    """update_replaces_weight_decay replaces `_apply_weight_decay` and `_backend_update_step`:
    Keras' `apply` must decay and update there, decay first, and nowhere else (FusedAdamW
    would otherwise decay twice, or never). Handing both to the optimizer leaves a variable
    untouched; handing both back gives Keras' AdamW step."""
    calls = []

    @keras_compat.update_replaces_weight_decay
    class Probe(keras.optimizers.AdamW):
        takes_over = True

        def decays_in_update(self):
            calls.append("decay")
            return self.takes_over

        def update_all(self, grads, trainable_variables, learning_rate):
            calls.append("update")
            return self.takes_over

    for takes_over in (True, False):
        calls.clear()
        probe, keras_adamw = Probe(learning_rate=0.1), keras.optimizers.AdamW(learning_rate=0.1)
        probe.takes_over = takes_over
        variables = [keras.Variable(np.ones(2, "float32")) for _ in range(2)]
        for optimizer, variable in zip((probe, keras_adamw), variables):
            optimizer.apply([keras.ops.ones(2)], [variable])
        assert calls == ["decay", "update"]
        expected = np.ones(2) if takes_over else to_numpy(variables[1])
        np.testing.assert_array_equal(to_numpy(variables[0]), expected)
    assert not np.allclose(to_numpy(variables[1]), 1.0)


# === Public behaviour the library relies on in place of private attributes ===

def test_save_and_load_weights_leave_out_objects_to_skip(tmp_path):
    """tasks/task.py: a preset's task weights without the optimizer's state."""
    import h5py

    model = _nested_model()
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((2, 3)), np.ones((2, 2)), verbose=0)
    path = str(tmp_path / "task.weights.h5")
    keras.saving.save_weights(model, path, objects_to_skip=[model.optimizer])
    with h5py.File(path) as f:
        stored = []
        f.visit(stored.append)
    assert stored and not [name for name in stored if "optimizer" in name]

    copy = _nested_model()
    copy.compile(optimizer="adam", loss="mse")  # an unbuilt optimizer: nothing to load
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        keras.saving.load_weights(copy, path, objects_to_skip=[copy.optimizer])
    for ours, theirs in zip(copy.weights, model.weights):
        np.testing.assert_array_equal(to_numpy(ours), to_numpy(theirs))


@pytest.mark.parametrize("make", [
    lambda: keras.layers.Dense(6),
    lambda: keras.layers.EinsumDense("bh,hnd->bnd", output_shape=(2, 3), bias_axes="nd"),
])
def test_the_kernel_variable_and_what_kernel_returns(make):
    """layers/lora_dense.py's stored_kernel (W without the adapters) and layers/float_weights.py's
    reading of `kernel` / `embeddings` as the stored int8 values."""
    layer = make()
    layer.build((None, 8))
    assert stored_kernel(layer) is layer.kernel  # float, no LoRA: the variable itself
    layer.enable_lora(2, b_initializer="ones")
    assert not np.allclose(to_numpy(layer.kernel), to_numpy(stored_kernel(layer)))
    assert tuple(stored_kernel(layer).shape) == tuple(layer.kernel.shape)

    quantized = make()
    quantized.build((None, 8))
    quantized.quantize("int8")
    assert stored_kernel(quantized).dtype == "int8"
    assert quantized.kernel is stored_kernel(quantized)  # int8 `kernel`: as stored

    embedding = keras.layers.Embedding(10, 4)
    embedding.build((None,))
    embedding.quantize("int8")
    assert embedding.embeddings.dtype == "int8"
    assert embedding.embeddings is next(v for v in embedding.weights if v.name == "embeddings")


@pytest.mark.skipif(keras.backend.backend() == "torch",
                    reason="keras.distribution is absent on PyTorch (Keras 3.15)")
def test_model_parallel_tensor_layout_is_its_layout_map_entry():
    """models/encoder.py checks a split by `distribution.get_tensor_layout(variable path)`."""
    from keras import distribution as kd

    mesh = kd.DeviceMesh((1, 2), ("batch", "model"), ["cpu:0", "cpu:1"])
    layout_map = kd.LayoutMap(mesh)
    layout_map["block_.*/qkv/kernel"] = (None, None, "model", None)
    distribution = kd.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    assert distribution.device_mesh is mesh
    assert tuple(distribution.get_tensor_layout("block_3/qkv/kernel").axes) == (
        None, None, "model", None)
    assert distribution.get_tensor_layout("block_3/output/kernel") is None
    assert kd.DataParallel(devices=["cpu:0"]).get_tensor_layout("block_3/qkv/kernel") is None

