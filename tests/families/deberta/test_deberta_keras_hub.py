"""DeBERTa-v3 to KerasHub and back: a classifier of our DeBERTa (read from transformers' files,
with its SentencePiece tokenizer) written with save_keras_hub is a DebertaV3TextClassifier
preset that KerasHub loads and computes our logits with (its tokenizer our ids), and that we
read back bit for bit. What it checks is file names and the tokenizers' TensorFlow graph
code, which no Keras backend changes (the block's math is checked per backend against
transformers): it runs once."""

import numpy as np
import pytest

from keras_bert_suite import BertClassifier, BertEncoder, save_keras_hub
from keras_bert_suite.text.tokenizer_files import tokenizer_from_preset
from tests.conftest import to_numpy
from tests.families.deberta.conftest import padded_inputs
from tests.families.deberta.test_deberta_encoder import SENTENCES
from tests.numerics import assert_close

keras_hub = pytest.importorskip("keras_hub")

# The same math in two implementations (KerasHub splits query / key / value): float32
# rounding only (measured 4.8e-7 of the largest value); a wrong weight or bucket moves
# outputs by 1e-2 or more.
RTOL, ATOL = 1e-4, 1e-5


@pytest.mark.real
@pytest.mark.needs_tf_graph
def test_ours_to_keras_hub_and_back(deberta_dir, tmp_path):
    import transformers

    from keras_bert_suite.text import BertPreprocessor

    # KerasHub's buckets reach max_sequence_length (16 here, as the buckets of the fixture;
    # without position rows the length changes no weight).
    encoder = BertEncoder.from_preset(deberta_dir, dropout=0.0, max_sequence_length=16)
    rng = np.random.default_rng(0)
    pooler = encoder.weight_map()
    for name in ("pooler/kernel", "pooler/bias"):  # the base model has none: random, not 0
        pooler[name].assign(rng.normal(0, 0.2, tuple(pooler[name].shape)).astype("float32"))
    preprocessor = BertPreprocessor(tokenizer_from_preset(deberta_dir), sequence_length=24)
    ours = BertClassifier(encoder, num_classes=3, dropout=0.0, preprocessor=preprocessor)
    path = save_keras_hub(ours, str(tmp_path / "hub"))

    inputs = padded_inputs(transformers.AutoTokenizer.from_pretrained(deberta_dir),
                           SENTENCES, 24)
    theirs = keras_hub.models.DebertaV3TextClassifier.from_preset(path, preprocessor=None)
    got = theirs({"token_ids": inputs["token_ids"], "padding_mask": inputs["padding_mask"]})
    assert_close(to_numpy(got), to_numpy(ours(inputs)), RTOL, ATOL)
    texts = ["The senate passed the bill after a long debate.", "Hello world"]
    hub_tokenizer = keras_hub.models.DebertaV3Tokenizer.from_preset(path)
    hub_ids = hub_tokenizer(texts)  # ragged: a tf.RaggedTensor or a list of rows
    hub_ids = hub_ids.to_list() if hasattr(hub_ids, "to_list") else [
        np.asarray(row).tolist() for row in hub_ids]
    assert hub_ids == preprocessor.tokenizer.encode_batch(texts)

    back = BertClassifier.from_preset(path, preprocessor=None)
    assert back.encoder.get_config() == {**encoder.get_config(), "name": back.encoder.name}
    expected = {name: to_numpy(value) for name, value in encoder.weight_map().items()}
    for name, value in back.encoder.weight_map().items():
        np.testing.assert_array_equal(to_numpy(value), expected[name], err_msg=name)
    for variable in ("kernel", "bias"):
        np.testing.assert_array_equal(to_numpy(getattr(back.classifier_head, variable)),
                                      to_numpy(getattr(ours.classifier_head, variable)))
