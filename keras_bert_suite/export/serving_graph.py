"""A task model's inference call with its encoder computed by `ServingEncoder`, and the
precision an export's encoder runs in."""

import contextlib
import threading

import numpy as np

from keras_bert_suite.export.serving_encoder import ServingEncoder, check_precision
from keras_bert_suite.transforms import find_encoder

_export = threading.local()  # the precision and ServingEncoders of the export being written


@contextlib.contextmanager
def serving_precision(precision, calibration_inputs=None):
    """While active, `model_call` runs encoders in `precision` (int8_vnni: calibrated on
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
    encoder inputs int8_vnni calibration runs."""
    from keras_bert_suite.text import BertPreprocessor

    packer = BertPreprocessor(preprocessor.tokenizer, preprocessor.sequence_length)
    return {name: np.asarray(values) for name, values in packer(list(texts)).items()}


def model_call(model):
    """inputs -> model(inputs, training=False), with the BertEncoder inside (or the model
    itself, if it is one) computed by its ServingEncoder: a task runs its head layers on the
    serving encoder's outputs (`BertTask.call_with_encoder`)."""
    encoder = find_encoder(model)
    if encoder is model:
        return _serving_encoder(model)
    if encoder is None or not hasattr(model, "call_with_encoder"):
        return lambda inputs: model(inputs, training=False)
    serving_encoder = _serving_encoder(encoder)
    return lambda inputs: model.call_with_encoder(inputs, serving_encoder)
