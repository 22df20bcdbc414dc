"""Preset names: the built-in presets (builtin.py), the checkpoints installed packages carry
(packaged.py) and `resolve_checkpoint` (resolve.py), which turns a built-in name or a path
into a `checkpoints.Checkpoint`.

Above checkpoints/ and families/ (it reads the one and lists the other's presets), below
text/, models/ and tasks/, whose `from_preset` all resolve through here: a tokenizer then
reads its files from the checkpoint's `directory` (text/tokenizer_files.py).
"""

from keras_bert_suite.presets.builtin import PRESETS, Preset, list_presets
from keras_bert_suite.presets.packaged import packaged_checkpoint_dir
from keras_bert_suite.presets.resolve import resolve_checkpoint, unknown_preset_message
