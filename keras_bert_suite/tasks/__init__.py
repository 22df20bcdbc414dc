"""One folder per task: its model, preprocessor, postprocessor, serving signatures, data
readers, metric and recipe module (docs/design.md).

`import_task_models()` imports every task model class, which registers them for
`keras.saving.load_model` (a `.keras` file names its class by registered name only);
`load_model(path)` (also `keras_bert_suite.load_model`) does that and loads.
"""

import importlib

# {public class name: the module that defines it}
TASK_MODELS = {
    "BertClassifier": "keras_bert_suite.tasks.classifier.model",
    "BertSpanLabeler": "keras_bert_suite.tasks.span_labeler.model",
    "BertTokenClassifier": "keras_bert_suite.tasks.token_classifier.model",
    "BertMultipleChoice": "keras_bert_suite.tasks.multiple_choice.model",
    "BertFeatureExtractor": "keras_bert_suite.tasks.feature_extractor.model",
    "BertPretrainer": "keras_bert_suite.tasks.pretrainer.model",
}


def import_task_models():
    """{class name: class} of every task model (imports them all)."""
    return {name: getattr(importlib.import_module(module), name)
            for name, module in TASK_MODELS.items()}


def load_model(filepath, **kwargs):
    """`keras.saving.load_model` for any of our models: registers every keras_bert_suite
    class first (`import keras_bert_suite` alone does not import the models, so that a
    serving client never pays for Keras)."""
    import keras

    import_task_models()
    return keras.saving.load_model(filepath, **kwargs)
