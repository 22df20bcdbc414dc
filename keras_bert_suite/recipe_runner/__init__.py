"""The one recipe runner behind `kbs pretrain` and `kbs finetune`.

    recipe = load_recipe("pretrain_cpu_smoke", overrides=["training.num_train_steps=20"])
    summary = run_recipe(recipe, "runs/smoke")

recipe_files.py loads and overrides recipe files; finetuning.py, pretraining.py and distilling.py
hold each recipe kind's schema (keys and defaults) and its run function, all three on one
`TrainingRun` (run.py); a task's own part (data, model class, metric) is in its
`tasks/<task>/recipe.py`. A recipe's "task" key (and a "distillation" section) picks the
kind.
"""

import os

from keras_bert_suite.recipe_runner import distilling, finetuning, pretraining
from keras_bert_suite.recipe_runner.finetuning import run_finetuning
from keras_bert_suite.recipe_runner.pretraining import run_pretraining
from keras_bert_suite.tasks.pretrainer.data.recipe_data import build_datasets
from keras_bert_suite.recipe_runner.recipe_files import (
    RECIPES_DIR,
    RecipeError,
    apply_recipe,
    parse_override,
    read_recipe_file,
    resolve_recipe_path,
)
from keras_bert_suite.recipe_runner.task_data import RENAMED_TASKS, TASK_NAMES

# task -> (schema, run function, the `kbs` command that runs it)
TASKS = {
    "pretrainer": (pretraining.SCHEMA, run_pretraining, "pretrain"),
    **{task: (finetuning.SCHEMA, run_finetuning, "finetune") for task in TASK_NAMES},
}
# A fine-tuning recipe with a "distillation" section trains a student instead.
DISTILLATION = (distilling.SCHEMA, distilling.run_distillation, "distill")


def _kind(recipe_values, task):
    """(schema, run function, command) of a recipe (its task and sections decide)."""
    if "distillation" in recipe_values:
        if task not in TASK_NAMES:
            raise RecipeError(f"A distillation recipe needs a fine-tuning \"task\" "
                              f"({', '.join(TASK_NAMES)}), got {task!r}.")
        return DISTILLATION
    return TASKS[task]


def load_recipe(name_or_path, overrides=()):
    """The recipe file merged over its task's defaults, then `overrides` ("key=value")."""
    path = resolve_recipe_path(name_or_path)
    values = read_recipe_file(path)
    task = values.get("task", "pretrainer")
    if task in RENAMED_TASKS:
        raise RecipeError(f"Recipe {path}: task {task!r} is now called "
                          f"{RENAMED_TASKS[task]!r}; rename it in the recipe's \"task\" key.")
    if task not in TASKS:
        raise RecipeError(f"Recipe {path}: unknown task {task!r}; known tasks: "
                          f"{', '.join(sorted(TASKS))}.")
    recipe = apply_recipe(_kind(values, task)[0], values, overrides, source=path)
    recipe["name"] = os.path.splitext(os.path.basename(path))[0]
    return recipe


def run_recipe(recipe, output_dir, command=None, **kwargs):
    """Runs a loaded recipe; `command` ("pretrain"/"finetune"/"distill") checks it is the
    right kind."""
    schema, run, expected_command = _kind(recipe, recipe["task"])
    if command is not None and command != expected_command:
        raise RecipeError(f"`kbs {command}` cannot run recipe {recipe['name']!r}: its task "
                          f"{recipe['task']!r} runs with `kbs {expected_command}`.")
    return run(recipe, output_dir, **kwargs)
