"""Named tensors of one checkpoint, fetched with a shape check that names the variable."""

import re

import numpy as np

from keras_bert_suite.checkpoint_errors import CheckpointMismatchError


class TensorSource:
    """Reads tensors by the checkpoint's own variable names.

    `names`: every variable name the checkpoint holds; `read(name)` returns one as an array.
    `where` (the file) and `config_file` only make error messages point at the right files.
    """

    def __init__(self, names, read, where, config_file):
        self.names = set(names)
        self._read = read
        self.where = where
        self.config_file = config_file

    def __contains__(self, name):
        return name in self.names

    def get_unchecked(self, name):
        """A tensor whose shape the config does not fix (a task head's number of classes)."""
        if name not in self.names:
            raise CheckpointMismatchError(f"{self.where} has no variable '{name}'.")
        return np.asarray(self._read(name))

    def get(self, name, shape):
        if name not in self.names:
            raise CheckpointMismatchError(
                f"{self.where} has no variable '{name}' (expected shape {tuple(shape)} from "
                f"{self.config_file}). The weights do not match the config: fewer layers than "
                f"the config says, or not a BERT checkpoint?")
        value = np.asarray(self._read(name))
        if tuple(value.shape) != tuple(shape):
            raise CheckpointMismatchError(
                f"{self.where}: variable '{name}' has shape {tuple(value.shape)} but "
                f"{self.config_file} implies {tuple(shape)}.")
        return value

    def check_layer_count(self, layer_pattern, num_layers, first_index=0):
        """Fails on a variable of a transformer layer past the config's `num_layers`
        (`layer_pattern`: a regex whose group 1 numbers the layers, layer 0 being
        `first_index`): reading on would drop those layers silently."""
        pattern = re.compile(layer_pattern)
        extra = sorted((int(found.group(1)) - first_index, name) for name in self.names
                       for found in [pattern.search(name)] if found
                       and int(found.group(1)) - first_index >= num_layers)
        if extra:
            layers = 1 + max(index for index, _ in extra)
            raise CheckpointMismatchError(
                f"{self.where} has variable '{extra[0][1]}' of transformer layer "
                f"{extra[0][0]}, but {self.config_file} says there are {num_layers} layers "
                f"(num_hidden_layers={num_layers}; the checkpoint has {layers}). The weights "
                f"do not match the config.")
