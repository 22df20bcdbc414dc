"""`kbs embed`: sentence and token vectors of a text file, with the real MiniLM weights."""

import json

import numpy as np
import pytest

from keras_bert_suite import cli
from keras_bert_suite.tasks.feature_extractor.embed import embed_file
from tests.numerics import assert_close

# The model math is tested on every backend in tests/models and tests/tasks; this is file plumbing.
pytestmark = pytest.mark.real

SENTENCES = [
    "The economy grew faster than anyone expected this year.",
    "Economic growth this year beat every forecast.",
    "Our soldiers are serving bravely overseas.",
]


def test_sentence_vectors_match_the_feature_extractor(tmp_path):
    from keras_bert_suite import BertFeatureExtractor

    source = tmp_path / "lines.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    output = tmp_path / "vectors.npy"
    cli.main(["embed", str(source), "--output", str(output), "--sequence_length", "32"])
    vectors = np.load(output)
    assert vectors.shape == (3, 384)
    assert_close(np.linalg.norm(vectors, axis=1), 1.0)
    extractor = BertFeatureExtractor.from_preset(
        "minilm_l6_h384_uncased", pooling="mean", normalize=True, sequence_length=32)
    expected = np.asarray(extractor.predict(SENTENCES, verbose=0)["sentence_embedding"])
    assert_close(vectors, expected)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.3  # the paraphrase is the nearest line


def test_token_vectors_in_json_lines(tmp_path):
    from keras_bert_suite import BertTokenizer

    source = tmp_path / "lines.jsonl"
    source.write_text("".join(json.dumps({"text": s}) + "\n" for s in SENTENCES[:2]))
    output = tmp_path / "tokens.jsonl"
    assert embed_file(str(source), str(output), tokens=True, sequence_length=32) == 2
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    tokenizer = BertTokenizer.from_preset("minilm_l6_h384_uncased")
    for row, text in zip(rows, SENTENCES):
        pieces = [tokenizer.id_to_token(i) for i in tokenizer.encode_batch([text])[0]]
        assert row["text"] == text
        assert row["tokens"] == ["[CLS]", *pieces, "[SEP]"]
        assert np.asarray(row["token_embeddings"]).shape == (len(pieces) + 2, 384)


def test_bad_input_is_refused_with_the_line(tmp_path):
    source = tmp_path / "lines.txt"
    source.write_text("short line\n" + "word " * 40 + "\n")
    with pytest.raises(ValueError, match=r"lines.txt:2: 40 WordPieces do not fit sequence length 16"):
        embed_file(str(source), str(tmp_path / "v.npy"), sequence_length=16)
    with pytest.raises(ValueError, match=r"must end in .npy or .jsonl"):
        embed_file(str(source), str(tmp_path / "v.csv"))
    with pytest.raises(ValueError, match=r"Token vectors .* \.jsonl"):
        embed_file(str(source), str(tmp_path / "v.npy"), tokens=True)
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "fine"}\n{"title": "no text"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: expected a JSON object"):
        embed_file(str(bad_json), str(tmp_path / "v.npy"))
