"""Checks a request's inputs against a serving signature's: the one place that words these
errors, for REST (`tensor_json`) and gRPC (`model_store`) alike.

`input_specs` is {input name: tf.TensorSpec}; only `.shape` (rank, dims) and `.dtype.name`
are read, so this module imports no TensorFlow.
"""

from keras_bert_suite.serving.errors import RequestError


def check_input_names(given, input_specs, signature_name, where="The request"):
    """Raises RequestError naming the first unknown or missing input and listing the valid ones."""
    expected = ", ".join(sorted(input_specs))
    unknown = sorted(set(given) - set(input_specs))
    if unknown:
        raise RequestError(f"{where} has input '{unknown[0]}' that signature "
                           f"'{signature_name}' does not take; its inputs are: {expected}.")
    missing = sorted(set(input_specs) - set(given))
    if missing:
        raise RequestError(f"{where} lacks input '{missing[0]}'; signature '{signature_name}' "
                           f"takes: {expected}.")


def check_shape(shape, spec, where):
    """Raises RequestError when `shape` (a list of ints) does not fit `spec.shape`."""
    expected = spec.shape
    if expected.rank is None:
        return
    if len(shape) != expected.rank or any(
            want is not None and want != got for want, got in zip(expected.as_list(), shape)):
        wanted = [d if d is not None else -1 for d in expected.as_list()]
        raise RequestError(f"{where} has shape {list(shape)}, but the signature expects "
                           f"{wanted} (-1 = any size) of {spec.dtype.name}.")
