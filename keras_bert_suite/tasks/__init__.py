"""One folder per task: its model, preprocessor, postprocessor, serving signatures, data
readers, metric and recipe module (docs/design.md), each registered once in
keras_bert_suite/task_registry.py.

`import_task_models()` imports every task model class, which registers them for
`keras.saving.load_model` (a `.keras` file names its class by registered name only);
`load_model(path)` (also `keras_bert_suite.load_model`) does that and loads.
"""

import importlib

from keras_bert_suite.task_registry import task_modules

# {public class name: the module that defines it}
TASK_MODELS = task_modules()


def import_task_models():
    """{class name: class} of every task model (imports them all)."""
    return {name: getattr(importlib.import_module(module), name)
            for name, module in TASK_MODELS.items()}


def load_model(filepath, compile=True, **kwargs):
    """`keras.saving.load_model` for any of our models: registers every keras_bert_suite
    class first (`import keras_bert_suite` alone does not import the models, so that a
    serving client never pays for Keras).

    `compile=False` (for inference and export) leaves the saved optimizer state unread. A
    task model compiles itself when built, with a fresh optimizer, so Keras would try that
    state on it and warn "Skipping variable loading for optimizer" for every trained model;
    that warning is about state nobody asked for, and is not shown."""
    import warnings

    import keras

    import_task_models()
    if compile:
        return keras.saving.load_model(filepath, **kwargs)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Skipping variable loading for optimizer")
        return keras.saving.load_model(filepath, compile=False, **kwargs)
