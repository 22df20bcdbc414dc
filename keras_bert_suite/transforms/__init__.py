"""Transforms of a whole model, above the encoder and the task models: finding a model's
encoder, rebuilding a model with a changed encoder config, and merging LoRA adapters.

    find_encoder(model), encoder_of(model, what)   the encoder of an encoder or a task model
    rebuild(model, encoder_changes, encoder_weights)   same model class, changed encoder config
    weight_arrays(encoder)                           {canonical name: NumPy copy}
    without_lora(model)                              the adapters folded into plain kernels

Neither `models/` nor `tasks/` imports this package: it reaches them only through what every
model of ours defines (`is_bert_encoder`, `encoder`, `get_config` / `from_config`,
`weight_map` / `load_weight_map`), so the encoder class is no hub for these transforms.
"""

from keras_bert_suite.transforms.find_encoder import encoder_of, find_encoder
from keras_bert_suite.transforms.merge_lora import without_lora
from keras_bert_suite.transforms.rebuild import rebuild, weight_arrays

__all__ = ["encoder_of", "find_encoder", "rebuild", "weight_arrays", "without_lora"]
