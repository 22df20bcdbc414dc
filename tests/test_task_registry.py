"""The one task table (keras_bert_suite/task_registry.py) fills every list of tasks, and each
registered class keeps the contract's declarations (tasks/contract.py)."""

import importlib
import pathlib

import keras_bert_suite
from keras_bert_suite import recipe_runner
from keras_bert_suite.checkpoints.task_heads import CheckpointForm
from keras_bert_suite.tasks import TASK_MODELS, import_task_models
from keras_bert_suite.task_registry import TASKS
from keras_bert_suite.tasks.task import BertTask

TASKS_DIR = pathlib.Path(keras_bert_suite.__file__).parent / "tasks"


def test_every_registered_task_is_public_loadable_and_a_bert_task():
    models = import_task_models()
    assert list(models) == [task.class_name for task in TASKS] == list(TASK_MODELS)
    for name, cls in models.items():
        assert getattr(keras_bert_suite, name) is cls
        assert issubclass(cls, BertTask) and cls.task_name
        form = cls.checkpoint_form
        assert form is None or isinstance(form, CheckpointForm), name


def test_recipe_tasks_are_the_folders_with_a_recipe_module():
    recipes = [task.recipe for task in TASKS if task.recipe is not None]
    assert list(recipe_runner.TASK_NAMES) == recipes
    for task in TASKS:
        if task.recipe is not None:
            assert task.module.split(".")[0] == task.recipe
            assert (TASKS_DIR / task.recipe / "recipe.py").is_file()
            module = importlib.import_module(f"keras_bert_suite.tasks.{task.recipe}.recipe")
            assert module.MODEL.__name__ == task.class_name
            assert module.MODEL.task_name == task.recipe
