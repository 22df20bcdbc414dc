"""ElectraPretrainer: its loss is the hand-computed MLM + 50 x RTD of its own outputs, the
"replaced" labels mark exactly the tokens that changed, the embeddings are one set of
variables, the discriminator goes out as transformers' ElectraForPreTraining with the same
logits, and the model passes the shared harness (every backend)."""

import numpy as np
import pytest

from keras_bert_suite import BertEncoder, ElectraPretrainer, ReplacedTokenDetector
from keras_bert_suite.tasks.pretrainer.electra_pretrainer import generator_sizes
from tests.conftest import to_numpy
from tests.harness import run_task_test
from tests.numerics import assert_close

VOCABULARY = 120
TINY = dict(vocabulary_size=VOCABULARY, num_layers=2, num_heads=4, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=32, embedding_dim=8, dropout=0.0,
            activation="gelu", pooler_activation="gelu")


def _batch():
    rng = np.random.default_rng(0)
    padding_mask = np.ones((3, 10), "int32")
    padding_mask[1, 7:] = 0
    x = {"token_ids": rng.integers(5, VOCABULARY, (3, 10)).astype("int32"),
         "segment_ids": np.zeros((3, 10), "int32"), "padding_mask": padding_mask,
         "mask_positions": np.array([[2, 5, 7], [1, 3, 0], [4, 6, 8]], "int32")}
    x["token_ids"][:, 0] = 2  # [CLS]
    y = {"mlm_labels": rng.integers(5, VOCABULARY, (3, 3)).astype("int32"),
         "mlm_weights": np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1]], "float32")}
    return x, y


@pytest.fixture(scope="module")
def electra():
    return ElectraPretrainer(BertEncoder(**TINY), generator_size=0.25, seed=3)


def _softmax_cross_entropy(logits, labels):
    logits = logits - logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(log_probs, labels[..., None], -1)[..., 0]


def test_the_loss_is_generator_mlm_plus_50_times_detection(electra):
    x, y = _batch()
    outputs = electra(x)
    logits, sampled = to_numpy(outputs["mlm_logits"]), to_numpy(outputs["sampled_ids"])
    rtd = to_numpy(outputs["rtd_logits"]).astype("float64")
    weights = y["mlm_weights"]
    generator = (_softmax_cross_entropy(logits.astype("float64"), y["mlm_labels"])
                 * weights).sum() / weights.sum()
    replaced = np.zeros(x["token_ids"].shape)
    for row, (positions, samples, labels, w) in enumerate(zip(
            x["mask_positions"], sampled, y["mlm_labels"], weights)):
        for position, sample, label, weight in zip(positions, samples, labels, w):
            if weight > 0 and sample != label:
                replaced[row, position] = 1.0
    binary = np.maximum(rtd, 0) - rtd * replaced + np.log1p(np.exp(-np.abs(rtd)))
    real = x["padding_mask"] > 0
    expected = generator + 50.0 * binary[real].mean()
    loss = to_numpy(electra.compute_loss(x, y, outputs))
    assert_close(float(loss), expected, rtol=1e-5, atol=1e-6)
    # The discriminator read the samples at the real slots, the originals elsewhere.
    corrupted = x["token_ids"].copy()
    for row, (positions, samples, w) in enumerate(zip(x["mask_positions"], sampled, weights)):
        corrupted[row, positions[w > 0]] = samples[w > 0]
    detector = electra.detector()
    assert_close(to_numpy(detector({**{k: x[k] for k in ("segment_ids", "padding_mask")},
                                    "token_ids": corrupted})), rtd, rtol=1e-5, atol=1e-5)


def test_replaced_means_a_different_token_at_a_real_slot(electra):
    x, y = _batch()
    sampled = y["mlm_labels"].copy()  # the generator reproduced every original ...
    sampled[0, 1] = (sampled[0, 1] + 1) % VOCABULARY  # ... but one
    sampled[1, 2] = 99  # a padded slot (position 0, weight 0): changes nothing
    replaced = to_numpy(electra.replaced_tokens(x, y, sampled))
    expected = np.zeros(x["token_ids"].shape)
    expected[0, x["mask_positions"][0, 1]] = 1.0
    np.testing.assert_array_equal(replaced, expected)


def test_generator_shares_the_embeddings_and_is_a_quarter_wide(electra):
    tables = [w for w in electra.weights if "token_embedding" in w.path]
    assert len(tables) == 1  # one table: the generator's decoder and both encoders read it
    hidden, heads, intermediate = generator_sizes(electra.encoder, 0.25)
    assert (hidden, heads, intermediate) == (4, 1, 8)
    assert electra.generator_parts.blocks[0].hidden_dim == 4


def test_bad_generator_size_is_refused():
    with pytest.raises(ValueError, match=r"generator_size is a fraction"):
        ElectraPretrainer(BertEncoder(**TINY), generator_size=1.5)


def test_electra_pretrainer_through_the_harness(tmp_path):
    x, y = _batch()
    run_task_test(ElectraPretrainer(BertEncoder(**TINY), seed=1), (x, y), tmp_path=tmp_path,
                  expected_output_shape={"mlm_logits": (3, 3, VOCABULARY), "rtd_logits": (3, 10),
                                         "sampled_ids": (3, 3)})


WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"word{i}" for i in range(VOCABULARY - 5)]


def _transformers_logits(class_name, path, x):
    """The logits of transformers' `class_name` read from `path` on batch `x` [B, T, ...]."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    theirs = getattr(transformers, class_name).from_pretrained(path).eval()
    with torch.no_grad():
        return theirs(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                      attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long)
                      ).logits.numpy()


@pytest.mark.real
def test_discriminator_goes_out_as_electra_for_pretraining(tmp_path, electra):
    from keras_bert_suite import save_huggingface

    x, _ = _batch()
    encoder_inputs = {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    path = save_huggingface(electra.detector(), tmp_path / "hf", vocabulary=WORDS)
    logits = _transformers_logits("ElectraForPreTraining", path, x)
    ours = to_numpy(electra.detector()(encoder_inputs))
    real = x["padding_mask"] > 0
    assert_close(ours[real], logits[real], rtol=1e-4, atol=1e-5)
    assert isinstance(ReplacedTokenDetector.from_preset(path), ReplacedTokenDetector)

    # On BERT's shape (tanh pooler, one width), as the CPU recipe pretrains it: the same
    # class, since ElectraForPreTraining has no pooler.
    bert_shaped = ElectraPretrainer(BertEncoder(**{**TINY, "embedding_dim": None,
                                                   "pooler_activation": "tanh"}), seed=2)
    path = save_huggingface(bert_shaped.detector(), tmp_path / "bert_shaped", vocabulary=WORDS)
    logits = _transformers_logits("ElectraForPreTraining", path, x)
    assert_close(to_numpy(bert_shaped.detector()(encoder_inputs))[real], logits[real],
                 rtol=1e-4, atol=1e-5)


@pytest.mark.real
def test_generator_goes_out_as_electra_for_masked_lm(tmp_path, electra):
    from keras_bert_suite import BertPretrainer, save_huggingface

    x, _ = _batch()
    generator = electra.generator()
    assert type(generator) is BertPretrainer and generator.encoder.hidden_dim == 4
    ours = to_numpy(generator(x)["mlm_logits"])
    assert_close(ours, to_numpy(electra(x)["mlm_logits"]), rtol=1e-5, atol=1e-6)  # a copy
    path = save_huggingface(generator, tmp_path / "generator", vocabulary=WORDS)
    logits = _transformers_logits("ElectraForMaskedLM", path, x)  # [B, T, V]
    at_positions = np.take_along_axis(logits, x["mask_positions"][..., None], axis=1)
    assert_close(ours, at_positions, rtol=1e-4, atol=1e-5)
