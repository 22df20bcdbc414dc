"""keras_bert_suite: BERT as a Keras 3 library for TensorFlow, JAX and PyTorch.

Public classes: an encoder (`BertEncoder`), a tokenizer and a preprocessor
that turn text into the encoder's inputs, and task models that add a head to the encoder.

They are imported on first use (PEP 562 `__getattr__`): `keras_bert_suite.BertEncoder` works
as usual, while importing a subpackage that needs no model (`keras_bert_suite.serving`, a
serving client or host) does not import Keras.
"""

import importlib

from keras_bert_suite.task_registry import task_modules

__version__ = "0.1.0"

# {public name: module that defines it}; the task models come from task_registry.py
_PUBLIC = {
    "BertEncoder": "keras_bert_suite.models.encoder",
    "list_presets": "keras_bert_suite.presets",
    **task_modules(),
    "BertPreprocessor": "keras_bert_suite.text",
    "BertTokenizer": "keras_bert_suite.text",
    "SegmentPacker": "keras_bert_suite.text",
    "learn_vocabulary": "keras_bert_suite.text",
    "load_model": "keras_bert_suite.tasks",
    "save_google_bert": "keras_bert_suite.models.to_checkpoint",
    "save_huggingface": "keras_bert_suite.models.to_checkpoint",
    "save_keras_hub": "keras_bert_suite.models.to_checkpoint",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name not in _PUBLIC:
        # AttributeError (not ImportError) lets `from keras_bert_suite import cli` fall back
        # to importing the submodule.
        raise AttributeError(f"module 'keras_bert_suite' has no attribute '{name}'")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
