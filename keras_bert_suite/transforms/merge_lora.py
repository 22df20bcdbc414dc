"""Merging LoRA adapters: the copy of a model that exports and pruning use (attaching them is
the encoder's own `enable_lora`, models/lora.py)."""

from keras_bert_suite.transforms.find_encoder import find_encoder
from keras_bert_suite.transforms.rebuild import rebuild, weight_arrays


def without_lora(model):
    """`model` (an encoder or a task) with each W + alpha / r A B folded into a plain kernel,
    as a new model without adapters; `model` itself when it has none. The copy computes the
    same function at the cost of the model without LoRA: exports serve it."""
    encoder = find_encoder(model)
    if getattr(encoder, "lora_rank", None) is None:  # no adapters (or not one of our models)
        return model
    # weight_map() reads each adapted kernel merged; the adapters are outside the table.
    return rebuild(model, {"lora_rank": None, "lora_alpha": None}, weight_arrays(encoder))
