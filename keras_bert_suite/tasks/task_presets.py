"""A task's preset lifecycle, as KerasHub's Task: `from_preset` (a preset of ours, a task
saved by `save_to_preset`, or another library's checkpoint of the task with its head) and
`save_to_preset`."""

import inspect
import json
import logging
import os

import keras

from keras_bert_suite.models import weight_names
from keras_bert_suite.models.encoder import BertEncoder
from keras_bert_suite.tasks.model_base import is_auto
from keras_bert_suite.presets import resolve_checkpoint
from keras_bert_suite.models.from_checkpoint import encoder_from_checkpoint
from keras_bert_suite.checkpoints import preset_dir
from keras_bert_suite import storage

# Beside an encoder preset's files, a task preset keeps the whole task (head + preprocessor).
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"

logger = logging.getLogger(__name__)


class TaskPresets:
    """`from_preset` / `save_to_preset` of a task model (its class declares
    `preprocessor_class`, `default_sequence_length`, `preset_encoder_overrides` and
    `checkpoint_form`: tasks/contract.py)."""

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, preprocessor="auto",
                    encoder_overrides=None, **task_arguments):
        """The task from `preset`, as KerasHub's `Task.from_preset`.

        `preset` is anything `BertEncoder.from_preset` takes. A directory written by this
        class's `save_to_preset` comes back whole (fine-tuned head, preprocessor, label
        names) unless `task_arguments` are given; otherwise the encoder (and its weights)
        comes from `preset` and the head is new. `preprocessor="auto"` builds the task's
        preprocessor from the preset's vocabulary with `sequence_length` (the task's default
        when None); pass None for none. `encoder_overrides` go to the encoder (e.g.
        `{"dropout": 0.0}`), `task_arguments` to the task (e.g. `num_classes=2`);
        `lora_rank=` (and `lora_alpha=`) load the weights, then `enable_lora`.
        """
        lora = {key: task_arguments.pop(key) for key in ("lora_rank", "lora_alpha")
                if task_arguments.get(key) is not None}
        saved = _saved_task(preset, cls)
        if saved is not None and not task_arguments and not encoder_overrides:
            task = _load_saved_task(preset, saved, load_weights, sequence_length, preprocessor)
            if lora and task.encoder.lora_rank is None:
                task.enable_lora(lora["lora_rank"], lora.get("lora_alpha"))
            return task
        if saved is not None:
            logger.info("%s holds a saved %s; building a new head because task arguments "
                        "were given.", preset, saved["class_name"])
        overrides = {**cls.preset_encoder_overrides, **(encoder_overrides or {}), **lora}
        if is_auto(preprocessor):
            preprocessor = cls.preprocessor_class.from_preset(
                preset, sequence_length=sequence_length or cls.default_sequence_length)
        return cls._from_checkpoint(preset, load_weights, overrides, preprocessor,
                                    task_arguments)

    @classmethod
    def _from_checkpoint(cls, preset, load_weights, encoder_overrides, preprocessor,
                         task_arguments):
        """The task with its encoder from `preset`, and its head too when the checkpoint is
        this task fine-tuned elsewhere (where, the class's `checkpoint_form` says:
        transformers' BertFor*, KerasHub's TextClassifier) and `task_arguments` agree with
        it; else a new head."""
        checkpoint, encoder, head = cls._checkpoint_and_encoder(preset, load_weights,
                                                                encoder_overrides)
        if head is None:
            return cls(encoder, preprocessor=preprocessor, **task_arguments)
        units = head["kernel"].shape[1]
        if ("num_classes" in inspect.signature(cls.__init__).parameters
                and task_arguments.get("num_classes", units) == units):
            task_arguments = {"num_classes": units, "label_names": head["label_names"],
                              **task_arguments}
        task = cls(encoder, preprocessor=preprocessor, **task_arguments)
        dense = task.head_layer
        if tuple(dense.kernel.shape) != head["kernel"].shape:
            logger.info("%s holds a %d-unit %s head; num_classes=%s asks for another: the "
                        "head is new.", preset, units, cls.__name__,
                        task_arguments.get("num_classes"))
            return task
        dense.kernel.assign(head["kernel"])
        dense.bias.assign(head["bias"])
        return task

    @classmethod
    def _checkpoint_and_encoder(cls, preset, load_weights, encoder_overrides):
        """(the checkpoint of `preset`, read once; the BertEncoder built from it; this task's
        head in it, or None). A task class that keeps our pooler outside the base model
        (RoBERTa's `classifier.dense`, ...) hands it to the encoder."""
        checkpoint = resolve_checkpoint(preset, load_weights=load_weights)
        head = checkpoint.task_head(cls.checkpoint_form)
        if head is not None:
            checkpoint.weights.update(head["pooler"])
        return checkpoint, encoder_from_checkpoint(
            BertEncoder, checkpoint, preset, load_weights, **encoder_overrides), head

    def _load_heads(self, heads, weights, preset):
        """Assigns each of `heads` ({head's name: its variables by canonical name}) from a
        checkpoint's `weights` where the checkpoint has that head; a head it lacks stays
        random, with a warning."""
        for head, variables in heads.items():
            if any(name in weights for name in variables):
                weight_names.assign(variables, weights,
                                    owner=f"{type(self).__name__} {head} head")
            else:
                logger.warning("Preset '%s' has no %s head weights: that head is randomly "
                               "initialised.", preset, head)

    def preset_weights(self):
        """{canonical weight name: variable} written to the preset's model.weights.npz."""
        return self.encoder.weight_map()

    def save_to_preset(self, directory, vocabulary=None, lowercase=None):
        """Writes a preset directory: the encoder preset (config.json, model.weights.npz,
        vocab.txt: `BertEncoder.from_preset` and other tasks read it) plus task.json (this
        task's config, head and preprocessor included) and task.weights.h5, so
        `type(self).from_preset(directory)` returns this task as it is now. The vocabulary
        is the preprocessor's unless `vocabulary` (a path, a token list or a tokenizer) is
        given. `directory` may be any path tf.io.gfile reaches (gs://bucket/preset): the
        preset is written locally, then uploaded."""
        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        vocabulary = vocabulary if vocabulary is not None else tokenizer
        if lowercase is None:
            lowercase = getattr(vocabulary, "lowercase", getattr(tokenizer, "lowercase", True))
        with storage.local_directory(directory) as local:
            preset_dir.save(local, self.encoder.get_config(), self.preset_weights(), vocabulary,
                            lowercase)
            with open(os.path.join(local, TASK_CONFIG_FILE), "w") as f:
                json.dump(keras.saving.serialize_keras_object(self), f)
            keras.saving.save_weights(self, os.path.join(local, TASK_WEIGHTS_FILE),
                                      objects_to_skip=_optimizer_of(self))
        return directory


def _optimizer_of(model):
    # keras.saving.save_weights / load_weights leave these objects out (`objects_to_skip`, as
    # KerasHub's task weights): a preset carries the model's weights, not a training run's
    # optimizer state.
    return [model.optimizer] if getattr(model, "optimizer", None) is not None else None


def _saved_task(preset, cls):
    """The task.json of a preset directory saved from `cls` (or a subclass), else None."""
    path = os.path.join(os.fspath(preset), TASK_CONFIG_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    saved_class = keras.saving.get_registered_object(saved.get("registered_name", ""))
    if saved_class is None or not issubclass(saved_class, cls):
        return None
    return saved


def _load_saved_task(preset, saved, load_weights, sequence_length, preprocessor):
    task = keras.saving.deserialize_keras_object(saved)
    if load_weights:
        keras.saving.load_weights(task, os.path.join(os.fspath(preset), TASK_WEIGHTS_FILE),
                                  objects_to_skip=_optimizer_of(task))
    if preprocessor is None:
        task.preprocessor = None
    elif not is_auto(preprocessor):
        task.preprocessor = preprocessor
    elif sequence_length is not None and task.preprocessor is not None:
        config = task.preprocessor.get_config()
        config["sequence_length"] = sequence_length
        task.preprocessor = type(task.preprocessor).from_config(config)
    return task
