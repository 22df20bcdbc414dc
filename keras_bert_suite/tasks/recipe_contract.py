"""What a task's recipe module (keras_bert_suite/tasks/<name>/recipe.py) gives the recipe
runner, and the error both raise: the contract between them, below both, so that the task
modules never import the runner.

Each fine-tuning task's module has `MODEL` (the task model class) and
    prepare(recipe, preprocessor, log) -> TaskData
    model_preprocessor(recipe, tokenizer) -> the task's preprocessor: the one text path that
        training data, evaluation, the model's raw-text predict and export all use
    head_arguments(model_config) -> extra task-model arguments (e.g. dropout)
    evaluate(model, task_data, recipe, output_dir) -> metrics dict (and prediction files)
"""

import dataclasses


class RecipeError(ValueError):
    """A recipe or an override is wrong; the message names the key or the file."""


@dataclasses.dataclass
class TaskData:
    """train: a batched tf.data of (inputs, labels); num_train_examples: its size;
    model_arguments: task-model arguments the data decides (num_classes, label_names);
    evaluation: whatever the task's evaluate() needs (examples, features, gold)."""

    train: object
    num_train_examples: int
    model_arguments: dict
    evaluation: object


def data_files(data, task, builtin, file_kind):
    """(train_file, eval_file) of a recipe that uses its own files; a clear RecipeError when
    it names another task's data set or leaves a file out. `builtin`: this task's data sets."""
    if data["dataset"] is not None:
        raise RecipeError(f"data.dataset={data['dataset']!r} is not a {task} data set; use "
                          f"{' or '.join(repr(b) for b in builtin) or 'null'} or null with "
                          f"data.train_file/eval_file ({file_kind}).")
    if data["train_file"] is None or data["eval_file"] is None:
        sets = "".join(f"data.dataset={b} or " for b in builtin)
        raise RecipeError(f"A {task} recipe needs {sets}data.train_file and data.eval_file "
                          f"({file_kind}).")
    return data["train_file"], data["eval_file"]


# Where a recipe's training batches keep sequence_length (see training_batching).
FIXED_LENGTH_STRATEGIES = ("tpu",)


def training_batching(recipe):
    """How a fine-tuning recipe batches its training rows, as `bucketed_batches` arguments:
    {"boundaries": length buckets or None, "group_batches": batches per length-sorted
    group}. `training.bucket_boundaries` ("auto", a list of lengths, or null for
    fixed-length batches) and `training.group_by_length`. Fixed-length batches stay where
    shapes must: a TPU (XLA there compiles one program per shape, and wants static shapes).
    (keras.distribution on JAX leaves out each pass's short last batch of bucketed rows:
    `Distribution.whole_batches`.)"""
    from keras_bert_suite.text.length_buckets import bucket_boundaries, length_step

    training = recipe["training"]
    boundaries = training["bucket_boundaries"]
    if boundaries is None or recipe["distribution"]["strategy"] in FIXED_LENGTH_STRATEGIES:
        return {"boundaries": None, "group_batches": 0}
    try:
        boundaries = bucket_boundaries(recipe["data"]["sequence_length"], boundaries,
                                       length_step(training["jit_compile"]))
    except ValueError as error:
        raise RecipeError(f"training.bucket_boundaries: {error}") from None
    return {"boundaries": boundaries, "group_batches": training["group_by_length"] or 0}
