"""The fine-tuning tasks the recipe runner knows, and the module of each (its contract:
keras_bert_suite/tasks/recipe_contract.py)."""

import importlib

from keras_bert_suite.tasks.recipe_contract import RecipeError
from keras_bert_suite.task_registry import recipe_tasks

# A task's one name: its folder under keras_bert_suite/tasks/, its recipes' "task", and the
# "task" of its SavedModel export (task_registry.py lists them).
TASK_NAMES = recipe_tasks()
# Names recipes used before the tasks moved to keras_bert_suite/tasks/<name>/.
RENAMED_TASKS = {"classification": "classifier", "squad": "span_labeler",
                 "ner": "token_classifier", "pretrain": "pretrainer"}


def task_module(task):
    """The module for a task name (imported on use: the modules import TF and the models)."""
    if task not in TASK_NAMES:
        raise RecipeError(f"Unknown fine-tuning task {task!r}; known tasks: "
                          f"{', '.join(TASK_NAMES)}.")
    return importlib.import_module(f"keras_bert_suite.tasks.{task}.recipe")
