"""The library's transforms on a ModernBERT encoder through its block kind's declarations
alone: LoRA (Wqkv, Wo, Wi, mlp Wo) merges into the same function, pruning heads and GeGLU
input/gate pairs gives what masking them gives, int8 keeps the outputs, and the distillation
student takes the teacher's blocks."""

import keras
import numpy as np

from keras_bert_suite import BertEncoder
from keras_bert_suite.distillation import student_from_teacher
from keras_bert_suite.pruning import mask_units, neuron_importance, prune_units
from keras_bert_suite.transforms import without_lora
from tests.harness import assert_all_close, run_quantization_test, to_numpy

BATCH, LENGTH = 2, 10
SMALL = dict(vocabulary_size=64, num_layers=4, num_heads=4, hidden_dim=16, intermediate_dim=24,
             num_segments=0, dropout=0.0, layer_norm_epsilon=1e-5, pooler_activation="gelu",
             block="modernbert", block_options={"local_attention": 4})


def _inputs():
    rng = np.random.default_rng(0)
    mask = np.ones((BATCH, LENGTH), "int32")
    mask[1, 7:] = 0
    return {"token_ids": rng.integers(1, 64, (BATCH, LENGTH)).astype("int32") * mask,
            "segment_ids": np.zeros((BATCH, LENGTH), "int32"), "padding_mask": mask}


def test_lora_pruning_int8_and_the_student():
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(**SMALL, return_hidden_states=True)
    inputs = _inputs()

    lora = BertEncoder(**SMALL)
    lora.set_weights(encoder.get_weights()[:len(lora.get_weights())])
    lora.enable_lora(2)
    for block in lora.transformer_layers:  # adapters that change the function
        layer = block.feed_forward_input
        layer.lora_kernel_b.assign(np.full(layer.lora_kernel_b.shape, 0.05, "float32"))
    assert_all_close(without_lora(lora)(inputs), lora(inputs), rtol=1e-4, atol=1e-5)

    heads, neurons = {1: [0], 3: [1, 2]}, {2: list(range(0, 24, 2))}  # pairs of W_i columns
    pruned = prune_units(encoder, heads, neurons)
    assert pruned.layer_num_heads == [4, 3, 4, 2]
    assert pruned.layer_intermediate_dims == [24, 24, 12, 24]
    assert tuple(pruned.transformer_layers[2].feed_forward_input.kernel.shape) == (16, 24)
    masked = mask_units(encoder, heads, neurons)
    assert_all_close(pruned(inputs), masked(inputs), rtol=1e-4, atol=1e-5)
    scores = neuron_importance(encoder, inputs)
    assert [score.shape for score in scores] == [(24,)] * 4

    # Teacher layers 0 and 3 are global (every 3rd), so the student's are both global, not
    # the pattern's global then local; layers 1 and 2 keep their local attention.
    for layers, kinds in (([0, 3], ["global", "global"]),
                          ([0, 1, 2], ["global", "local", "local"])):
        student = student_from_teacher(encoder, layers=layers)
        assert student.block == "modernbert" and student.num_layers == len(layers)
        assert [block.attention for block in student.transformer_layers] == kinds
        again = BertEncoder.from_config(student.get_config())
        assert [block.attention for block in again.transformer_layers] == kinds
    assert to_numpy(student(inputs)["sequence_output"]).shape == (BATCH, LENGTH, 16)

    run_quantization_test(encoder, inputs)  # quantizes `encoder` itself: last
