"""Reads a KerasHub preset of any backbone of keras_hub_backbones.BACKBONES (BertBackbone,
RobertaBackbone, XLMRobertaBackbone, DistilBertBackbone, AlbertBackbone, ElectraBackbone):
config.json naming the backbone, model.weights.h5, and the tokenizer KerasHub wrote beside
them (tokenizer.json, assets/tokenizer/: vocabulary.txt for WordPiece, BPE's or
SentencePiece's files), which our tokenizer classes read (text/tokenizer_files.py).

A task preset also holds task.json and task.weights.h5: a TextClassifier's `logits` Dense is
read as the Checkpoint's task head (and its `pooled_dense` as our pooler where the backbone
has none), a BertMaskedLM's `mlm_head/...` as our `mlm/...` weights. keras_hub_writer.py
writes these presets.
"""

import json
import os

from keras_bert_suite.checkpoint_errors import UnsupportedCheckpointError
from keras_bert_suite.checkpoints import keras_hub_weights
from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.keras_hub_backbones import BACKBONES
from keras_bert_suite.checkpoints.keras_hub_h5 import weights_source

NAME = "KerasHub BERT-family preset"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
TASK_CONFIG_FILE, TASK_WEIGHTS_FILE = "task.json", "task.weights.h5"  # a KerasHub task's head
FILES_NEEDED = (f"{CONFIG_FILE} naming keras_hub>{next(iter(BACKBONES))} (or "
                f"{', '.join(list(BACKBONES)[1:])}) + {WEIGHTS_FILE}")


def matches(directory, config_json):
    return config_json is not None and (
        str(config_json.get("registered_name", "")).startswith("keras_hub>")
        or str(config_json.get("module", "")).startswith("keras_hub."))


def load(directory, load_weights=True):
    config_path = os.path.join(directory, CONFIG_FILE)
    with open(config_path) as f:
        saved = json.load(f)
    backbone = BACKBONES.get(saved.get("class_name"))
    if backbone is None:
        raise UnsupportedCheckpointError(
            f"{config_path}: KerasHub class '{saved.get('class_name')}' is not supported; only "
            f"{', '.join(BACKBONES)} presets can be loaded into BertEncoder.")
    config = backbone.encoder_config(saved["config"])
    weights = head_reader = None
    if load_weights:
        task = _task_read(directory, backbone)
        task_source = None if task is None else weights_source(
            os.path.join(directory, TASK_WEIGHTS_FILE), os.path.join(directory, TASK_CONFIG_FILE))
        classifier_source = task_source if task == backbone.classifier else None
        weights = keras_hub_weights.from_keras_hub(
            backbone, weights_source(os.path.join(directory, WEIGHTS_FILE), config_path),
            config, classifier_source)
        if classifier_source is not None:
            head = keras_hub_weights.classifier_head(classifier_source, config)

            def head_reader(form):  # the TextClassifier's head, for the task KerasHub's holds
                return head if form.keras_hub == "classifier" else None
        elif task_source is not None:  # the masked LM: BertPretrainer.from_preset reads it
            weights.update(keras_hub_weights.masked_lm_head(task_source, config))
    return Checkpoint(config=config, weights=weights, format="keras_hub",
                      head_reader=head_reader)


def _task_read(directory, backbone):
    """The backbone's classifier or masked LM when task.json names it (and task.weights.h5
    is there), else None: a backbone preset, or a task whose head we do not read."""
    task_path = os.path.join(directory, TASK_CONFIG_FILE)
    if not (os.path.exists(task_path)
            and os.path.exists(os.path.join(directory, TASK_WEIGHTS_FILE))):
        return None
    with open(task_path) as f:
        task = json.load(f).get("class_name")
    return task if task is not None and task in (backbone.classifier, backbone.masked_lm) else None

