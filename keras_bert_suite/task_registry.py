"""The one table of task models. A task registers here once, with one line: the package's
public names (`keras_bert_suite.BertClassifier`), `load_model`'s classes and the recipe
runner's fine-tuning tasks all come from it. Plain strings, so that reading it imports no
Keras (`import keras_bert_suite` stays light for serving clients); beside names.py at the
bottom of the package, since the package's root, tasks/ and the recipe runner all read it.

What a task model must declare is its class's side of the contract (tasks/contract.py).
"""

from typing import NamedTuple


class RegisteredTask(NamedTuple):
    """class_name: the public class (`keras_bert_suite.<class_name>`).
    module: the module under keras_bert_suite/tasks/ that defines it.
    recipe: the task's name in fine-tuning recipes ("task": ...; its folder, with a
        recipe.py as tasks/recipe_contract.py says), or None when `kbs finetune` does not
        run it (the pretrainers have their own recipe kind)."""

    class_name: str
    module: str
    recipe: str = None


TASKS = (
    RegisteredTask("BertClassifier", "classifier.model", recipe="classifier"),
    RegisteredTask("BertSpanLabeler", "span_labeler.model", recipe="span_labeler"),
    RegisteredTask("BertTokenClassifier", "token_classifier.model", recipe="token_classifier"),
    RegisteredTask("BertMultipleChoice", "multiple_choice.model", recipe="multiple_choice"),
    RegisteredTask("BertFeatureExtractor", "feature_extractor.model"),
    RegisteredTask("BertPretrainer", "pretrainer.model"),
    RegisteredTask("ReplacedTokenDetector", "pretrainer.replaced_token_detector"),
    RegisteredTask("ElectraPretrainer", "pretrainer.electra_pretrainer"),
)


def task_modules():
    """{public class name: the module that defines it}."""
    return {task.class_name: f"keras_bert_suite.tasks.{task.module}" for task in TASKS}


def recipe_tasks():
    """The task names fine-tuning recipes may give, in the table's order."""
    return tuple(task.recipe for task in TASKS if task.recipe is not None)
