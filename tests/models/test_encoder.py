"""BertEncoder behaviour on the current Keras backend (tiny configurations)."""

import keras
import numpy as np
import pytest

from keras_bert_suite import BertEncoder
from keras_bert_suite.layers import BertSelfAttention
from keras_bert_suite.presets import PRESETS
from tests.conftest import to_numpy
from tests.numerics import assert_close

TINY = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=16)


def _inputs(batch=3, length=7, seed=0):
    rng = np.random.default_rng(seed)
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 4:] = 0
    padding_mask[2, 2:] = 0
    return {"token_ids": rng.integers(1, 50, (batch, length)).astype("int32"),
            "segment_ids": (np.arange(length)[None, :] >= 3).astype("int32").repeat(batch, 0),
            "padding_mask": padding_mask}


def test_output_shapes_and_hidden_states():
    encoder = BertEncoder(**TINY, return_hidden_states=True)
    outputs = encoder(_inputs())
    assert tuple(outputs["sequence_output"].shape) == (3, 7, 8)
    assert tuple(outputs["pooled_output"].shape) == (3, 8)
    hidden_states = to_numpy(outputs["hidden_states"])
    assert hidden_states.shape == (3, TINY["num_layers"] + 1, 7, 8)
    np.testing.assert_array_equal(hidden_states[:, -1], to_numpy(outputs["sequence_output"]))
    # The embedding output is LayerNorm-ed: zero mean and unit variance on every position
    # (values of unit scale, so an atol of 1e-5 is ~100 float32 roundoffs of them).
    assert_close(hidden_states[:, 0].mean(-1), 0.0, atol=1e-5)
    assert_close(hidden_states[:, 0].var(-1), 1.0, rtol=1e-4)


def test_padding_does_not_change_real_positions():
    encoder = BertEncoder(**TINY)
    inputs = _inputs()
    other = {k: v.copy() for k, v in inputs.items()}
    other["token_ids"][1, 4:] = 3  # only padded positions change
    other["token_ids"][2, 2:] = 9
    first = to_numpy(encoder(inputs)["sequence_output"])
    second = to_numpy(encoder(other)["sequence_output"])
    assert_close(first[1, :4], second[1, :4])
    assert_close(first[2, :2], second[2, :2])
    assert not np.allclose(first[1, 4:], second[1, 4:])


def test_dropout_only_in_training():
    encoder = BertEncoder(**TINY, dropout=0.3)
    inputs = _inputs()
    inference = [to_numpy(encoder(inputs, training=False)["sequence_output"]) for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])
    training = to_numpy(encoder(inputs, training=True)["sequence_output"])
    assert np.abs(training - inference[0]).max() > 1e-3


def test_explicit_attention_path_matches_fused_kernel():
    """The training path (explicit softmax, for attention dropout) computes the same attention."""
    layer = BertSelfAttention(num_heads=2, hidden_dim=8, dropout=0.1)
    rng = np.random.default_rng(1)
    query, key, value = (rng.normal(size=(2, 5, 2, 4)).astype("float32") for _ in range(3))
    mask = np.ones((2, 1, 1, 5), bool)
    mask[1, ..., 3:] = False
    fused = keras.ops.dot_product_attention(query, key, value, mask=mask)
    explicit = layer._attend_with_dropout(query, key, value, mask, training=False)
    assert_close(explicit, fused)


@pytest.mark.parametrize("num_layers", [2, 0])
def test_encode_at_equals_the_full_output_at_those_positions(num_layers):
    """The pretrainer's last layer runs on [CLS] + the masked rows only: same numbers."""
    encoder = BertEncoder(**{**TINY, "num_layers": num_layers})
    inputs = _inputs()
    positions = np.array([[1, 5, 0], [3, 2, 2], [1, 0, 0]], "int32")  # repeats = padding slots
    full = encoder(inputs)
    expected = np.take_along_axis(to_numpy(full["sequence_output"]), positions[..., None], 1)
    at = encoder.encode_at(inputs, positions)
    assert tuple(at["gathered_output"].shape) == (3, 3, 8)
    assert_close(at["gathered_output"], expected)
    assert_close(at["pooled_output"], full["pooled_output"])


def test_variable_paths_and_the_per_head_qkv_shape():
    """Paths are what checkpoints and layout maps name; the qkv kernel keeps heads apart."""
    encoder = BertEncoder(**{**TINY, "num_layers": 1})
    shapes = {variable.path: tuple(variable.shape) for variable in encoder.weights}
    block = "transformer_layer_0"
    assert list(shapes) == [
        "embeddings/position_embedding", "embeddings/token_embedding/embeddings",
        "embeddings/segment_embedding/embeddings", "embeddings/layer_norm/gamma",
        "embeddings/layer_norm/beta", f"{block}/attention/qkv/kernel",
        f"{block}/attention/qkv/bias", f"{block}/attention/output/kernel",
        f"{block}/attention/output/bias", f"{block}/attention_layer_norm/gamma",
        f"{block}/attention_layer_norm/beta", f"{block}/intermediate/kernel",
        f"{block}/intermediate/bias", f"{block}/output/kernel", f"{block}/output/bias",
        f"{block}/output_layer_norm/gamma", f"{block}/output_layer_norm/beta",
        "pooler/kernel", "pooler/bias"]
    assert shapes[f"{block}/attention/qkv/kernel"] == (8, 3, 2, 4)  # [H, 3, N, Dh]
    assert shapes[f"{block}/attention/qkv/bias"] == (3, 2, 4)


def test_weights_files_with_the_earlier_flat_qkv_kernel_still_load(tmp_path):
    """Files written while the qkv kernel was [H, 3H] (bias [3H]) load reshaped."""
    h5py = pytest.importorskip("h5py")
    encoder = BertEncoder(**TINY)
    path = str(tmp_path / "encoder.weights.h5")
    encoder.save_weights(path)
    flattened = []
    with h5py.File(path, "r+") as h5:
        qkv = [name for name, node in _h5_datasets(h5) if "/qkv/vars/" in name]
        for name in qkv:  # rewrite them as the [H, 3H] Dense wrote them
            value = h5[name][()]
            del h5[name]
            h5[name] = value.reshape(8, 24) if value.ndim == 4 else value.reshape(24)
            flattened.append(h5[name].shape)
    assert sorted(flattened) == [(8, 24), (8, 24), (24,), (24,)]
    restored = BertEncoder(**TINY)
    restored.load_weights(path)
    inputs = _inputs()
    np.testing.assert_array_equal(to_numpy(restored(inputs)["sequence_output"]),
                                  to_numpy(encoder(inputs)["sequence_output"]))


def _h5_datasets(group, prefix=""):
    for key, node in group.items():
        if hasattr(node, "items"):
            yield from _h5_datasets(node, f"{prefix}{key}/")
        else:
            yield f"{prefix}{key}", node


def test_explicit_attention_path_with_fewer_queries():
    layer = BertSelfAttention(num_heads=2, hidden_dim=8, dropout=0.1)
    rng = np.random.default_rng(2)
    query = rng.normal(size=(2, 3, 2, 4)).astype("float32")
    key, value = (rng.normal(size=(2, 5, 2, 4)).astype("float32") for _ in range(2))
    mask = np.ones((2, 1, 1, 5), bool)
    mask[0, ..., 4:] = False
    fused = keras.ops.dot_product_attention(query, key, value, mask=mask)
    explicit = layer._attend_with_dropout(query, key, value, mask, training=False)
    assert_close(explicit, fused)


def test_keras_round_trip(tmp_path):
    encoder = BertEncoder(**TINY, return_hidden_states=True)
    inputs = _inputs()
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertEncoder)
    assert restored.get_config() == encoder.get_config()
    got, expected = restored(inputs), encoder(inputs)
    for name in ("sequence_output", "pooled_output", "hidden_states"):
        np.testing.assert_array_equal(to_numpy(got[name]), to_numpy(expected[name]))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_close_to_float32(policy):
    reference = BertEncoder(**TINY)
    mixed = BertEncoder(**TINY, dtype=policy)
    mixed.set_weights(reference.get_weights())
    assert all(w.dtype == "float32" for w in mixed.weights)  # variables stay float32
    inputs = _inputs()
    expected = to_numpy(reference(inputs)["sequence_output"])
    actual = mixed(inputs)["sequence_output"]
    assert keras.backend.standardize_dtype(actual.dtype) == policy.split("_")[1]
    assert mixed.get_config()["dtype"]["config"]["name"] == policy  # survives a .keras reload
    # In units of the compute dtype's machine epsilon: outputs (unit scale after LayerNorm)
    # were measured up to ~3 epsilons off float32 on all three backends.
    epsilon = {"mixed_bfloat16": 2.0**-7, "mixed_float16": 2.0**-10}[policy]
    assert_close(keras.ops.cast(actual, "float32"), expected, rtol=6 * epsilon, atol=6 * epsilon)


def test_fit_learns():
    """The encoder trains with model.fit: a tiny classifier overfits a small batch."""
    encoder = BertEncoder(**TINY, dropout=0.0)
    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
              for name in ("token_ids", "segment_ids", "padding_mask")}
    logits = keras.layers.Dense(2)(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = _inputs(batch=8, seed=3)
    labels = np.array([0, 1] * 4)
    history = model.fit(data, labels, epochs=30, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < 0.1 < history.history["loss"][0]


def test_small_bert_presets_follow_the_published_grid():
    small = [p for name, p in PRESETS.items() if name.startswith("bert_uncased_L-")]
    assert len(small) == 24
    for preset in small:
        config = preset.config
        assert config["num_heads"] == config["hidden_dim"] // 64
        assert config["intermediate_dim"] == 4 * config["hidden_dim"]
    assert PRESETS["bert_base_uncased"].config["num_layers"] == 12
    assert PRESETS["bert_large_cased"].config["vocabulary_size"] == 28996


@pytest.mark.parametrize("preset", ["bert_tiny_uncased", "bert_uncased_L-4_H-256_A-4"])
def test_parameter_count_matches_transformers(preset):
    transformers = pytest.importorskip("transformers")
    config = PRESETS[preset].config
    reference = transformers.BertConfig(
        vocab_size=config["vocabulary_size"], num_hidden_layers=config["num_layers"],
        num_attention_heads=config["num_heads"], hidden_size=config["hidden_dim"],
        intermediate_size=config["intermediate_dim"])
    expected = transformers.BertModel(reference).num_parameters()
    assert BertEncoder.from_preset(preset).count_params() == expected


def test_bad_config_gives_clear_error():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        BertEncoder(**{**TINY, "num_heads": 3})
