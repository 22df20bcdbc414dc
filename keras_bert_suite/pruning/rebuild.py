"""What structural pruning and masking return: `transforms.rebuild` (the same model with a
changed encoder config) of a model that is neither quantized nor carrying LoRA adapters."""

import logging

from keras_bert_suite import transforms
from keras_bert_suite.models.quantization import refuse_quantized
from keras_bert_suite.pruning.units import encoder_of

logger = logging.getLogger(__name__)


def rebuild(model, encoder_changes, encoder_weights):
    """`transforms.rebuild`, refusing a quantized model (its int8 kernels cannot be
    sliced); `model` has no LoRA adapters (merge them first: `without_adapters`)."""
    refuse_quantized(model, "Pruning or masking")
    return transforms.rebuild(model, encoder_changes, encoder_weights)


def without_adapters(model):
    """`model` with LoRA adapters folded into its kernels (pruning slices plain kernels);
    `model` itself when it has none."""
    if encoder_of(model).lora_rank is not None:
        logger.info("Pruning merges the LoRA adapters into the kernels; the pruned model has "
                    "none (call enable_lora on it to fine-tune with adapters again).")
        return transforms.without_lora(model)
    return model
