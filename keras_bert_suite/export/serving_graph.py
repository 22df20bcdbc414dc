"""A task model's inference call with its encoder computed by `ServingEncoder`, and the
precision an export's encoder runs in."""

import contextlib
import threading

import numpy as np

from keras.src.models.functional import operation_fn

from keras_bert_suite.export.serving_encoder import ServingEncoder, check_precision

_export = threading.local()  # the precision and ServingEncoders of the export being written


@contextlib.contextmanager
def serving_precision(precision, calibration_inputs=None):
    """While active, `model_call` runs encoders in `precision` (int8: calibrated on
    `calibration_inputs`, see `calibration_inputs()`) and every signature of the export
    shares one ServingEncoder per encoder (so bf16 / int8 kernels are stored once)."""
    check_precision(precision)
    previous = getattr(_export, "state", None)
    _export.state = (precision, calibration_inputs, {})
    try:
        yield
    finally:
        _export.state = previous


def _serving_encoder(encoder):
    state = getattr(_export, "state", None)
    if state is None:
        return ServingEncoder(encoder)
    precision, calibration, encoders = state
    if id(encoder) not in encoders:
        encoders[id(encoder)] = ServingEncoder(encoder, precision, calibration)
    return encoders[id(encoder)]


def calibration_inputs(preprocessor, texts):
    """Each of `texts` packed alone by the model's tokenizer at its sequence length: the
    encoder inputs int8 calibration runs."""
    from keras_bert_suite.text import BertPreprocessor

    packer = BertPreprocessor(preprocessor.tokenizer, preprocessor.sequence_length)
    return {name: np.asarray(values) for name, values in packer(list(texts)).items()}


def model_call(model):
    """inputs -> model(inputs, training=False), with the BertEncoder inside (or the model
    itself, if it is one) replaced by its ServingEncoder; the other layers run as Keras
    traces them."""
    from keras_bert_suite.models.find_encoder import find_encoder

    encoder = find_encoder(model)
    if encoder is model:
        return _serving_encoder(model)
    if encoder is None or encoder not in model.layers:
        return lambda inputs: model(inputs, training=False)
    fast_encoder = _serving_encoder(encoder)

    def layer_call(layer):
        if layer is encoder:
            return lambda encoder_inputs, **kwargs: fast_encoder(encoder_inputs)
        return operation_fn(layer, training=False)

    def call(inputs):
        # What keras.Model.__call__ runs for a functional model (Functional.call), with one
        # layer swapped: Keras has no public hook for that.
        return model._run_through_graph(model._standardize_inputs(inputs),
                                        operation_fn=layer_call)

    return call
