"""Every family's encoder, read from a transformers checkpoint, computes transformers'
numbers on every backend: the last layer, every layer's hidden state and (where the family
has one) the pooler, on real sentences with padding; the TensorFlow serving graph of the
same encoder computes them too (float32), and close to them in bfloat16 and int8."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite import BertEncoder
from keras_bert_suite.export.cpu_features import int8_vnni_flags
from keras_bert_suite.export.serving_encoder import ServingEncoder
from keras_bert_suite.families import family_of_model_type
from tests.conftest import to_numpy
from tests.families.conftest import FAMILY_CONFIGS, family_inputs
from tests.numerics import assert_close

# Ours vs torch: other kernels and summation order (measured up to 5e-7 relative here); a
# wrong position, activation or shared block moves outputs by > 1e-2.
RTOL, ATOL = 1e-4, 1e-5
# (the config our reader must produce for it): the family's arguments of BertEncoder.
EXPECTED_FAMILY_ARGUMENTS = {
    "bert": dict(embedding_dim=None, position_offset=0, num_segments=2, activation="gelu",
                 pooler_activation="tanh", num_layer_groups=None),
    "roberta": dict(embedding_dim=None, position_offset=2, num_segments=1,
                    max_sequence_length=40, layer_norm_epsilon=1e-5, pooler_activation="tanh"),
    "xlm-roberta": dict(position_offset=2, num_segments=1, layer_norm_epsilon=1e-5),
    "distilbert": dict(num_segments=0, pooler_activation="relu", activation="gelu"),
    "electra": dict(embedding_dim=16, pooler_activation="gelu", num_layer_groups=None),
    "albert": dict(embedding_dim=16, num_layer_groups=1, layers_per_group=1,
                   activation="gelu_approximate", pooler_activation="tanh"),
    "albert-shared-groups": dict(num_layers=4, num_layer_groups=2, layers_per_group=2),
}


def _torch_inputs(config, inputs):
    """Our encoder inputs as transformers' keyword arguments (segments where it has them)."""
    import torch

    arguments = {"input_ids": torch.from_numpy(inputs["token_ids"]).long(),
                 "attention_mask": torch.from_numpy(inputs["padding_mask"]).long()}
    if getattr(config, "type_vocab_size", 0) > 1:
        arguments["token_type_ids"] = torch.from_numpy(inputs["segment_ids"]).long()
    return arguments


def _reference(directory, inputs):
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(directory).eval()
    with torch.no_grad():
        outputs = model(**_torch_inputs(model.config, inputs), output_hidden_states=True)
    pooled = getattr(outputs, "pooler_output", None)
    return {"sequence_output": outputs.last_hidden_state.numpy(),
            "hidden_states": np.stack([h.numpy() for h in outputs.hidden_states], axis=1),
            "pooled_output": None if pooled is None else pooled.numpy()}


@pytest.mark.parametrize("name", list(FAMILY_CONFIGS))
def test_encoder_computes_what_transformers_computes(name, family_checkpoints):
    directory = family_checkpoints[name]
    encoder = BertEncoder.from_preset(directory, return_hidden_states=True)
    config = encoder.get_config()
    for key, value in EXPECTED_FAMILY_ARGUMENTS[name].items():
        assert config[key] == value, (key, config[key], value)
    inputs = family_inputs(name)
    expected = _reference(directory, inputs)
    outputs = encoder(inputs)
    for key in ("sequence_output", "hidden_states"):
        assert_close(to_numpy(outputs[key]), expected[key], RTOL, ATOL, err_msg=key)
    if expected["pooled_output"] is not None:  # DistilBERT and ELECTRA have no pooler
        assert_close(to_numpy(outputs["pooled_output"]), expected["pooled_output"], RTOL,
                     ATOL, err_msg="pooled_output")


@pytest.mark.parametrize("name", ["roberta", "distilbert", "electra", "albert-shared-groups"])
def test_serving_graph_computes_each_family(name, family_checkpoints):
    """Positions from the padding mask, no segments, the projection, shared blocks and each
    pooler activation in the TensorFlow graph exports serve."""
    encoder = BertEncoder.from_preset(family_checkpoints[name], return_hidden_states=True)
    inputs = family_inputs(name)
    expected = {key: to_numpy(value) for key, value in encoder(inputs).items()}
    tensors = {key: tf.constant(value) for key, value in inputs.items()}
    got = ServingEncoder(encoder)(tensors)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert_close(got[key].numpy(), value, RTOL, ATOL, err_msg=key)
    real = inputs["padding_mask"].astype(bool)
    # int8_vnni where this CPU computes it right (VNNI / AMX).
    bounds = {"bfloat16": 0.999, "int8": 0.998, "int8_vnni": 0.995}
    for precision in [p for p in bounds if p != "int8_vnni" or int8_vnni_flags()]:
        bound = bounds[precision]
        reduced = ServingEncoder(encoder, precision)(tensors)["sequence_output"].numpy()[real]
        exact = expected["sequence_output"][real]
        cosine = np.sum(reduced * exact, -1) / (
            np.linalg.norm(reduced, axis=-1) * np.linalg.norm(exact, axis=-1))
        assert cosine.min() >= bound, (precision, cosine.min())
        assert np.abs(reduced - exact).max() > 1e-5, precision  # the reduced kernels ran


@pytest.mark.parametrize("name", ["roberta", "distilbert", "electra", "albert-shared-groups"])
def test_ours_to_transformers_to_ours_bit_for_bit(name, family_checkpoints, tmp_path):
    """save_huggingface writes the family's base model: transformers loads it with no
    missing or unexpected weight and computes our numbers, and we read every weight back
    exactly."""
    import transformers

    from keras_bert_suite import save_huggingface

    encoder = BertEncoder.from_preset(family_checkpoints[name])
    path = save_huggingface(encoder, tmp_path / name)
    theirs, info = transformers.AutoModel.from_pretrained(path, output_loading_info=True)
    family = family_of_model_type(theirs.config.model_type)
    assert type(theirs).__name__ == family.base_model  # RobertaModel, ...
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    inputs = family_inputs(name)
    expected = _reference(path, inputs)
    assert_close(to_numpy(encoder(inputs)["sequence_output"]), expected["sequence_output"],
                 RTOL, ATOL)
    back = BertEncoder.from_preset(path)
    assert back.get_config() == {**encoder.get_config(), "name": back.name}
    ours = encoder.weight_map()
    # DistilBERT's and ELECTRA's base models have no pooler (it is their classification
    # head's first dense): every other weight comes back exactly.
    has_pooler = "pooler" in family.tree.modules
    for weight_name, value in back.weight_map().items():
        if weight_name.startswith("pooler/") and not has_pooler:
            continue
        np.testing.assert_array_equal(to_numpy(value), to_numpy(ours[weight_name]),
                                      err_msg=weight_name)


# (family, task): each family's classifier (the head shapes differ most there), and each
# other head on one family, so that every family-specific pooler placement is read and
# written: RoBERTa's and ELECTRA's classifier.dense, DistilBERT's pre_classifier, ELECTRA's
# sequence summary, the base pooler (ALBERT, RoBERTa's multiple choice).
TASKS = [("roberta", "ForSequenceClassification"), ("distilbert", "ForSequenceClassification"),
         ("electra", "ForSequenceClassification"), ("albert", "ForSequenceClassification"),
         ("xlm-roberta", "ForTokenClassification"), ("albert", "ForQuestionAnswering"),
         ("electra", "ForMultipleChoice"), ("roberta", "ForMultipleChoice"),
         ("distilbert", "ForMultipleChoice")]


@pytest.mark.parametrize("name, suffix", TASKS)
def test_task_heads_compute_what_transformers_computes_and_go_back(
        name, suffix, family_checkpoints, tmp_path):
    """transformers' task class (random head) read into our task computes its logits; our
    task written back is that class again, with every weight bit for bit."""
    import torch
    import transformers

    from keras_bert_suite import save_huggingface
    from keras_bert_suite.tasks import import_task_models

    config_class, arguments = FAMILY_CONFIGS[name]
    config = getattr(transformers, config_class)(
        **arguments, num_labels=2 if suffix == "ForQuestionAnswering" else 3)
    # the task whose declared transformers head is this class's
    task_class = next(task for task in import_task_models().values()
                      if getattr(task.checkpoint_form, "transformers", None) is not None
                      and getattr(task.checkpoint_form.transformers, "suffix", None) == suffix)
    torch.manual_seed(1)
    theirs = getattr(transformers, config_class.replace("Config", suffix))(config).eval()
    theirs.save_pretrained(tmp_path / "theirs")
    task_arguments = {"num_choices": 3} if suffix == "ForMultipleChoice" else {}
    ours = task_class.from_preset(str(tmp_path / "theirs"), preprocessor=None,
                                  **task_arguments)

    inputs = family_inputs(name)
    arguments = _torch_inputs(config, inputs)
    if suffix == "ForMultipleChoice":  # the batch's rows as one example's 3 choices
        arguments = {key: value[None] for key, value in arguments.items()}
        inputs = {key: value[None] for key, value in inputs.items()}
    with torch.no_grad():
        expected = theirs(**arguments)
    if suffix == "ForQuestionAnswering":  # ours gives padding a large negative logit
        got, real = ours(inputs), inputs["padding_mask"].astype(bool)
        for key in ("start_logits", "end_logits"):
            assert_close(to_numpy(got[key])[real], getattr(expected, key).numpy()[real],
                         RTOL, ATOL, err_msg=key)
    else:
        assert_close(to_numpy(ours(inputs)), expected.logits.numpy(), RTOL, ATOL)

    path = save_huggingface(ours, tmp_path / "ours")
    back, info = getattr(transformers, config_class.replace("Config", suffix)).from_pretrained(
        path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    mine = {key: value.numpy() for key, value in back.state_dict().items()}
    for key, value in theirs.state_dict().items():
        if key in mine:  # tied decoders and position-id buffers are not weights
            np.testing.assert_array_equal(mine[key], value.numpy(), err_msg=key)
