"""The `kbs` command line and the demo's search pipeline."""

import json
import os

import numpy as np
import pytest

from keras_bert_suite import cli, demo
from keras_bert_suite.presets import PRESETS
from tests.numerics import assert_close


def test_presets_lists_every_builtin(capsys):
    cli.main(["presets"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(PRESETS)
    assert any(line.startswith("minilm_l6_h384_uncased ") and "real pretrained" in line
               for line in lines)


@pytest.mark.needs_tf_graph  # the tokenizer's tf-text ops
def test_tokenize_prints_exact_wordpieces(capsys):
    cli.main(["tokenize", "Unaffable héros!"])
    row = json.loads(capsys.readouterr().out)
    assert row["tokens"] == ["una", "##ffa", "##ble", "hero", "##s", "!"]
    assert row["token_ids"] == [14477, 20961, 3468, 5394, 2015, 999]


@pytest.mark.real
@pytest.mark.slow
def test_convert_writes_a_preset_that_reproduces_the_checkpoint(tmp_path, minilm_dir):
    from keras_bert_suite import BertEncoder

    cli.main(["convert", minilm_dir, str(tmp_path / "minilm")])
    ids = np.array([[101, 7592, 2088, 102]], "int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}
    original = BertEncoder.from_preset(minilm_dir).predict_on_batch(inputs)
    converted = BertEncoder.from_preset(str(tmp_path / "minilm")).predict_on_batch(inputs)
    np.testing.assert_array_equal(np.asarray(converted["sequence_output"]),
                                  np.asarray(original["sequence_output"]))
    assert (tmp_path / "minilm" / "vocab.txt").read_text().splitlines()[101] == "[CLS]"


@pytest.mark.real
@pytest.mark.slow
def test_demo_search_finds_paraphrased_sentences(sotu_files):
    """Lower-cased, punctuation-free copies of corpus sentences retrieve their originals."""
    from keras_bert_suite import BertEncoder, BertPreprocessor

    encoder = BertEncoder.from_preset(demo.PRESET)
    preprocessor = BertPreprocessor.from_preset(demo.PRESET, sequence_length=64)
    corpus = [text for text, _ in demo.sotu_sentences(120)]  # 40 of them paraphrased
    vectors = demo.mean_pooled_embeddings(encoder, preprocessor, corpus, progress=False)
    assert_close(np.linalg.norm(vectors, axis=1), 1.0)
    queries = ["".join(c for c in text.lower() if c.isalnum() or c == " ") for text in corpus[:40]]
    query_vectors = demo.mean_pooled_embeddings(encoder, preprocessor, queries, progress=False)
    top1 = np.argmax(query_vectors @ vectors.T, axis=1)
    print("paraphrases retrieving their sentence:", np.mean(top1 == np.arange(40)))
    assert np.mean(top1 == np.arange(40)) >= 0.95


def test_export_refuses_contradicting_precision_flags_and_missing_calibration_file(
        tmp_path, capsys):
    model_file = tmp_path / "model.keras"
    model_file.write_bytes(b"")  # never loaded: the flags are checked first
    for extra, message in (
            (["--quantize", "int8", "--precision", "bfloat16"],
             "--quantize int8 and --precision bfloat16 contradict each other"),
            (["--quantize", "int8", "--calibration_data", str(tmp_path / "texts.txt")],
             "--calibration_data is for --quantize int8_vnni, not int8"),
            (["--quantize", "int8_vnni", "--calibration_data", str(tmp_path / "missing.txt")],
             "missing.txt does not exist (expected a text file with one text per line)")):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["export", str(model_file), "--name", "m", "--base_dir", str(tmp_path),
                      *extra])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["model.keras"]


def test_demo_reports_the_bucket_saving_from_the_bench_file(tmp_path, capsys):
    # The layout bench/bucketed_finetuning.py writes; the figures of its 2026-11-28 run.
    path = tmp_path / "bucketed_finetuning.json"
    path.write_text(json.dumps({"date": "2026-11-28", "max_train": None, "results": [
        {"contestant": "ours tensorflow fixed", "train_seconds": 207.4, "accuracy": 0.803},
        {"contestant": "ours tensorflow bucketed", "train_seconds": 108.5, "accuracy": 0.8085},
        {"contestant": "transformers Trainer (torch)", "train_seconds": 126.9, "accuracy": 0.8155},
        {"contestant": "ours jax bucketed", "train_seconds": 142.6, "accuracy": 0.8055},
        {"contestant": "ours jax fixed", "train_seconds": 263.0, "accuracy": 0.806}]}))
    ratios = demo.last_bucket_bench(str(path))
    assert {backend: round(ratio, 3) for backend, (ratio, _) in ratios.items()} == {
        "tensorflow": 0.523, "jax": 0.542}
    demo.report_bucket_saving(str(path))
    assert "(2026-11-28): tensorflow 0.52x, jax 0.54x" in capsys.readouterr().out
    assert demo.last_bucket_bench(str(tmp_path / "missing.json")) == {}
