"""The shared test harness: every public class goes through one of these checks, by one call,
on whatever Keras backend the pytest process runs (KerasHub's `TestCase`, as functions).

* `run_layer_test`: a layer (or a functional model such as `BertEncoder`): its `__init__`
  arguments stored under their names and in `get_config`, the config round trip (by class
  and by registered name through JSON), output shapes against the caller's expectation and
  `compute_output_shape`, equal outputs after a `.keras` round trip, and one compiled
  training step that moves every trainable weight.
* `run_task_test`: a task model: the same config checks, one compiled `fit` step with the
  task's own defaults (finite loss, weights move), `predict` on raw text, and
  `run_model_saving_test` (with equal raw-text predictions after the reload).
* `run_model_saving_test`: `.keras` save / load: same class, same config, same outputs.
* `run_quantization_test`: `quantize("int8")` (run_task_test runs it too): every Dense,
  EinsumDense and Embedding becomes int8, the outputs move a little (not at all would mean
  nothing quantized), `weight_map()` reads floats within half a quantization step of the
  originals, and a `.keras` round trip (and a task preset) keeps the model quantized with the
  same outputs.
* `run_preset_test`: `from_preset`, then `save_to_preset` / `from_preset` again: same
  class, config and outputs.
* `run_serving_form_test`: an encoder's layers against their serving forms
  (`keras_bert_suite/layers/serving/`), layer by layer (embeddings, projection, each block as
  scheduled, pooler) and as the whole `ServingEncoder`, float32.
* `run_preprocessor_test`: a text layer (TensorFlow ops on every backend): config round
  trip, the same output in a tf.data graph as eagerly and from the restored layer.
* `run_optimizer_test`, `run_loss_test`, `run_metric_test`, `run_schedule_test`: config
  round trip, then values against numbers the test computed itself.

"Graph mode" is `run_eagerly=False`: tf.function on TensorFlow, `jax.jit` on JAX (Keras
only jits with `jit_compile`), and torch's ordinary (non-eager-flag) step on PyTorch. XLA
is left off on TensorFlow, where compiling a step costs more than these tests run.
"""

import contextlib
import inspect
import json
import math
import os
import tempfile

import keras
import numpy as np
from keras import ops

PACKAGE = "keras_bert_suite"
RTOL, ATOL = 1e-5, 1e-6
GRAPH_MODE = dict(run_eagerly=False, jit_compile=keras.backend.backend() == "jax")


# === Comparing structures of tensors ===


def to_numpy(x):
    """A backend, TensorFlow or NumPy tensor (or a tf.RaggedTensor) as NumPy / nested lists."""
    if hasattr(x, "to_list"):  # tf.RaggedTensor
        return x.to_list()
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray) and type(x).__module__.startswith(
            "tensorflow"):
        return x.numpy()
    if isinstance(x, (np.ndarray, np.generic, int, float, bool, str, bytes, list)):
        return np.asarray(x) if not isinstance(x, list) else x
    return np.asarray(ops.convert_to_numpy(x))


def _structure(x):
    if isinstance(x, dict):
        return {key: _structure(value) for key, value in x.items()}
    if isinstance(x, tuple):
        return tuple(_structure(value) for value in x)
    return to_numpy(x)


def assert_all_close(actual, expected, rtol=RTOL, atol=ATOL, what="output"):
    """Equal structures (dicts, tuples) of tensors: floats to rtol/atol, the rest exactly."""
    actual, expected = _structure(actual), _structure(expected)
    _compare(actual, expected, rtol, atol, what)


def _compare(actual, expected, rtol, atol, where):
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and sorted(actual) == sorted(expected), (
            f"{where}: keys {sorted(actual) if isinstance(actual, dict) else type(actual)} "
            f"!= {sorted(expected)}")
        for key in expected:
            _compare(actual[key], expected[key], rtol, atol, f"{where}[{key!r}]")
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, f"{where}[{i}]")
    elif isinstance(expected, list):  # a ragged tensor's rows
        assert actual == expected, f"{where}: {actual} != {expected}"
    else:
        actual, expected = np.asarray(actual), np.asarray(expected)
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=where)


def _shapes(x):
    return keras.tree.map_structure(lambda t: tuple(t.shape), x)


def _json(config):
    """A config as JSON text (what a `.keras` file stores): compares tuples and lists alike."""
    return json.dumps(config, sort_keys=True, default=str)


@contextlib.contextmanager
def _directory(tmp_path):
    if tmp_path is not None:
        os.makedirs(tmp_path, exist_ok=True)
        yield os.fspath(tmp_path)
    else:
        with tempfile.TemporaryDirectory() as directory:
            yield directory


# === Configs ===


def check_config_round_trip(obj):
    """`from_config(get_config())` and Keras' serialize -> JSON -> deserialize (what a `.keras`
    file stores, looked up by the registered name) both rebuild an object with the same
    config. Returns the deserialized object, for checks on its behaviour."""
    config = obj.get_config()
    json.dumps(config)  # a config must be JSON as it is
    assert _json(type(obj).from_config(config).get_config()) == _json(config)

    serialized = keras.saving.serialize_keras_object(obj)
    assert serialized["registered_name"] == f"{PACKAGE}>{type(obj).__name__}", (
        f"{type(obj).__name__} is not registered under package={PACKAGE!r}: "
        f"{serialized['registered_name']}")
    restored = keras.saving.deserialize_keras_object(json.loads(json.dumps(serialized)))
    assert type(restored) is type(obj)
    assert _json(restored.get_config()) == _json(config)
    return restored


# `backbone=` is KerasHub's name for `encoder=` (kept as the `backbone` property, not config).
ALIASES = ("backbone",)


def check_init_arguments(obj, init_kwargs=None, renamed=None):
    """Keras' convention: every `__init__` argument is stored under the same attribute name
    (or the one `renamed` gives, e.g. {"layers": "feature_layers"}) and is a `get_config()`
    key; the values given in `init_kwargs` come back unchanged."""
    init_kwargs, renamed = init_kwargs or {}, renamed or {}
    config = obj.get_config()
    name = type(obj).__name__
    for parameter in list(inspect.signature(type(obj).__init__).parameters.values())[1:]:
        if parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
            continue
        if parameter.name in ALIASES:
            continue
        attribute = renamed.get(parameter.name, parameter.name)
        assert hasattr(obj, attribute), (
            f"{name}.__init__ argument {parameter.name!r} is not stored as self.{attribute}")
        assert parameter.name in config, (
            f"{name}.__init__ argument {parameter.name!r} is missing from get_config()")
        if parameter.name not in init_kwargs:
            continue
        value = init_kwargs[parameter.name]
        if isinstance(value, keras.layers.Layer):
            assert getattr(obj, attribute) is value, f"{name}.{attribute} is not the given layer"
        elif isinstance(value, (bool, int, float, str, list, tuple)) or value is None:
            assert _json(getattr(obj, attribute)) == _json(value), (
                f"{name}.{attribute} = {getattr(obj, attribute)!r}, given {value!r}")
            assert _json(config[parameter.name]) == _json(value), (
                f"{name}.get_config()[{parameter.name!r}] = {config[parameter.name]!r}, "
                f"given {value!r}")


# === Layers ===


def _call(layer, data, call_kwargs):
    """Dict inputs are keyword arguments of a layer and the single input of a model."""
    if isinstance(data, dict) and not isinstance(layer, keras.Model):
        return layer(**data, **call_kwargs)
    return layer(data, **call_kwargs)


def _symbolic(data, name=None):
    """keras.Input for every array of `data` (nested dicts too: a block's context)."""
    if isinstance(data, dict):
        return {key: _symbolic(x, key if name is None else f"{name}_{key}")
                for key, x in data.items()}
    x = np.asarray(data)
    return keras.Input(shape=x.shape[1:], dtype=str(x.dtype), name=name)


def _input_shapes(layer, data):
    if isinstance(layer, keras.Model) or not isinstance(data, dict):
        return (_shapes(data),), {}
    return (), {f"{name}_shape": keras.tree.map_structure(lambda x: tuple(np.shape(x)), x)
                for name, x in data.items()}


def _is_float(x):
    return keras.backend.standardize_dtype(x.dtype).startswith(("float", "bfloat"))


class _OneTensor(keras.Model):
    """Wraps a layer for a training step: its floating outputs flattened into one [B, N]."""

    def __init__(self, layer, call_kwargs):
        # TensorFlow name scopes may not start with "_" (the default name would be).
        super().__init__(name="one_tensor")
        self.inner = layer
        self.call_kwargs = call_kwargs

    def call(self, inputs, training=None):
        outputs = _call(self.inner, inputs, {**self.call_kwargs, "training": training})
        leaves = [ops.reshape(ops.cast(x, "float32"), (ops.shape(x)[0], -1))
                  for x in keras.tree.flatten(outputs) if _is_float(x)]
        return ops.concatenate(leaves, axis=1)


def check_training_step(model, x, y, sample_weight=None, unchanged=(), batch_size=None):
    """One compiled `fit` step (graph mode, `model`'s compiled loss): the loss is finite and
    every trainable variable moves, except those whose path contains a string of
    `unchanged`. Returns the logs of that step."""
    before = {v.path: np.array(to_numpy(v)) for v in model.trainable_variables}
    assert before, f"{type(model).__name__} has no trainable variables"
    history = model.fit(x, y, sample_weight=sample_weight, batch_size=batch_size, epochs=1,
                        steps_per_epoch=1, verbose=0, shuffle=False).history
    assert np.isfinite(history["loss"][0]), history
    frozen = [path for path in before if any(s in path for s in unchanged)]
    still = [v.path for v in model.trainable_variables
             if v.path not in frozen and np.array_equal(to_numpy(v), before[v.path])]
    assert not still, f"one training step left these variables unchanged: {still}"
    return {name: values[0] for name, values in history.items()}


def run_layer_test(layer_class, init_kwargs, input_data, expected_output_shape, *,
                   call_kwargs=None, expected_num_trainable_weights=None,
                   expected_output=None, run_training_check=True, renamed=None,
                   tmp_path=None, rtol=RTOL, atol=ATOL):
    """The checks every layer of ours passes (see the module doc).

    input_data: one array, or a dict of arrays passed as keyword arguments (a `keras.Model`
        such as `BertEncoder` gets the dict as its one input).
    expected_output_shape: a shape tuple, or a structure of them like the output; computed
        by the test from the arguments.
    call_kwargs: non-tensor call arguments (e.g. `training=False`).
    expected_output: arrays, or `f(layer, input_data)` computing them (e.g. in NumPy from
        the layer's weights).
    Returns the layer and its output on `input_data`.
    """
    call_kwargs = dict(call_kwargs or {})
    layer = layer_class(**init_kwargs)
    check_init_arguments(layer, init_kwargs, renamed)
    check_config_round_trip(layer)

    # Shapes: the real output, compute_output_shape on the same shapes, the symbolic call.
    output = _call(layer, input_data, call_kwargs)
    assert _shapes(output) == _shapes_of(expected_output_shape), (
        f"output shape {_shapes(output)} != expected {expected_output_shape}")
    args, kwargs = _input_shapes(layer, input_data)
    computed = layer.compute_output_shape(*args, **kwargs)
    assert _shapes_of(computed) == _shapes_of(expected_output_shape), (
        f"compute_output_shape gives {computed}, the layer returned {_shapes(output)}")
    for x in keras.tree.flatten(output):
        if _is_float(x):
            assert keras.backend.standardize_dtype(x.dtype) == layer.compute_dtype
    if callable(expected_output):  # computed by the test from the layer's own weights
        expected_output = expected_output(layer, input_data)
    if expected_output is not None:
        assert_all_close(output, expected_output, rtol, atol)
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights, (
            [w.path for w in layer.trainable_weights])

    # `.keras` round trip: of the model itself, or of a functional model wrapping the layer.
    if isinstance(layer, keras.Model):
        model = layer
    else:
        inputs = _symbolic(input_data)
        symbolic_output = _call(layer, inputs, call_kwargs)
        _check_symbolic_shapes(symbolic_output, expected_output_shape)
        model = keras.Model(inputs, symbolic_output)
    run_model_saving_test(model, input_data, tmp_path=tmp_path, rtol=rtol, atol=atol)

    if run_training_check and layer.trainable_weights:
        trainer = _OneTensor(layer_class(**init_kwargs), call_kwargs)  # keeps `layer` as is
        target = np.random.default_rng(0).normal(
            size=tuple(to_numpy(trainer(input_data)).shape)).astype("float32")
        trainer.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", **GRAPH_MODE)
        check_training_step(trainer, input_data, target)
    return layer, output


def _shapes_of(shape):
    """A shape or a structure of shapes, with tuples everywhere (shapes are leaves)."""
    if isinstance(shape, dict):
        return {key: _shapes_of(value) for key, value in shape.items()}
    return tuple(shape)


def _check_symbolic_shapes(symbolic, expected):
    """Symbolic (batch-unknown) shapes agree with the expected ones where they are known."""
    symbolic_shapes, expected = _shapes(symbolic), _shapes_of(expected)
    if isinstance(expected, dict):
        assert sorted(symbolic_shapes) == sorted(expected), sorted(symbolic_shapes)
        pairs = [(symbolic_shapes[key], expected[key]) for key in expected]
    else:
        pairs = [(symbolic_shapes, expected)]
    for got, want in pairs:
        assert len(got) == len(want), f"symbolic output shape {got} vs {want}"
        for g, w in zip(got, want):
            assert g is None or g == w, f"symbolic output shape {got} vs {want}"


# === Models and tasks ===


def _model_call(model, x):
    return model(x, training=False)


def run_model_saving_test(model, input_data, *, tmp_path=None, rtol=RTOL, atol=ATOL):
    """`.keras` save and load: the same class, config and outputs. Returns the loaded model."""
    return _saving_round_trip(model, input_data, None, tmp_path, rtol, atol)[0]


def _saving_round_trip(model, input_data, expected, tmp_path, rtol, atol):
    """run_model_saving_test, given `model`'s output on `input_data` when the caller has it;
    returns the loaded model and its output."""
    if expected is None:
        expected = _model_call(model, input_data)
    with _directory(tmp_path) as directory:
        path = os.path.join(directory, f"{type(model).__name__}.keras")
        model.save(path)
        restored = keras.saving.load_model(path)
    assert type(restored) is type(model), f"{type(restored)} is not {type(model)}"
    assert _json(restored.get_config()) == _json(model.get_config())
    assert len(restored.weights) == len(model.weights)
    output = _model_call(restored, input_data)
    assert_all_close(output, expected, rtol, atol,
                     what=f"{type(model).__name__} after a .keras round trip")
    return restored, output


def _model_inputs(task, x):
    """Encoder inputs from `fit`'s x: as they are, or through the task's preprocessor."""
    if isinstance(x, dict):
        return x
    return _structure(task.preprocessor(x))


def _finite(outputs):
    for x in keras.tree.flatten(_structure(outputs)):
        x = np.asarray(x)
        if x.dtype.kind == "f":
            assert np.all(np.isfinite(x)), "non-finite output"


def run_task_test(task, train_data, raw_predict_input=None, *, expected_output_shape=None,
                  unchanged=(), renamed=None, compile_kwargs=None, tmp_path=None, rtol=RTOL,
                  atol=ATOL):
    """The checks every task model passes (see the module doc).

    train_data: `(x, y)` or `(x, y, sample_weight)` as `fit` takes them: encoder inputs or,
        with a preprocessor, raw text.
    raw_predict_input: raw text for `predict` (needs a preprocessor); the predictions must
        be finite. After the `.keras` round trip the preprocessor's config must be equal (so
        the restored model's text path is the same).
    expected_output_shape: the model's output shape(s) on the encoder inputs of `x`.
    unchanged: paths of variables a training step may leave as they are.
    compile_kwargs: for a task without a default loss (the feature extractor); the task's
        defaults fill in the rest.
    Returns (the restored task, the predictions on `raw_predict_input` or None).
    """
    check_init_arguments(task, renamed=renamed)
    check_config_round_trip(task)
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(train_data)

    inputs = _model_inputs(task, x)
    if expected_output_shape is not None:
        output = _model_call(task, inputs)
        assert _shapes(output) == _shapes_of(expected_output_shape), (
            f"{type(task).__name__} output {_shapes(output)} != {expected_output_shape}")

    task.compile(**GRAPH_MODE, **(compile_kwargs or {}))  # the task's own defaults
    check_training_step(task, x, y, sample_weight, unchanged=unchanged, batch_size=64)

    predictions = None
    if raw_predict_input is not None:
        predictions = task.predict(raw_predict_input, verbose=0)
        _finite(predictions)

    restored, restored_output = _saving_round_trip(task, inputs, None, tmp_path, rtol, atol)
    if task.preprocessor is not None:
        assert _json(restored.preprocessor.get_config()) == _json(task.preprocessor.get_config())
    # The restored copy is quantized: the task the caller holds stays float.
    run_quantization_test(restored, inputs, raw_predict_input=raw_predict_input,
                          float_predictions=predictions, float_output=restored_output,
                          tmp_path=tmp_path)
    return restored, predictions


QUANTIZABLE = (keras.layers.Dense, keras.layers.EinsumDense, keras.layers.Embedding)
# Output error of int8 (a scale per column, inputs per call) on the tiny random models here:
# ||quantized - float|| / ||float|| is 0.04-3% for most outputs (span logits less: their
# masked -1e9s), but a one-logit head (regression, choices) sums 16 terms that nearly cancel
# and measured 0.3-12% over six seeds of the same regressor. A broken quantization (wrong
# scale, a float kernel read as int8) is off by 100% or more.
QUANTIZED_RELATIVE_ERROR = 0.25


def run_quantization_test(model, input_data, *, raw_predict_input=None,
                          float_predictions=None, float_output=None, tmp_path=None):
    """`model.quantize("int8")` (the model is changed): see the module doc. Returns the
    quantized model restored from its `.keras` file.

    float_predictions, float_output: the float model's predictions on `raw_predict_input`
        and its output on `input_data`, when the caller has them (run_task_test: from the
        model this one is a `.keras` copy of); computed here otherwise."""
    from keras_bert_suite.keras_compat import all_layers

    encoder = model if hasattr(model, "transformer_layers") else model.encoder
    float_weights = {name: to_numpy(value) for name, value in encoder.weight_map().items()}
    expected = _model_call(model, input_data) if float_output is None else float_output
    if raw_predict_input is not None and float_predictions is None:
        float_predictions = model.predict(raw_predict_input, verbose=0)

    model.quantize("int8")
    left_float = [layer.path for layer in all_layers(model)
                  if isinstance(layer, QUANTIZABLE) and layer.quantization_mode != "int8"]
    assert not left_float, f"{type(model).__name__}.quantize left {left_float} in float"
    quantized_output = _model_call(model, input_data)
    _check_quantized_outputs(quantized_output, expected, type(model).__name__)
    if raw_predict_input is not None:  # the compiled predict path, rebuilt after quantize
        _check_quantized_outputs(model.predict(raw_predict_input, verbose=0),
                                 float_predictions, f"{type(model).__name__}.predict")

    changed = 0
    for name, value in encoder.weight_map().items():
        value = to_numpy(value)
        assert value.dtype == np.float32, f"weight_map()['{name}'] is {value.dtype}"
        original = float_weights[name]
        # Half a step of the coarsest scale: |w| max / 127 / 2.
        bound = np.abs(original).max() / 254 * 1.001 + 1e-7
        assert np.abs(value - original).max() <= bound, name
        changed += not np.array_equal(value, original)
    assert changed, "weight_map() returned the float weights of a quantized model"
    restored = _saving_round_trip(model, input_data, quantized_output, tmp_path, RTOL, ATOL)[0]
    reloaded = [restored]
    if getattr(model, "preprocessor", None) is not None:  # a task preset (vocabulary inside)
        with _directory(tmp_path) as directory:
            preset = model.save_to_preset(os.path.join(directory, "quantized_preset"))
            reloaded.append(type(model).from_preset(preset))
        assert_all_close(_model_call(reloaded[-1], input_data), quantized_output,
                         what=f"quantized {type(model).__name__} after save_to_preset")
    for copy in reloaded:
        assert all(layer.quantization_mode == "int8" for layer in all_layers(copy)
                   if isinstance(layer, QUANTIZABLE))
    return restored


def _check_quantized_outputs(actual, expected, what):
    actual, expected = _structure(actual), _structure(expected)
    for key, got, want in zip(_leaf_names(expected), keras.tree.flatten(actual),
                              keras.tree.flatten(expected)):
        want = np.asarray(want)
        if want.dtype.kind != "f":  # e.g. answers and tags after the task's postprocessing
            continue
        error = np.linalg.norm(np.asarray(got) - want) / np.linalg.norm(want)
        assert 0 < error <= QUANTIZED_RELATIVE_ERROR, (
            f"{what}[{key}]: relative error {error:.2e} after int8 quantization")


def _leaf_names(structure):
    if isinstance(structure, dict):
        return [f"{key}/{name}".rstrip("/") for key in sorted(structure)
                for name in _leaf_names(structure[key])]
    return [""]


def run_preset_test(cls, preset, input_data, *, init_kwargs=None, expected_output_shape=None,
                    tmp_path=None, rtol=RTOL, atol=ATOL):
    """`cls.from_preset(preset, **init_kwargs)`, then a preset saved from it (`save_to_preset`,
    or the encoder's `save_preset`) loads back as the same class with the same config and
    outputs. Returns the model loaded from the saved preset."""
    model = cls.from_preset(preset, **(init_kwargs or {}))
    assert isinstance(model, cls)
    output = _model_call(model, input_data)
    if expected_output_shape is not None:
        assert _shapes(output) == _shapes_of(expected_output_shape), (
            f"output {_shapes(output)} != {expected_output_shape}")
    save = getattr(model, "save_to_preset", None) or model.save_preset
    with _directory(tmp_path) as directory:
        preset_dir = os.path.join(directory, "preset")
        save(preset_dir)
        restored = cls.from_preset(preset_dir)
    assert type(restored) is type(model)
    assert _json(_unnamed(restored.get_config())) == _json(_unnamed(model.get_config()))
    assert_all_close(_model_call(restored, input_data), output, rtol, atol,
                     what=f"{cls.__name__} after save_to_preset / from_preset")
    return restored


def _unnamed(config):
    """A config without the auto-generated object name (a preset stores no names)."""
    return {key: value for key, value in config.items() if key != "name"}


# === Text layers ===


def run_preprocessor_test(layer, input_data, *, call_kwargs=None, expected_output=None,
                          expected_output_shape=None, renamed=None):
    """A text layer (TensorFlow ops under every backend): `__init__` arguments stored, the
    config round trip, the same output eagerly, inside a tf.data graph, and from the layer
    rebuilt from its serialized config. Returns the eager output."""
    import tensorflow as tf  # text layers are TensorFlow by design, on every Keras backend

    call_kwargs = dict(call_kwargs or {})
    check_init_arguments(layer, renamed=renamed)
    restored = check_config_round_trip(layer)

    output = layer(input_data, **call_kwargs)
    graph_output = tf.data.Dataset.from_tensors(0).map(
        lambda _: layer(input_data, **call_kwargs)).get_single_element()
    assert_all_close(graph_output, output, what=f"{type(layer).__name__} in tf.data")
    assert_all_close(restored(input_data, **call_kwargs), output,
                     what=f"{type(layer).__name__} rebuilt from its config")
    if expected_output_shape is not None:
        assert _shapes(output) == _shapes_of(expected_output_shape), _shapes(output)
    if expected_output is not None:
        assert_all_close(output, expected_output, what=type(layer).__name__)
    return output


# === Training objects ===


def run_optimizer_test(optimizer, variables, gradients, expected_variables, *,
                       rtol=RTOL, atol=ATOL):
    """Config round trip, then one `apply` of `gradients` ({name: array}) to fresh variables
    ({name: array}, named so that name-based rules such as weight-decay exclusion apply)
    gives `expected_variables` (computed by the test from the optimizer's formula). The
    optimizer rebuilt from its config takes the same step (what a `.keras` reload of a
    compiled model trains with)."""
    restored = check_config_round_trip(optimizer)
    for candidate in (optimizer, restored):
        weights = {name: keras.Variable(np.asarray(value, "float32"), name=name)
                   for name, value in variables.items()}
        candidate.apply([ops.convert_to_tensor(np.asarray(gradients[name], "float32"))
                         for name in weights], list(weights.values()))
        assert_all_close({name: v for name, v in weights.items()}, expected_variables, rtol,
                         atol, what=f"{type(candidate).__name__} after one step")
    return restored


def run_loss_test(loss, y_true, y_pred, expected, *, sample_weight=None, rtol=RTOL,
                  atol=ATOL):
    """Config round trip; the loss and the restored loss both give `expected`."""
    restored = check_config_round_trip(loss)
    for candidate in (loss, restored):
        value = candidate(y_true, y_pred, sample_weight=sample_weight)
        np.testing.assert_allclose(to_numpy(value), expected, rtol=rtol, atol=atol,
                                   err_msg=type(candidate).__name__)
    return restored


def run_metric_test(metric, y_true, y_pred, expected, *, sample_weight=None, rtol=RTOL,
                    atol=ATOL):
    """Config round trip; after `update_state` the metric and the restored one both give
    `expected`; `reset_state` forgets the update (a second update gives `expected` again)."""
    restored = check_config_round_trip(metric)
    for candidate in (metric, restored):
        candidate.update_state(y_true, y_pred, sample_weight=sample_weight)
        np.testing.assert_allclose(to_numpy(candidate.result()), expected, rtol=rtol,
                                   atol=atol, err_msg=type(candidate).__name__)
    metric.reset_state()
    metric.update_state(y_true, y_pred, sample_weight=sample_weight)
    np.testing.assert_allclose(to_numpy(metric.result()), expected, rtol=rtol, atol=atol,
                               err_msg=f"{type(metric).__name__} after reset_state")
    return restored


def run_schedule_test(schedule, steps, expected, *, rtol=RTOL, atol=ATOL):
    """Config round trip; the schedule and the restored one give `expected` at `steps`."""
    restored = check_config_round_trip(schedule)
    for candidate in (schedule, restored):
        values = [float(to_numpy(candidate(step))) for step in steps]
        np.testing.assert_allclose(values, expected, rtol=rtol, atol=atol,
                                   err_msg=type(candidate).__name__)
        assert all(math.isfinite(v) for v in values)
    return restored


# === Serving forms ===


def run_serving_form_test(encoder, inputs, rtol=1e-4, atol=1e-5):
    """Each layer of `encoder` (a BertEncoder) computes what its serving form computes on the
    previous layer's output, and the whole ServingEncoder what the encoder computes
    (`inputs`: packed encoder inputs with padding). The forms are TensorFlow ops on the
    weights as NumPy, whatever the backend."""
    import tensorflow as tf

    from keras_bert_suite.export.serving_encoder import ServingEncoder
    from keras_bert_suite.layers.serving.dense import dense, reader
    from keras_bert_suite.layers.serving.embeddings import embeddings

    weights = {name: to_numpy(value) for name, value in encoder.weight_map().items()}
    ids = {name: tf.constant(value, tf.int32) for name, value in inputs.items()}
    batch, length = inputs["token_ids"].shape
    mask = inputs["padding_mask"]

    def flat(x):
        return to_numpy(x).reshape(batch * length, -1)

    x = encoder.embeddings(inputs["token_ids"], inputs["segment_ids"], mask, training=False)
    pieces = encoder.block_kind.encoder  # what the kind adds around its blocks
    served = embeddings(reader(weights, "embeddings/"), ids["token_ids"], ids["segment_ids"],
                        ids["padding_mask"], encoder.num_segments > 0, encoder.position_offset,
                        encoder.layer_norm_epsilon, pieces.position_rows,
                        pieces.embedding_norm_bias)
    _compare(served.numpy(), flat(x), rtol, atol, "embeddings")
    if encoder.embedding_projection is not None:
        projected = encoder.embedding_projection(x)
        served = dense(tf.constant(flat(x)), reader(weights, "embeddings/projection/"))
        _compare(served.numpy(), flat(projected), rtol, atol, "embedding projection")
        x = projected
    keras_inputs = {name: keras.ops.convert_to_tensor(value) for name, value in inputs.items()}
    context = pieces.context(encoder.parts, keras_inputs)  # as the encoder passes it
    serving = pieces.serving(encoder.config, reader(weights))
    served_context = serving.context(ids, batch, length)
    for layer, block_indices in enumerate(encoder.layer_blocks):
        for index in block_indices:
            block = encoder.transformer_layers[index]
            expected = block(x, context, training=False)
            read = reader(weights, f"layer_{index}/")
            form = encoder.block_kind.serving_form(encoder.config, read, index)
            served = form(tf.constant(flat(x)), read, served_context, batch, length)
            _compare(served.numpy(), flat(expected), rtol, atol,
                     f"layer {layer} (block {index})")
            x = expected
    finished = pieces.finish(encoder.parts, x)
    served = serving.finish(tf.constant(flat(x)))
    _compare(served.numpy(), flat(finished), rtol, atol, "after the last block")
    served = serving.pool(tf.constant(flat(finished)), ids, batch, length)
    expected = pieces.pool(encoder.parts, finished, keras_inputs)
    _compare(served.numpy(), to_numpy(expected), rtol, atol, "pooler")
    whole = ServingEncoder(encoder)(ids)
    expected = encoder(inputs, training=False)
    assert sorted(whole) == sorted(expected), (sorted(whole), sorted(expected))
    for name in expected:
        _compare(whole[name].numpy(), to_numpy(expected[name]), rtol, atol,
                 f"ServingEncoder {name}")

