"""What the recipe runner needs of each fine-tuning task's `recipe` module
(keras_bert_suite/tasks/<name>/recipe.py): how to read its data, which model, how to score it.

Each module has `MODEL` (the task model class) and
    prepare(recipe, preprocessor, log) -> TaskData
    model_preprocessor(recipe, tokenizer) -> the task's preprocessor: the one text path that
        training data, evaluation, the model's raw-text predict and export all use
    head_arguments(model_config) -> extra task-model arguments (e.g. dropout)
    evaluate(model, task_data, recipe, output_dir) -> metrics dict (and prediction files)
"""

import dataclasses
import importlib

from keras_bert_suite.recipe_runner.recipe import RecipeError

# A task's one name: its folder under keras_bert_suite/tasks/, its recipes' "task", and the
# "task" of its SavedModel export.
TASK_NAMES = ("classifier", "span_labeler", "token_classifier", "multiple_choice")
# Names recipes used before the tasks moved to keras_bert_suite/tasks/<name>/.
RENAMED_TASKS = {"classification": "classifier", "squad": "span_labeler",
                 "ner": "token_classifier", "pretrain": "pretrainer"}


@dataclasses.dataclass
class TaskData:
    """train: a batched tf.data of (inputs, labels); num_train_examples: its size;
    model_arguments: task-model arguments the data decides (num_classes, label_names);
    evaluation: whatever the task's evaluate() needs (examples, features, gold)."""

    train: object
    num_train_examples: int
    model_arguments: dict
    evaluation: object


def task_module(task):
    """The module for a task name (imported on use: the modules import TF and the models)."""
    if task not in TASK_NAMES:
        raise RecipeError(f"Unknown fine-tuning task {task!r}; known tasks: "
                          f"{', '.join(TASK_NAMES)}.")
    return importlib.import_module(f"keras_bert_suite.tasks.{task}.recipe")


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
