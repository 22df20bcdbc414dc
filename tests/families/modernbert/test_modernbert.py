"""ModernBERT read from transformers directories (`BertEncoder.from_preset`) in both config.json
spellings: the tokenizer's ids are transformers', every hidden state within rtol 1e-4 of
ModernBertModel's, local layers give the same numbers band-masked and windowed, the serving
forms compute what the Keras layers do, the preset and transformers round trips are bit
for bit, and every task class reads transformers' (logits, raw text) and goes back."""

import json
import os

import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.layers.blocks.modernbert import (
    ModernBertBlock, ModernBertOptions)
from keras_bert_suite.layers.blocks.modernbert.pieces import ModernBertPooler
from tests.conftest import to_numpy
from tests.families.modernbert.conftest import SENTENCES, packed, reference_outputs
from tests.harness import run_layer_test, run_serving_form_test
from tests.layers.torch_reference import RTOL, atol_for

pytestmark = pytest.mark.real  # a tokenizer learned from real text, real sentences


def test_ids_and_every_hidden_state_match_transformers_in_both_spellings(
        modernbert_checkpoints):
    from transformers import AutoTokenizer

    configs = []
    for spelling, directory in sorted(modernbert_checkpoints.items()):
        inputs = packed(directory)
        theirs = AutoTokenizer.from_pretrained(directory)(
            SENTENCES, padding="max_length", max_length=24)
        np.testing.assert_array_equal(inputs["token_ids"], theirs["input_ids"])
        np.testing.assert_array_equal(inputs["padding_mask"], theirs["attention_mask"])
        encoder = BertEncoder.from_preset(directory, return_hidden_states=True)
        configs.append(encoder.config)
        ours = to_numpy(encoder(inputs)["hidden_states"])  # [B, L + 1, T, H]
        expected, _ = reference_outputs(directory, inputs)
        real = inputs["padding_mask"].astype(bool)  # padded rows are nobody's keys
        assert ours.shape[1] == len(expected) == 5
        for index, state in enumerate(expected):
            np.testing.assert_allclose(ours[:, index][real], state[real], rtol=RTOL,
                                       atol=atol_for(state), err_msg=f"{spelling} {index}")
    assert configs[0] == configs[1]
    assert configs[0].block == "modernbert"
    options = ModernBertOptions(**configs[0].block_options)
    assert (options.radius, options.global_rope_theta, options.local_rope_theta) == (
        2, 5_000.0, 500.0)


def test_local_layers_masked_and_windowed_and_the_serving_forms(modernbert_checkpoints):
    """A window of 16 (radius 8): 12 columns attend band-masked, 24 windowed (cost linear in
    T); the real rows agree. The serving forms (windowed in the graph) agree with both."""
    directory = modernbert_checkpoints["transformers5"]
    loaded = BertEncoder.from_preset(directory)
    encoder = BertEncoder.from_preset(
        directory, block_options={**loaded.block_options, "local_attention": 16})
    sentences = ["Hello world", "The senate passed the bill.", "We will not fail."]
    short, long = packed(directory, sentences, 12), packed(directory, sentences, 24)
    assert short["padding_mask"].sum(axis=1).max() > 9  # longer than the radius
    masked = to_numpy(encoder(short)["sequence_output"])
    windowed = to_numpy(encoder(long)["sequence_output"])[:, :12]
    real = short["padding_mask"].astype(bool)
    np.testing.assert_allclose(windowed[real], masked[real], rtol=1e-5, atol=1e-6)
    run_serving_form_test(encoder, short)


def test_block_and_pooler_layers(modernbert_checkpoints):
    """The harness' layer checks (config, shapes, `.keras` round trip, a training step)."""
    hidden, batch, length = 8, 2, 6
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, length, hidden)).astype("float32")
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 4:] = 0
    from keras_bert_suite.layers.blocks.modernbert.pieces import ModernBertContext

    context = to_numpy_tree(ModernBertContext(4, 160_000.0, 10_000.0)(padding_mask))
    run_layer_test(ModernBertBlock, dict(num_heads=2, hidden_dim=hidden, intermediate_dim=12,
                                         attention="local", radius=1),
                   {"x": x, "context": context}, (batch, length, hidden))
    run_layer_test(ModernBertPooler, dict(hidden_dim=hidden), x[:, 0], (batch, hidden))


def to_numpy_tree(tree):
    return {key: to_numpy(value) for key, value in tree.items()}


def test_round_trips_are_bit_for_bit(modernbert_checkpoints, tmp_path):
    from safetensors.numpy import load_file

    from keras_bert_suite.models.to_checkpoint import save_huggingface

    from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset

    directory = modernbert_checkpoints["transformers5"]
    encoder = BertEncoder.from_preset(directory)
    tokenizer = tokenizer_from_preset(directory)
    assert (tokenizer.packer_layout, tokenizer.special_tokens["cls"]) == ("bert", "[CLS]")
    weights = {name: to_numpy(value) for name, value in encoder.weight_map().items()}
    encoder.save_preset(tmp_path / "preset", vocabulary=tokenizer)
    again = BertEncoder.from_preset(str(tmp_path / "preset"))
    assert again.config == encoder.config
    for name, value in again.weight_map().items():
        np.testing.assert_array_equal(to_numpy(value), weights[name], err_msg=name)

    written = save_huggingface(encoder, str(tmp_path / "hf"), vocabulary=tokenizer)
    expected = packed(directory)
    for where in (str(tmp_path / "preset"), written):  # the tokenizer saved packs the same
        for key, value in packed(where).items():
            np.testing.assert_array_equal(value, expected[key], err_msg=f"{where} {key}")
    original = load_file(os.path.join(directory, "model.safetensors"))
    ours = load_file(os.path.join(written, "model.safetensors"))
    assert sorted(ours) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)
    with open(os.path.join(written, "config.json")) as f:
        config = json.load(f)
    assert config["model_type"] == "modernbert" and config["architectures"] == [
        "ModernBertModel"]
    assert BertEncoder.from_preset(written).config == encoder.config


def test_task_classes_compute_transformers_logits_and_go_back(modernbert_checkpoints,
                                                              tmp_path):
    """ModernBertForSequenceClassification with [CLS] and with mean pooling,
    ModernBertForMultipleChoice, and the token classifier and QA model, which run the
    prediction head (our pooler) on every token (random heads), read into our tasks, give
    their logits; written back, every tensor bit for bit, and transformers computes the same
    logits from what we wrote. The token-level tasks also take raw text (the directory's
    tokenizer.json)."""
    import shutil

    import torch
    import transformers
    from safetensors.numpy import load_file

    from keras_bert_suite import (
        BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTokenClassifier,
        save_huggingface)

    directory = modernbert_checkpoints["transformers5"]
    config = transformers.AutoConfig.from_pretrained(directory)
    inputs = packed(directory)
    real = inputs["padding_mask"].astype(bool)
    arguments = {"input_ids": torch.from_numpy(inputs["token_ids"].astype("int64")),
                 "attention_mask": torch.from_numpy(inputs["padding_mask"].astype("int64"))}
    cases = [("ForSequenceClassification", "cls", BertClassifier, {}),
             ("ForSequenceClassification", "mean", BertClassifier, {}),
             ("ForMultipleChoice", "mean", BertMultipleChoice, {"num_choices": 4}),
             ("ForTokenClassification", "mean", BertTokenClassifier, {}),
             ("ForQuestionAnswering", "cls", BertSpanLabeler, {})]
    for suffix, pooling, task_class, task_arguments in cases:
        per_token = suffix in ("ForTokenClassification", "ForQuestionAnswering")
        config.classifier_pooling = pooling
        config.num_labels = 2 if suffix == "ForQuestionAnswering" else 3
        torch.manual_seed(1)
        theirs = getattr(transformers, "ModernBert" + suffix)(config)
        theirs.model.load_state_dict(transformers.ModernBertModel.from_pretrained(
            directory).state_dict())
        theirs = theirs.eval()
        where = tmp_path / f"{suffix}_{pooling}"
        theirs.save_pretrained(where)
        ours = task_class.from_preset(str(where), preprocessor=None, **task_arguments)
        assert ModernBertOptions(**ours.encoder.block_options).classifier_pooling == pooling
        assert ours.encoder.pooler.trainable  # every head here reads through it
        run_inputs, run_arguments = inputs, arguments
        if suffix == "ForMultipleChoice":  # the batch's rows as one example's 4 choices
            run_inputs = {key: value[None] for key, value in inputs.items()}
            run_arguments = {key: value[None] for key, value in arguments.items()}
        with torch.no_grad():
            expected = _logits(theirs(**run_arguments))
        got = ours(run_inputs)
        got = (np.stack([to_numpy(got["start_logits"]), to_numpy(got["end_logits"])], -1)
               if isinstance(got, dict) else to_numpy(got))
        if per_token:  # padded rows: ours -1e9 (spans); transformers' see no key
            got, expected = got[real], expected[real]
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=atol_for(expected),
                                   err_msg=f"{suffix} {pooling}")
        back = save_huggingface(ours, str(tmp_path / f"ours_{suffix}_{pooling}"))
        original = load_file(os.path.join(where, "model.safetensors"))
        written = load_file(os.path.join(back, "model.safetensors"))
        assert sorted(written) == sorted(original)
        for name, value in original.items():
            np.testing.assert_array_equal(written[name], value, err_msg=f"{suffix} {name}")
        if per_token:
            # (config.json carries no special-token ids without a tokenizer: transformers'
            # defaults lie past this small vocabulary)
            again = getattr(transformers, "ModernBert" + suffix).from_pretrained(
                back, **{key: getattr(config, key) for key in SPECIAL_IDS}).eval()
            with torch.no_grad():
                np.testing.assert_array_equal(_logits(again(**run_arguments))[real], expected)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(directory, name), where)
            _check_raw_text(task_class.from_preset(str(where), sequence_length=24))


SPECIAL_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")


def _logits(output):
    """A transformers task output's logits, numpy; QA's start and end stacked last."""
    if getattr(output, "start_logits", None) is not None:
        return np.stack([output.start_logits.numpy(), output.end_logits.numpy()], -1)
    return output.logits.numpy()


def _check_raw_text(task):
    """The token-level task's text path: tags per word, answers inside their contexts."""
    if task.task_name == "token_classifier":
        outputs = task.predict(SENTENCES[:2], verbose=0)
        assert list(outputs["num_words"]) == [len(text.split()) for text in SENTENCES[:2]]
        return
    questions, contexts = ["Who passed the bill?"] * 2, SENTENCES[:2]
    answers = task.predict((questions, contexts), verbose=0)
    for index, context in enumerate(contexts):
        start, end = answers["start"][index], answers["end"][index]
        assert answers["answer"][index] == context[start:end]


def test_masked_lm_head_computes_transformers_logits_and_goes_back(modernbert_checkpoints,
                                                                   tmp_path):
    """ModernBertForMaskedLM (prediction head without biases, decoder tied to the token
    embeddings, with a bias) read into BertPretrainer: its logits at the masked positions;
    written back, every tensor bit for bit."""
    import torch
    import transformers
    from safetensors.numpy import load_file

    from keras_bert_suite import BertPretrainer, save_huggingface

    directory = modernbert_checkpoints["transformers5"]
    torch.manual_seed(2)
    theirs = transformers.ModernBertForMaskedLM(transformers.AutoConfig.from_pretrained(
        directory))
    theirs.model.load_state_dict(transformers.ModernBertModel.from_pretrained(
        directory).state_dict())
    with torch.no_grad():  # a head that is not the initial one
        for name, parameter in theirs.named_parameters():
            if name.startswith(("head.", "decoder.bias")):
                parameter.add_(torch.randn_like(parameter) * 0.2)
    theirs = theirs.eval()
    theirs.save_pretrained(tmp_path / "theirs")
    ours = BertPretrainer.from_preset(str(tmp_path / "theirs"))
    assert not ours.next_sentence_prediction

    inputs = packed(directory)
    positions = np.array([[1, 3, 5]] * len(SENTENCES), "int32")
    with torch.no_grad():
        expected = theirs(input_ids=torch.from_numpy(inputs["token_ids"].astype("int64")),
                          attention_mask=torch.from_numpy(
                              inputs["padding_mask"].astype("int64"))).logits.numpy()
    expected = np.take_along_axis(expected, positions[:, :, None], axis=1)
    got = to_numpy(ours({**inputs, "mask_positions": positions})["mlm_logits"])
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=atol_for(expected))

    back = save_huggingface(ours, str(tmp_path / "ours"))
    original = load_file(os.path.join(tmp_path / "theirs", "model.safetensors"))
    written = load_file(os.path.join(back, "model.safetensors"))
    assert sorted(written) == sorted(original)
    for name, value in original.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)


@pytest.mark.needs_savedmodel
def test_a_classifier_export_takes_raw_text(modernbert_checkpoints, tmp_path):
    """A ModernBertForSequenceClassification directory is a classifier on raw text: the
    export's graph (byte-level BPE packed [CLS] a [SEP], windowed local attention) computes
    the Keras model's logits on real sentences."""
    import tensorflow as tf
    import transformers

    from keras_bert_suite import BertClassifier
    from keras_bert_suite.export import export_saved_model

    directory = modernbert_checkpoints["transformers5"]
    config = transformers.AutoConfig.from_pretrained(directory)
    config.num_labels = 3
    theirs = transformers.ModernBertForSequenceClassification(config)
    theirs.model.load_state_dict(transformers.ModernBertModel.from_pretrained(
        directory).state_dict())
    theirs.save_pretrained(tmp_path / "checkpoint")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        tf.io.gfile.copy(os.path.join(directory, name), str(tmp_path / "checkpoint" / name))
    ours = BertClassifier.from_preset(str(tmp_path / "checkpoint"), sequence_length=24)
    exported = export_saved_model(ours, str(tmp_path / "exports"), name="modernbert",
                                  warmup=False)
    served = tf.saved_model.load(exported).signatures["serving_default"]
    np.testing.assert_allclose(served(tf.constant(SENTENCES))["logits"].numpy(),
                               ours.predict(SENTENCES, verbose=0), rtol=1e-4, atol=1e-5)
