"""Structured pruning: attention heads and feed-forward neurons removed by importance, giving
a genuinely smaller model (smaller matrices, fewer heads in the config; not masks).

    prune(task, calibration_data, head_fraction=..., ffn_fraction=...)   score, choose, remove
    head_importance(task, calibration_data)      loss increase per masked head, per layer
    neuron_importance(model, calibration_data)   activation x output-weight norm per neuron
    prune_units(model, heads_to_remove=..., neurons_to_remove=...)   remove chosen units
    prune_heads(model, heads_to_remove), prune_ffn(model, neurons_to_remove)
    mask_units(model, heads_to_mask=..., neurons_to_mask=...)   same sizes, units zeroed
    least_important(scores, fraction)            the global choice `prune` makes

Units are given as {layer index: [indices]}, indices into a layer's current heads or
neurons. A pruned encoder's config has `layer_num_heads` / `layer_intermediate_dims`
(`BertEncoder`); it trains, saves (`.keras`, `save_to_preset`), loads and exports
(`export_saved_model`) like any model. Hugging Face / Google BERT / KerasHub checkpoints have
one size for every layer and refuse it.

>>> from keras_bert_suite import BertClassifier, pruning
>>> classifier = BertClassifier.from_preset(
...     "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=2, sequence_length=16)
>>> smaller = pruning.prune_heads(classifier, {0: [0]})
>>> type(smaller).__name__, smaller.encoder.layer_num_heads
('BertClassifier', [1, 2])
"""

from keras_bert_suite.pruning.importance import head_importance, neuron_importance
from keras_bert_suite.pruning.masking import mask_units
from keras_bert_suite.pruning.prune import prune
from keras_bert_suite.pruning.selection import least_important
from keras_bert_suite.pruning.structure import prune_ffn, prune_heads, prune_units

__all__ = ["head_importance", "least_important", "mask_units", "neuron_importance", "prune",
           "prune_ffn", "prune_heads", "prune_units"]
