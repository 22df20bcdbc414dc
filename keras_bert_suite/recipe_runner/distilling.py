"""`kbs distill`: a fine-tuning recipe with a "distillation" section -> a smaller student.

    recipe = load_recipe("distill_rotten_tomatoes_cpu")
    summary = run_distillation(recipe, "runs/distill")

The teacher is `distillation.teacher` (a fine-tuned `.keras` file or task preset) or, when
null, fine-tuned first from `model.preset` by the same recipe (into <output>/teacher). The
student is `student_from_teacher(teacher, num_layers=distillation.student_layers)`
(DistilBERT's initialisation) or `distillation.student_preset` with a fresh head. It trains
with `BertDistiller` on the task's training data under the recipe's optimizer and is
evaluated with the task's own metric. The output directory gets model.keras (the student:
`kbs export` takes it), metrics.json (the student's metrics, the teacher's, their sizes and
training times) and the task's predictions file.
"""

import os

from keras_bert_suite.recipe_runner import finetuning
from keras_bert_suite.recipe_runner.common import merged, recipe_optimizer
from keras_bert_suite.recipe_runner.recipe_files import RecipeError, Schema
from keras_bert_suite.recipe_runner.run import TrainingRun
from keras_bert_suite.recipe_runner.task_data import task_module
from keras_bert_suite.models.lora import parameter_count

DEFAULTS = merged(finetuning.DEFAULTS, {
    "distillation": {
        "teacher": None,  # a fine-tuned .keras file or task preset; null: fine-tune one first
        "student_layers": 3,  # DistilBERT's init: this many evenly spaced teacher layers
        "student_layer_indices": None,  # or these 0-based teacher layers
        "student_preset": None,  # or a smaller preset's encoder (fresh head) instead
        "temperature": 2.0,
        "soft_weight": 0.5,
        "hard_weight": 0.5,
        "hidden_weight": 0.0,  # TinyBERT's hidden-state MSE
        "attention_weight": 0.0,  # MiniLM's attention relations
        "cosine_weight": 0.0,  # DistilBERT's cosine of the last hidden states (equal widths)
        # The student's training where it differs from the teacher's (null: training.*):
        # small students like a higher rate and more epochs.
        "epochs": None,
        "learning_rate": None,
    },
})
# training.bucket_boundaries is "auto", a list of lengths or null (checked by
# recipe_contract.training_batching).
SCHEMA = Schema(DEFAULTS, frozenset({"model.encoder_overrides", "training.bucket_boundaries"}))


def _teacher(recipe, output_dir, log):
    from keras_bert_suite.tasks import load_model

    path = recipe["distillation"]["teacher"]
    if path is None:
        log("No distillation.teacher: fine-tuning the teacher first")
        teacher_recipe = {key: value for key, value in recipe.items() if key != "distillation"}
        summary = finetuning.run_finetuning(teacher_recipe, os.path.join(output_dir, "teacher"),
                                            log=log)
        return summary["model"], summary["metrics"]
    if not os.path.exists(path):
        raise RecipeError(f"distillation.teacher={path!r} does not exist (a .keras file or a "
                          "task preset directory of a fine-tuned model).")
    if str(path).endswith(".keras"):
        return load_model(path), None
    return task_module(recipe["task"]).MODEL.from_preset(path), None


def _student(recipe, teacher, task, task_data):
    from keras_bert_suite.distillation import student_from_teacher

    config = recipe["distillation"]
    if config["student_preset"] is not None:
        return task.MODEL.from_preset(config["student_preset"], preprocessor=teacher.preprocessor,
                                      **task_data.model_arguments,
                                      **task.head_arguments(recipe["model"]))
    if config["student_layer_indices"] is not None:
        return student_from_teacher(teacher, layers=config["student_layer_indices"])
    return student_from_teacher(teacher, num_layers=config["student_layers"])


def _student_training(recipe, batch_size):
    """training.* with the distillation section's epochs / learning_rate where set."""
    training, config = dict(recipe["training"]), recipe["distillation"]
    training["batch_size"] = batch_size
    if config["epochs"] is not None:
        training["epochs"] = config["epochs"]
    if config["learning_rate"] is not None:
        training["optimizer"] = {**training["optimizer"], "learning_rate": config["learning_rate"]}
    return training


def run_distillation(recipe, output_dir, callbacks=(), verbose="auto", log=print):
    """Distils as the recipe says; returns {"metrics", "model_path", "model"} (the student)."""
    from keras_bert_suite.distillation import BertDistiller

    teacher, teacher_metrics = _teacher(recipe, output_dir, log)  # may fine-tune it first
    run = TrainingRun(recipe, output_dir, log)
    task = task_module(recipe["task"])
    recipe = {**recipe, "training": _student_training(recipe, run.batch_size)}
    training, config = recipe["training"], recipe["distillation"]
    task_data = task.prepare(recipe, teacher.preprocessor, log)
    total_steps, epochs, steps_per_epoch = finetuning.training_steps(
        training, task_data.num_train_examples)
    with run.building():  # the student, its optimizer and the distiller's own weights
        student = _student(recipe, teacher, task, task_data)
        distiller = BertDistiller(
            teacher, student, temperature=config["temperature"],
            soft_weight=config["soft_weight"], hard_weight=config["hard_weight"],
            hidden_weight=config["hidden_weight"], attention_weight=config["attention_weight"],
            cosine_weight=config["cosine_weight"])
        run.compile(distiller, recipe_optimizer(training["optimizer"], total_steps))
    log(f"Student: {student.encoder.num_layers} layers, {parameter_count(student.weights):,} "
        f"parameters (teacher: {teacher.encoder.num_layers} layers, "
        f"{parameter_count(teacher.weights):,}); {total_steps} updates")
    extra = {"student_layers": student.encoder.num_layers,
             "student_parameters": parameter_count(student.weights),
             "teacher_parameters": parameter_count(teacher.weights)}
    if teacher_metrics is not None:
        extra["teacher"] = {k: v for k, v in teacher_metrics.items() if not isinstance(v, dict)}
    return finetuning.train_and_evaluate(
        run, student, task, task_data, recipe, epochs, steps_per_epoch, callbacks, verbose,
        log, trained=distiller, extra_metrics=extra)
