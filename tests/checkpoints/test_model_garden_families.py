"""TF Model Garden's factorised-embedding encoders, read from the checkpoints Model Garden's own
code writes: an AlbertEncoder converted by tf2_albert_encoder_checkpoint_converter (the TF2
ALBERT releases' layout, albert_config.json), and ELECTRA's discriminator (BertEncoder with
embedding_width) as Model Garden's ELECTRA pretraining saves it. Our encoder computes what
Model Garden's encoders compute on real sentences, on every backend; what cannot be read is
refused by name.

Small random models (hidden 32, embeddings 16, MiniLM's 30,522-token vocabulary so that real
sentences have ids), LayerNorm weights randomized too; built once per module (~10 s)."""

import glob
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.checkpoints import (
    CheckpointMismatchError, UnsupportedCheckpointError, load_checkpoint)
from tests.checkpoints.checkpoint_writers import run_model_garden_encoder, write_google_dir
from tests.families.conftest import family_inputs
from tests.numerics import assert_close

pytestmark = pytest.mark.real  # real sentences, through MiniLM's vocabulary
pytest.importorskip("official.nlp.modeling", reason="needs tf-models-official (the models extra)")

HIDDEN, EMBEDDING, HEADS, INTERMEDIATE = 32, 16, 4, 37  # 37: a transposed kernel cannot fit
# Google's ALBERT keys, as the TF2 ALBERT releases ship albert_config.json; "gelu" is the tanh
# approximation there.
ALBERT_CONFIG = {
    "vocab_size": 30522, "embedding_size": EMBEDDING, "hidden_size": HIDDEN,
    "num_hidden_layers": 3, "num_attention_heads": HEADS, "intermediate_size": INTERMEDIATE,
    "num_hidden_groups": 1, "inner_group_num": 1, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 40, "type_vocab_size": 2, "initializer_range": 0.02,
}
# The discriminator's architecture in bert_config.json keys; Model Garden's "gelu" (what its
# ELECTRA encoders compute) is the tanh approximation, which bert_config.json calls gelu_new.
ELECTRA_CONFIG = {**{key: ALBERT_CONFIG[key] for key in (
    "vocab_size", "embedding_size", "hidden_size", "num_attention_heads", "intermediate_size",
    "max_position_embeddings", "type_vocab_size", "initializer_range")},
    "num_hidden_layers": 2, "hidden_act": "gelu_new", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1}
# Two implementations in float32 (Model Garden's tf_keras and ours on each backend).
RTOL, ATOL = 1e-4, 1e-5


def _random(shape, name, rng):
    """Weights that keep activations O(1), so that GELU's curve and every LayerNorm count."""
    if name.endswith("gamma"):
        return 1.0 + 0.2 * rng.normal(size=shape)
    if name.endswith(("beta", "bias")):
        return 0.2 * rng.normal(size=shape)
    if name.endswith("embeddings") or len(shape) < 2:  # tables: each row is an input
        return rng.normal(size=shape)
    return rng.normal(size=shape) / np.sqrt(shape[0])  # kernels [in, ...]


def _albert_tf1_variables(config, seed=0):
    """Random weights under google-research/albert's names ([in, out] kernels)."""
    rng = np.random.default_rng(seed)
    v, e, h, i = (config[key] for key in (
        "vocab_size", "embedding_size", "hidden_size", "intermediate_size"))
    block = "bert/encoder/transformer/group_0/inner_group_0/"
    shapes = {
        "bert/embeddings/word_embeddings": (v, e),
        "bert/embeddings/position_embeddings": (config["max_position_embeddings"], e),
        "bert/embeddings/token_type_embeddings": (config["type_vocab_size"], e),
        "bert/embeddings/LayerNorm/gamma": (e,), "bert/embeddings/LayerNorm/beta": (e,),
        "bert/encoder/embedding_hidden_mapping_in/kernel": (e, h),
        "bert/encoder/embedding_hidden_mapping_in/bias": (h,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
    }
    for dense, (fan_in, fan_out) in {
            "attention_1/self/query": (h, h), "attention_1/self/key": (h, h),
            "attention_1/self/value": (h, h), "attention_1/output/dense": (h, h),
            "ffn_1/intermediate/dense": (h, i), "ffn_1/intermediate/output/dense": (i, h)}.items():
        shapes[f"{block}{dense}/kernel"] = (fan_in, fan_out)
        shapes[f"{block}{dense}/bias"] = (fan_out,)
    for norm in ("LayerNorm", "LayerNorm_1"):
        shapes[f"{block}{norm}/gamma"] = shapes[f"{block}{norm}/beta"] = (h,)
    return {name: _random(shape, name, rng).astype("float32") for name, shape in shapes.items()}


def _write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f)


@pytest.fixture(scope="module")
def inputs():
    return family_inputs("albert")  # sentence pairs: both families have segment embeddings


def _albert_converter():
    """Model Garden's tf2_albert_encoder_checkpoint_converter. At import it defines absl flags
    of the same names as tf2_bert_encoder_checkpoint_converter (which test_model_garden.py
    imports), which absl refuses twice: the BERT converter's are set aside while this one
    imports, and this one's dropped after, so both import in one process in either order."""
    import importlib

    from absl import flags

    name = "official.nlp.tools.tf2_albert_encoder_checkpoint_converter"
    if name in sys.modules:
        return sys.modules[name]
    bert = flags.FLAGS.get_flags_for_module(name.replace("albert", "bert"))
    for flag in bert:
        delattr(flags.FLAGS, flag.name)
    try:
        module = importlib.import_module(name)
    finally:
        for flag in flags.FLAGS.get_flags_for_module(name):
            delattr(flags.FLAGS, flag.name)  # only its main() reads them
        for flag in bert:
            flags.FLAGS[flag.name] = flag
    return module


def _write_albert_dir(directory, variables, pretrainer=False):
    """`variables` (google-research/albert's TF1 names) converted by Model Garden's
    tf2_albert_encoder_checkpoint_converter (an AlbertEncoder, or a BertPretrainerV2 with its
    masked-LM head) and renamed to bert_model.ckpt.* beside albert_config.json; returns the
    converter's config."""
    from official.legacy.albert import configs

    converter = _albert_converter()
    config_path = os.path.join(directory, "albert_config.json")
    _write_json(config_path, ALBERT_CONFIG)
    config = configs.AlbertConfig.from_json_file(config_path)
    with tempfile.TemporaryDirectory() as original:
        write_google_dir(original, ALBERT_CONFIG, variables)
        converter.convert_checkpoint(  # the converter's names: `model` for a pretrainer
            config, os.path.join(directory, "model"), os.path.join(original, "bert_model.ckpt"),
            "model" if pretrainer else "encoder",
            converted_model="pretrainer" if pretrainer else "encoder")
    os.remove(os.path.join(directory, "checkpoint"))
    for path in glob.glob(os.path.join(directory, "model-1.*")):
        os.rename(path, path.replace("model-1.", "bert_model.ckpt."))
    return config


@pytest.fixture(scope="module")
def albert(tmp_path_factory, inputs):
    """(directory, Model Garden's outputs): a random ALBERT through Model Garden's converter;
    the outputs are those of the AlbertEncoder that the converter builds, restored from it."""
    import tensorflow as tf

    directory = str(tmp_path_factory.mktemp("albert_garden"))
    config = _write_albert_dir(directory, _albert_tf1_variables(ALBERT_CONFIG))
    garden = _albert_converter()._create_albert_model(config)
    # assert_consumed: that checkpoint holds this encoder's variables and nothing else.
    tf.train.Checkpoint(encoder=garden).restore(
        os.path.join(directory, "bert_model.ckpt")).assert_consumed()
    return directory, run_model_garden_encoder(garden, inputs)


def _electra_encoder(hidden, embedding_layer=None):
    """An encoder as Model Garden's ELECTRA task builds it (encoders.build_encoder)."""
    from official.nlp.configs import encoders

    bert = encoders.BertEncoderConfig(
        vocab_size=ELECTRA_CONFIG["vocab_size"], hidden_size=hidden,
        num_layers=ELECTRA_CONFIG["num_hidden_layers"], num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE, max_position_embeddings=40,
        embedding_size=EMBEDDING)
    return encoders.build_encoder(encoders.EncoderConfig(type="bert", bert=bert),
                                  embedding_layer=embedding_layer)


@pytest.fixture(scope="module")
def electra(tmp_path_factory, inputs):
    """({"trainer": directory, "encoder": directory}, the discriminator's outputs): a random
    ElectraPretrainer (discriminator width 32, a generator of width 16 sharing its embeddings)
    saved as Model Garden's trainer saves a model with checkpoint_items (`model/...` and
    `encoder/` = the discriminator; `ckpt-1` + `checkpoint`), and the discriminator alone as
    tf.train.Checkpoint(encoder=...), each beside bert_config.json."""
    import tensorflow as tf
    from official.nlp.modeling import models

    discriminator = _electra_encoder(HIDDEN)
    generator = _electra_encoder(EMBEDDING, discriminator.get_embedding_layer())
    pretrainer = models.ElectraPretrainer(
        generator_network=generator, discriminator_network=discriminator,
        vocab_size=ELECTRA_CONFIG["vocab_size"], num_classes=2, num_token_predictions=4,
        mlm_activation="gelu", tie_embeddings=True)
    batch = {name: tf.zeros([1, 8], tf.int32)
             for name in ("input_word_ids", "input_mask", "input_type_ids")}
    pretrainer({**batch, "masked_lm_positions": tf.zeros([1, 4], tf.int32),
                "masked_lm_ids": tf.zeros([1, 4], tf.int32)})  # creates the heads' variables
    rng = np.random.default_rng(1)
    for variable in pretrainer.weights:
        name = variable.name.split(":")[0]
        variable.assign(_random(tuple(variable.shape), name, rng).astype("float32"))
    directories = {layout: str(tmp_path_factory.mktemp(f"electra_{layout}"))
                   for layout in ("trainer", "encoder")}
    tf.train.Checkpoint(model=pretrainer, **pretrainer.checkpoint_items).save(
        os.path.join(directories["trainer"], "ckpt"))
    tf.train.Checkpoint(encoder=discriminator).write(
        os.path.join(directories["encoder"], "bert_model.ckpt"))
    for directory in directories.values():
        _write_json(os.path.join(directory, "bert_config.json"), ELECTRA_CONFIG)
    return directories, run_model_garden_encoder(discriminator, inputs)


def _assert_computes(directory, expected, inputs):
    outputs = BertEncoder.from_preset(directory)(inputs)
    for name in ("sequence_output", "pooled_output"):
        assert_close(outputs[name], expected[name], rtol=RTOL, atol=ATOL, err_msg=name)


def test_albert_encoder_computes_what_model_garden_computes(albert, inputs):
    directory, expected = albert
    checkpoint = load_checkpoint(directory, load_weights=False)
    assert checkpoint.format == "model_garden"
    assert {key: checkpoint.config[key] for key in (
        "num_layers", "embedding_dim", "num_layer_groups", "layers_per_group", "activation",
        "pooler_activation")} == {
        "num_layers": 3, "embedding_dim": EMBEDDING, "num_layer_groups": 1,
        "layers_per_group": 1, "activation": "gelu_approximate", "pooler_activation": "tanh"}

    _assert_computes(directory, expected, inputs)


def test_albert_pretrainer_checkpoint_gives_the_masked_lm_head(tmp_path):
    variables = _albert_tf1_variables(ALBERT_CONFIG)
    rng, (h, e, v) = np.random.default_rng(2), (HIDDEN, EMBEDDING, ALBERT_CONFIG["vocab_size"])
    head = {"cls/predictions/transform/dense/kernel": (h, e),  # H -> E, ALBERT's width
            "cls/predictions/transform/dense/bias": (e,),
            "cls/predictions/transform/LayerNorm/gamma": (e,),
            "cls/predictions/transform/LayerNorm/beta": (e,), "cls/predictions/output_bias": (v,)}
    variables.update({name: _random(shape, name, rng).astype("float32")
                      for name, shape in head.items()})
    _write_albert_dir(str(tmp_path), variables, pretrainer=True)

    weights = load_checkpoint(tmp_path).weights

    ours = {"mlm/transform/kernel": "dense/kernel", "mlm/transform/bias": "dense/bias",
            "mlm/layer_norm/gamma": "LayerNorm/gamma", "mlm/layer_norm/beta": "LayerNorm/beta"}
    for name, original in ours.items():
        np.testing.assert_array_equal(weights[name], variables[
            f"cls/predictions/transform/{original}"], err_msg=name)
    np.testing.assert_array_equal(weights["mlm/output_bias"],
                                  variables["cls/predictions/output_bias"])
    # Shared with the head, the word embeddings are saved once, as masked_lm/embedding_table.
    np.testing.assert_array_equal(weights["embeddings/token_embedding"],
                                  variables["bert/embeddings/word_embeddings"])


@pytest.mark.parametrize("layout", ["trainer", "encoder"])
def test_electra_discriminator_computes_what_model_garden_computes(electra, inputs, layout):
    directories, expected = electra
    checkpoint = load_checkpoint(directories[layout])
    assert checkpoint.config["embedding_dim"] == EMBEDDING
    assert checkpoint.config["num_layer_groups"] is None  # a block per layer
    assert checkpoint.weights["embeddings/projection/kernel"].shape == (EMBEDDING, HIDDEN)
    # The trainer's masked-LM head is the generator's (width 16): not the encoder's to read.
    assert not any(name.startswith("mlm/") for name in checkpoint.weights)

    _assert_computes(directories[layout], expected, inputs)


def _copy(source, directory, config_name, config):
    """`source`'s checkpoint files with `config` as `config_name` (its own config dropped)."""
    os.makedirs(directory)
    for path in glob.glob(os.path.join(source, "*")):
        if not path.endswith(".json"):
            shutil.copy(path, directory)
    _write_json(os.path.join(directory, config_name), config)
    return str(directory)


@pytest.mark.parametrize("case", ["albert_as_bert", "no_embedding_size", "albert_groups"])
def test_unreadable_checkpoint_is_refused_by_name(albert, electra, tmp_path, case):
    albert_dir, electra_dir = albert[0], electra[0]["encoder"]
    if case == "albert_as_bert":  # one shared block read with BERT's config
        directory = _copy(albert_dir, tmp_path / case, "bert_config.json", ALBERT_CONFIG)
        error, expected = CheckpointMismatchError, [
            "has one transformer block (layer_with_weights-5)", "num_hidden_layers=3",
            "albert_config.json"]
    elif case == "no_embedding_size":  # the projection is in the checkpoint, not the config
        config = {key: value for key, value in ELECTRA_CONFIG.items() if key != "embedding_size"}
        directory = _copy(electra_dir, tmp_path / case, "bert_config.json", config)
        error, expected = CheckpointMismatchError, [
            "embedding projection 'encoder/layer_with_weights-4/kernel", "(16, 32)",
            'add "embedding_size": 16', "bert_config.json"]
    else:  # groups of blocks: ALBERT's original code has them, Model Garden's encoder not
        directory = _copy(albert_dir, tmp_path / case, "albert_config.json",
                          {**ALBERT_CONFIG, "num_hidden_groups": 3})
        error, expected = UnsupportedCheckpointError, [
            "albert_config.json: num_hidden_groups=3", "one transformer block shared"]

    with pytest.raises(error) as raised:
        BertEncoder.from_preset(directory)

    for part in expected:
        assert part in str(raised.value)
