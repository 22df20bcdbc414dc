"""Checkpoint import/export: foreign formats -> (config, {canonical weight name: array}).

Never imports `keras_bert_suite.models`; models ask this package for a `Checkpoint` and build
themselves from it. One reader per format (preset_dir, huggingface, google_bert, model_garden,
keras_hub);
`load_checkpoint` detects which one a directory needs; `resolve_checkpoint` also takes the
built-in preset names of `PRESETS`.
"""

from keras_bert_suite.checkpoints.checkpoint import Checkpoint
from keras_bert_suite.checkpoints.detect import load_checkpoint
from keras_bert_suite.checkpoints.errors import (
    CheckpointMismatchError,
    UnknownCheckpointFormatError,
    UnknownPresetError,
    UnsupportedCheckpointError,
)
from keras_bert_suite.checkpoints.packaged import packaged_checkpoint_dir
from keras_bert_suite.checkpoints.presets import PRESETS, list_presets, resolve_checkpoint
