"""Checkpoint import/export: foreign formats -> (config, {canonical weight name: array}).

Never imports `keras_bert_suite.models`; models ask this package for a `Checkpoint` and build
themselves from it. One reader per format (preset_dir, huggingface, google_bert, model_garden,
keras_hub); `load_checkpoint` detects which one a directory needs. Built-in preset names are
keras_bert_suite.presets' (`resolve_checkpoint`), which reads through here; a family's
config and module tree are its record's (keras_bert_suite.families), which the readers ask.
"""

from keras_bert_suite.checkpoint_errors import (
    CheckpointMismatchError,
    UnknownCheckpointFormatError,
    UnknownPresetError,
    UnsupportedCheckpointError,
)
from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.detect import load_checkpoint
