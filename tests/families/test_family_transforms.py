"""The library's transforms on the family's variations, through the one seam (weights by
canonical name, blocks by index): an encoder with every variation at once (E-wide embeddings
and a projection, no segments, RoBERTa's positions, tanh GELU, a ReLU pooler, 4 layers
sharing 2 groups of 2 blocks) goes through the shared harness, LoRA, pruning (a shared
block is pruned once, for every layer that runs it) and the distillation student."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.distillation import student_from_teacher
from keras_bert_suite.pruning import mask_units, neuron_importance, prune_units
from keras_bert_suite.transforms import without_lora
from tests.harness import assert_all_close, run_layer_test, run_quantization_test, to_numpy

BATCH, LENGTH, HIDDEN = 2, 10, 16
EVERY_VARIATION = dict(
    vocabulary_size=64, num_layers=4, num_heads=4, hidden_dim=HIDDEN, intermediate_dim=24,
    max_sequence_length=12, num_segments=0, embedding_dim=8, position_offset=2,
    activation="gelu_approximate", pooler_activation="relu", num_layer_groups=2,
    layers_per_group=2)


def _inputs():
    rng = np.random.default_rng(0)
    mask = np.ones((BATCH, LENGTH), "int32")
    mask[1, 6:] = 0
    return {"token_ids": rng.integers(2, 64, (BATCH, LENGTH)).astype("int32") * mask + 1 - mask,
            "segment_ids": np.zeros((BATCH, LENGTH), "int32"), "padding_mask": mask}


def test_every_variation_through_the_harness():
    # 2 layers sharing one group of 2 blocks (the harness costs more with every block run:
    # 4 layers in 2 groups took 6.1 s alone on TensorFlow and 14.6 s on JAX, this 3.4 and
    # 10.2); several groups run in the pruning test below and in the transformers parity.
    init = {**EVERY_VARIATION, "num_layers": 2, "num_layer_groups": 1,
            "return_hidden_states": True}
    encoder, outputs = run_layer_test(
        BertEncoder, init, _inputs(),
        expected_output_shape={"sequence_output": (BATCH, LENGTH, HIDDEN),
                               "pooled_output": (BATCH, HIDDEN),
                               # 2 layers x 2 blocks each, after the embeddings
                               "hidden_states": (BATCH, 5, LENGTH, HIDDEN)})
    assert len(encoder.transformer_layers) == 2  # 1 group x 2 blocks, run by both layers
    assert encoder.layer_blocks == [[0, 1], [0, 1]]
    assert encoder.embeddings.segment_embedding is None
    cls = to_numpy(outputs["sequence_output"])[:, 0]
    pooled = np.maximum(cls @ to_numpy(encoder.pooler.kernel) + to_numpy(encoder.pooler.bias), 0)
    assert_all_close(outputs["pooled_output"], pooled)
    run_quantization_test(encoder, _inputs())


def test_positions_count_real_tokens_from_the_offset():
    """A row's real tokens read position rows offset, offset + 1, ...; its padding reads row
    offset - 1: so left-over padding ids never shift a real token's position."""
    encoder = BertEncoder(**EVERY_VARIATION)
    mask = np.array([[1, 1, 1, 0, 0]], "int32")
    positions = encoder.embeddings._positions(np.zeros((1, 5), "int32"), mask)
    table = to_numpy(encoder.embeddings.position_embedding)
    assert_all_close(positions, table[[2, 3, 4, 1, 1]][None])


def test_lora_on_shared_blocks_merges_into_the_same_function():
    encoder = BertEncoder(**EVERY_VARIATION)
    encoder.enable_lora(2)
    for block in encoder.transformer_layers:  # adapters that change the function
        layer = block.intermediate_dense
        layer.lora_kernel_b.assign(np.full(layer.lora_kernel_b.shape, 0.05, "float32"))
    merged = without_lora(encoder)
    assert merged.lora_rank is None and merged.layer_blocks == encoder.layer_blocks
    assert_all_close(merged(_inputs()), encoder(_inputs()), rtol=1e-4, atol=1e-5)


def test_pruning_a_shared_block_prunes_it_for_every_layer_that_runs_it():
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(**EVERY_VARIATION)
    heads, neurons = {0: [1], 3: [0, 2]}, {2: list(range(0, 24, 2))}
    pruned = prune_units(encoder, heads, neurons)
    assert pruned.layer_num_heads == [3, 4, 4, 2]
    assert pruned.layer_intermediate_dims == [24, 24, 12, 24]
    masked = mask_units(encoder, heads, neurons)
    assert_all_close(pruned(_inputs()), masked(_inputs()), rtol=1e-4, atol=1e-5)
    assert not np.allclose(to_numpy(masked(_inputs())["sequence_output"]),
                           to_numpy(encoder(_inputs())["sequence_output"]), atol=1e-4)
    scores = neuron_importance(encoder, _inputs())  # one score per distinct block's neuron
    assert [score.shape for score in scores] == [(24,)] * 4


def test_student_of_a_one_group_teacher_runs_its_blocks_fewer_times():
    teacher = BertEncoder(**{**EVERY_VARIATION, "num_layer_groups": 1,
                             "return_hidden_states": True})
    student = student_from_teacher(teacher, num_layers=2)
    assert student.num_layers == 2 and len(student.transformer_layers) == 2
    # The student's output is the teacher's after two layers (2 blocks each).
    assert_all_close(student(_inputs())["sequence_output"],
                     teacher(_inputs())["hidden_states"][:, 4], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="share 2 groups of blocks"):
        student_from_teacher(BertEncoder(**EVERY_VARIATION), num_layers=2)


@pytest.mark.parametrize("save", ["save_huggingface", "save_google_bert", "save_keras_hub"])
def test_writers_refuse_what_their_format_cannot_hold_and_say_why(save, tmp_path):
    """Google's BERT format holds BERT only; transformers has no family with every variation
    at once; KerasHub's ALBERT (shared layers) has a tanh pooler."""
    from keras_bert_suite.models import to_checkpoint

    encoder = BertEncoder(**{**EVERY_VARIATION, "num_segments": 2, "position_offset": 0})
    holder = "no transformers family" if save == "save_huggingface" else "BERT's architecture"
    message = (rf"writes {holder}, and this encoder has family arguments \(embedding_dim=8, "
               r"activation='gelu_approximate', pooler_activation='relu', "
               r"num_layer_groups=2, layers_per_group=2\)")
    if save == "save_keras_hub":
        message = (r"save_keras_hub: KerasHub's AlbertBackbone cannot hold this encoder's "
                   r"pooler_activation='relu' \(it holds 'tanh'\)")
    with pytest.raises(ValueError, match=message):
        getattr(to_checkpoint, save)(encoder, tmp_path / "out")


@pytest.mark.parametrize("change, message", [
    ({"pooler_activation": "sigmoid"}, r"pooler_activation must be one of \('tanh', 'gelu', "
                                       r"'relu'\), got 'sigmoid'"),
    ({"activation": "relu"}, r"activation must be one of \['gelu', 'gelu_approximate'\]"),
    ({"num_layer_groups": 5}, r"num_layer_groups must be None \(no shared layers\) or "
                              r"between 1 and num_layers=4"),
    ({"num_layer_groups": None, "layers_per_group": 2}, r"layers_per_group must be a positive "
                                                        r"integer, and 1 unless num_layer_groups"),
    ({"num_segments": -1}, r"num_segments must be 0 \(no segment embeddings, DistilBERT\)"),
    ({"position_offset": 1.5}, r"position_offset must be 0 \(BERT\) or a positive integer"),
    ({"embedding_dim": 0}, r"embedding_dim must be None \(embeddings as wide as hidden_dim\)"),
])
def test_bad_family_arguments_are_clear_errors(change, message):
    with pytest.raises(ValueError, match=message):
        BertEncoder(**{**EVERY_VARIATION, **change})
