"""export_saved_model: a task model -> saved_models/<name>/<version>/ for TF Serving."""

import keras

from keras_bert_suite.export import tasks, versions


def export_saved_model(model, base_dir="saved_models", name=None, version=None, task=None,
                       preprocessor=None, label_names=None, warmup=True, **task_options):
    """Exports `model` with raw-text signatures; returns the version directory.

    Args:
        model: a task model (BertClassifier, BertSpanLabeler, BertTokenClassifier,
            BertMultipleChoice, BertFeatureExtractor) or a BertEncoder, trained on any backend.
        base_dir, name, version: writes `base_dir/name/version/` (TF Serving's layout);
            `name` defaults to the model's name, `version` to one more than the newest.
        task: one of `tasks.task_names()`; inferred from the model class when left out.
        preprocessor: a BertPreprocessor; defaults to `model.preprocessor`.
        label_names: class / tag names; defaults to `model.label_names` ("0", "1", ... if
            neither is set).
        warmup: write assets.extra/tf_serving_warmup_requests.
        **task_options: e.g. `pair=True` (classifier on text_a/text_b), `doc_stride=`,
            `max_question_tokens=`, `max_answer_tokens=` (span labeler).

    Signatures: `serving_default` (raw strings in, see tasks.py for each task's outputs) and
    `encoder_inputs` (token_ids, segment_ids, padding_mask in, the model's outputs out).
    On JAX and PyTorch the model is saved as `.keras` and re-exported by a TensorFlow-backend
    subprocess, so the graph is plain TensorFlow either way.

    Example:
    >>> path = export_saved_model(classifier, "saved_models", name="sentiment")
    >>> path
    'saved_models/sentiment/1'
    """
    import os

    task = task or tasks.task_for_model(model)
    if task not in tasks.task_names():
        raise ValueError(f"Unknown task {task!r}; known tasks: {tasks.task_names()}.")
    preprocessor = preprocessor or getattr(model, "preprocessor", None)
    if preprocessor is None:
        raise ValueError("Exporting raw-text signatures needs a preprocessor: pass "
                         "preprocessor=BertPreprocessor.from_preset(..., sequence_length=...) "
                         "or build the task model with one.")
    label_names = label_names or getattr(model, "label_names", None)
    label_names = [str(label) for label in label_names] if label_names else None
    name = name or model.name
    model_dir = os.path.join(base_dir, name)
    with versions.atomic_version_dir(model_dir, version) as (directory, version):
        if keras.backend.backend() == "tensorflow":
            from keras_bert_suite.export.archive import write_saved_model

            write_saved_model(model, directory, task, preprocessor, label_names, task_options,
                              name, warmup)
        else:
            from keras_bert_suite.export.reexport import reexport_in_tensorflow

            reexport_in_tensorflow(model, directory, task, preprocessor, label_names,
                                   task_options, name, warmup)
    return os.path.join(model_dir, str(version))
