"""TF Serving's REST tensor encoding: JSON request bodies -> numpy inputs, outputs -> JSON.

The rules are those of TF Serving's `g3doc/api_rest.md`:
* row format `{"instances": [...]}`: one entry per example; with one signature input an entry
  is that input's value, with several it is an object `{input_name: value}`; all inputs share
  dim 0. Answered as `{"predictions": [...]}` (one entry per example; an object per example when
  the signature has several outputs).
* columnar format `{"inputs": value}` or `{"inputs": {input_name: value}}`; answered as
  `{"outputs": value}` or `{"outputs": {output_name: value}}`.
* strings are JSON strings (UTF-8); arbitrary bytes go as `{"b64": "<base64>"}`. String outputs
  whose name ends in `_bytes` come back as `{"b64": ...}`. Other string outputs come back as
  JSON strings when they are valid UTF-8 and as `{"b64": ...}` when they are not (TF Serving
  would write the raw bytes into the JSON; we never lose or mangle data instead).
* float32 outputs are written with the shortest decimal that reads back as the same float32
  ("0.1", not "0.10000000149011612"), as TF Serving does.

Example:
>>> import tensorflow as tf
>>> specs = {"text": tf.TensorSpec([None], tf.string)}
>>> inputs, row_format = parse_predict_request({"instances": ["hi", {"b64": "/w=="}]}, specs)
>>> inputs["text"]
array([b'hi', b'\\xff'], dtype=object)
"""

import base64
import binascii

import numpy as np

from keras_bert_suite.names import DEFAULT_SIGNATURE
from keras_bert_suite.serving.errors import RequestError
from keras_bert_suite.serving.signature_check import check_input_names, check_shape


def is_b64(value):
    return isinstance(value, dict) and len(value) == 1 and "b64" in value


def _is_named(value):
    return isinstance(value, dict) and not is_b64(value)


def _shape_and_leaves(value, where):
    """Shape of a rectangular nested JSON list and its leaves in row-major order."""
    if not isinstance(value, list):
        return [], [value]
    if not value:
        return [0], []
    shapes, leaves = [], []
    for index, item in enumerate(value):
        shape, item_leaves = _shape_and_leaves(item, where)
        if shapes and shape != shapes[0]:
            raise RequestError(
                f"{where} is ragged: element {index} has shape {shape} but element 0 has "
                f"{shapes[0]}; every example must have the same shape (pad it first).")
        shapes.append(shape)
        leaves += item_leaves
    return [len(value)] + shapes[0], leaves


def _string_leaf(leaf, where):
    if isinstance(leaf, str):
        # JSON may carry lone surrogates ("\udc80"): pass them through as bytes, never fail.
        return leaf.encode("utf-8", "surrogatepass")
    if is_b64(leaf):
        try:
            return base64.b64decode(leaf["b64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise RequestError(f"{where}: {{\"b64\": ...}} holds invalid base64.") from None
    raise RequestError(f"{where} is a string input: give JSON strings or {{\"b64\": ...}} "
                       f"objects, not {type(leaf).__name__} {leaf!r:.40}.")


def decode_tensor(value, spec, where):
    """One input's JSON value -> a numpy array matching `spec` (a tf.TensorSpec)."""
    shape, leaves = _shape_and_leaves(value, where)
    if spec.dtype.name == "string":
        array = np.empty(len(leaves), dtype=object)
        array[:] = [_string_leaf(leaf, where) for leaf in leaves]
    else:
        bad = next((leaf for leaf in leaves
                    if isinstance(leaf, (dict, list, str)) or leaf is None), None)
        if bad is not None:
            raise RequestError(f"{where} is a {spec.dtype.name} input: give JSON numbers, "
                               f"not {type(bad).__name__} {bad!r:.40}.")
        try:
            array = np.array(leaves, dtype=spec.dtype.as_numpy_dtype)
        except (OverflowError, ValueError, TypeError) as error:
            raise RequestError(f"{where}: cannot convert to {spec.dtype.name}: {error}") from None
    check_shape(shape, spec, where)
    return array.reshape(shape)


def parse_predict_request(body, input_specs, signature_name=DEFAULT_SIGNATURE):
    """A decoded `:predict` body -> ({input name: np.ndarray}, row_format).

    `input_specs`: {input name: tf.TensorSpec} of the signature named `signature_name`
    (the name is only used in error messages)."""
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object with 'instances' or 'inputs'.")
    if ("instances" in body) == ("inputs" in body):
        raise RequestError("The request must have exactly one of 'instances' (row format) or "
                           "'inputs' (columnar format).")
    if "instances" in body:
        return _parse_rows(body["instances"], input_specs, signature_name), True
    return _parse_columns(body["inputs"], input_specs, signature_name), False


def _parse_rows(instances, input_specs, signature_name):
    if not isinstance(instances, list) or not instances:
        raise RequestError("'instances' must be a non-empty list (one entry per example).")
    named = _is_named(instances[0])
    if not named:
        if len(input_specs) != 1:
            raise RequestError(
                f"The signature takes {len(input_specs)} inputs ({', '.join(sorted(input_specs))})"
                f": each entry of 'instances' must be an object {{input_name: value}}.")
        (name, spec), = input_specs.items()
        if any(_is_named(instance) for instance in instances):
            raise RequestError("'instances' mixes named objects and plain values.")
        return {name: decode_tensor(instances, spec, f"'instances' (input '{name}')")}
    columns = {name: [] for name in input_specs}
    for index, instance in enumerate(instances):
        if not _is_named(instance):
            raise RequestError(f"Element {index} of 'instances' is not an object "
                               f"{{input_name: value}} like element 0.")
        check_input_names(instance, input_specs, signature_name, f"Element {index} of 'instances'")
        for name, value in instance.items():
            columns[name].append(value)
    return {name: decode_tensor(columns[name], input_specs[name], f"'instances' input '{name}'")
            for name in input_specs}


def _parse_columns(inputs, input_specs, signature_name):
    if _is_named(inputs):
        check_input_names(inputs, input_specs, signature_name, "'inputs'")
        return {name: decode_tensor(inputs[name], spec, f"'inputs' input '{name}'")
                for name, spec in input_specs.items()}
    if len(input_specs) != 1:
        raise RequestError(f"The signature takes {len(input_specs)} inputs "
                           f"({', '.join(sorted(input_specs))}): 'inputs' must be an object "
                           f"{{input_name: value}}.")
    (name, spec), = input_specs.items()
    return {name: decode_tensor(inputs, spec, f"'inputs' (input '{name}')")}


def _b64(data):
    return {"b64": base64.b64encode(data).decode("ascii")}


def _string_to_json(data, as_b64):
    if as_b64:
        return _b64(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _b64(data)


def _map_leaves(nested, function):
    if isinstance(nested, list):
        return [_map_leaves(item, function) for item in nested]
    return function(nested)


def encode_tensor(name, array):
    """One output array -> its JSON value (nested lists)."""
    array = np.asarray(array)
    if array.dtype == object or array.dtype.kind in "SU":
        as_b64 = name.endswith("_bytes")
        return _map_leaves(array.tolist(),
                           lambda s: _string_to_json(s if isinstance(s, bytes) else str(s).encode(),
                                                     as_b64))
    if array.dtype == np.float32 or array.dtype == np.float16:
        # The shortest decimal that reads back as the same float32, as TF Serving writes it.
        return array.astype(str).astype(np.float64).tolist()
    if array.dtype.kind == "c":
        raise RequestError(f"Output '{name}' is complex; JSON cannot carry it (use gRPC).", 500)
    return array.tolist()


def format_predict_response(outputs, row_format):
    """{output name: np.ndarray} -> the `:predict` response body."""
    outputs = {name: np.asarray(value) for name, value in outputs.items()}
    if not row_format:
        if len(outputs) == 1:
            (name, value), = outputs.items()
            return {"outputs": encode_tensor(name, value)}
        return {"outputs": {name: encode_tensor(name, value) for name, value in outputs.items()}}
    sizes = {name: (value.shape[0] if value.ndim else None) for name, value in outputs.items()}
    if None in sizes.values() or len(set(sizes.values())) > 1:
        raise RequestError(
            "The outputs do not share a batch dimension "
            f"({', '.join(f'{n}: {s}' for n, s in sorted(sizes.items()))}), so they cannot be "
            "answered in the row format; send the columnar 'inputs' format instead.")
    encoded = {name: encode_tensor(name, value) for name, value in outputs.items()}
    if len(encoded) == 1:
        return {"predictions": next(iter(encoded.values()))}
    batch = next(iter(sizes.values()))
    return {"predictions": [{name: encoded[name][i] for name in encoded} for i in range(batch)]}
