"""`kbs create-pretraining-data` (Apache Beam) on real State of the Union text: the records are
the in-memory algorithm's per bucket, the statistics account for every document, the output
does not depend on the number of workers, Model Garden's loader reads it, bad input is
counted or refused."""

import json
import random

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_suite.tasks.pretrainer.data import corpus_buckets
from keras_bert_suite.tasks.pretrainer.data import instances as instance_lib
from keras_bert_suite.tasks.pretrainer.data.pipeline import create_pretraining_data
from keras_bert_suite.tasks.pretrainer.data.documents import read_documents
from keras_bert_suite.tasks.pretrainer.data.tfrecords import read_pretraining_tfrecords

# Beam, TFRecords and tf.data: no Keras op runs, so the records cannot depend on the Keras
# backend and the pipeline runs once (marker needs_tf_graph, see tests/conftest.py).
pytestmark = [pytest.mark.real, pytest.mark.needs_tf_graph]

SETTINGS = dict(layout="paragraph_per_line", dupe_factor=2, sequence_length=64,
                max_predictions_per_seq=10, log=lambda *_: None)


def _records(pattern):
    return {path.rsplit("/", 1)[-1]: [r.numpy() for r in tf.data.TFRecordDataset(path)]
            for path in sorted(tf.io.gfile.glob(pattern))}


def _features(pattern, sequence_length=64, predictions=10):
    rows = list(read_pretraining_tfrecords(pattern, sequence_length, predictions, shuffle=False)
                .as_numpy_iterator())
    return rows


@pytest.fixture(scope="module")
def twelve_files(sotu_files):
    return sotu_files[::19][:12]


@pytest.fixture(scope="module")
def pipeline_output(tmp_path_factory, twelve_files):
    """12 addresses (0.6 MB), buckets of 250 kB: three groups, 20% held out."""
    output = str(tmp_path_factory.mktemp("pretraining_data"))
    statistics = create_pretraining_data(twelve_files, output, eval_fraction=0.2,
                                         bucket_bytes=250_000, num_workers=1, **SETTINGS)
    return output, statistics


def test_statistics_account_for_every_document_and_match_the_records(pipeline_output):
    output, statistics = pipeline_output
    assert statistics["documents_read"] == 12
    assert (statistics["train_documents"] + statistics["eval_documents"]
            + statistics["documents_skipped"]) == 12
    assert statistics["eval_documents"] >= 2 and statistics["train_documents"] >= 6
    # Real addresses are never empty; a skip here is a held-out draw leaving a group with one
    # training document, which has no random-next partner.
    assert statistics["documents_skipped"] == statistics.get("skipped_alone_in_bucket", 0)
    train, evaluation = _features(f"{output}/train-*"), _features(f"{output}/eval-*")
    assert len(train) == statistics["train_instances"]
    assert len(evaluation) == statistics["eval_instances"]
    rows = train + evaluation
    real_tokens = sum(int(row["padding_mask"].sum()) for row in rows)
    assert real_tokens == statistics["instance_tokens"]
    assert sum(int(row["mlm_weights"].sum()) for row in rows) == statistics["masked_positions"]
    assert sum(int(row["nsp_labels"]) for row in rows) == statistics["random_next"]
    # 15% masked; at least half the pairs random-next (all of them when a chunk holds one
    # sentence, often with these long 18th-century sentences at 64 tokens).
    np.testing.assert_allclose(statistics["masked_rate"], 0.15, rtol=0.05)
    assert statistics["random_next_rate"] >= 0.5
    with open(f"{output}/statistics.json") as f:
        assert json.load(f)["settings"]["dupe_factor"] == 2


def test_random_next_rate_is_the_in_memory_originals(tmp_path, twelve_files,
                                                     uncased_tokenizer):
    """Partners drawn within buckets leave NSP's label balance as the whole-corpus algorithm
    has it on the same documents."""
    statistics = create_pretraining_data(twelve_files, str(tmp_path), bucket_bytes=250_000,
                                         num_workers=1, **SETTINGS)
    assert statistics["train_documents"] == 12
    whole = instance_lib.create_pretraining_instances(
        read_documents(twelve_files, "paragraph_per_line"), uncased_tokenizer,
        sequence_length=64, dupe_factor=2, max_predictions_per_seq=10)
    rate = sum(i.is_random_next for i in whole) / len(whole)
    # ~4,000 instances whose labels are drawn per chunk with document-level target lengths: a
    # rate moves by a few percent with the seed alone.
    np.testing.assert_allclose(statistics["random_next_rate"], rate, rtol=0.1)
    np.testing.assert_allclose(statistics["instances"], len(whole), rtol=0.05)


def test_a_shard_is_the_in_memory_algorithm_on_its_bucket(pipeline_output, twelve_files,
                                                          uncased_tokenizer):
    """The first group's first bucket, made again with the library's in-memory functions and
    the bucket's seed: the same records in the same order."""
    output, _ = pipeline_output
    settings = corpus_buckets.PretrainingDataSettings(
        vocabulary=tuple(uncased_tokenizer.get_vocabulary()), layout="paragraph_per_line",
        dupe_factor=2, sequence_length=64, max_predictions_per_seq=10, eval_fraction=0.2,
        bucket_bytes=250_000)
    writer = corpus_buckets.BucketWriter(settings, output)
    groups = corpus_buckets.plan_groups(
        [(path, tf.io.gfile.stat(path).length) for path in twelve_files], 250_000)
    statistics = corpus_buckets.new_statistics()
    split, key, documents = next(
        item for item in writer.group_documents(*groups[0], statistics) if item[0] == "train")
    assert (split, key) == ("train", 0)
    tokenized = instance_lib.tokenize_documents(documents, uncased_tokenizer)
    rng = random.Random(f"{settings.seed}\x1f{('train', 0, 0)}")
    expected = [corpus_buckets.serialize(instance, settings)
                for instance in instance_lib.instances_from_token_documents(
                    tokenized, rng, writer.config, 64, 2, 0.1, "nsp", True)]
    rng.shuffle(expected)
    assert _records(f"{output}/train-00000-0000.tfrecord")["train-00000-0000.tfrecord"] == expected


def test_random_next_segments_come_from_another_document_of_the_bucket(pipeline_output,
                                                                       twelve_files,
                                                                       uncased_tokenizer):
    output, _ = pipeline_output
    groups = corpus_buckets.plan_groups(
        [(path, tf.io.gfile.stat(path).length) for path in twelve_files], 250_000)
    group_files = groups[0][1]
    documents = [",".join(map(str, (t for s in d for t in s))) for d in
                 instance_lib.tokenize_documents(
                     read_documents(group_files, "paragraph_per_line"), uncased_tokenizer)]
    checked = 0
    for row in _features(f"{output}/train-00000-*", 64, 10)[:300]:
        if not row["nsp_labels"]:
            continue
        ids = row["token_ids"].copy()
        real = row["mlm_weights"] > 0
        ids[row["mask_positions"][real]] = row["mlm_labels"][real]  # unmask
        length = int(row["padding_mask"].sum())
        sep = [i for i in range(length) if ids[i] == uncased_tokenizer.sep_token_id]
        a, b = ids[1:sep[0]], ids[sep[0] + 1:sep[1]]
        home = [i for i, d in enumerate(documents) if ",".join(map(str, a)) in d]
        source = [i for i, d in enumerate(documents) if ",".join(map(str, b)) in d]
        assert home and source, "each segment is contiguous text of a document of the bucket"
        assert set(source) - set(home), "segment B comes from another document"
        checked += 1
    assert checked > 50


def test_the_same_records_with_one_or_two_workers(pipeline_output, tmp_path, twelve_files):
    one, two = pipeline_output[0], str(tmp_path / "two")  # the fixture's run had one worker
    create_pretraining_data(twelve_files, two, bucket_bytes=250_000, num_workers=2,
                            eval_fraction=0.2, **SETTINGS)
    first, second = _records(f"{one}/*.tfrecord"), _records(f"{two}/*.tfrecord")
    assert len(first) >= 3 and first.keys() == second.keys()  # groups' shards + eval
    assert first == second


def test_beam_pipeline_statistics_with_beams_testing_utilities(tmp_path, twelve_files,
                                                               uncased_tokenizer):
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that

    from keras_bert_suite.tasks.pretrainer.data.beam_transforms import build_pipeline

    settings = corpus_buckets.PretrainingDataSettings(
        vocabulary=tuple(uncased_tokenizer.get_vocabulary()), layout="paragraph_per_line",
        dupe_factor=1, sequence_length=64, max_predictions_per_seq=10,
        instance_format="contiguous", bucket_bytes=200_000)
    sizes = [(path, tf.io.gfile.stat(path).length) for path in twelve_files[:6]]
    groups = corpus_buckets.plan_groups(sizes, settings.bucket_bytes)

    def check(outputs):
        (statistics,) = outputs
        assert statistics["documents_read"] == statistics["train_documents"] == 6
        assert statistics["shards"] == len(groups)
        assert statistics["random_next"] == 0  # no NSP: contiguous text only
        # Without NSP the text is cut into pieces of the target length: every corpus token
        # is in exactly one instance, plus [CLS] and [SEP] around each.
        assert (statistics["instance_tokens"]
                == statistics["corpus_tokens"] + 2 * statistics["train_instances"])

    with TestPipeline() as pipeline:
        assert_that(build_pipeline(pipeline, groups, settings, str(tmp_path)), check)
    assert len(_features(f"{tmp_path}/train-*")) > 0


def test_model_garden_loader_reads_the_records_unchanged(pipeline_output):
    from official.nlp.data import pretrain_dataloader

    output, statistics = pipeline_output
    config = pretrain_dataloader.BertPretrainDataConfig(
        input_path=f"{output}/train-00000-0000.tfrecord", global_batch_size=16,
        is_training=False, seq_length=64, max_predictions_per_seq=10,
        use_next_sentence_label=True)
    batch = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
    ours = _features(f"{output}/train-00000-0000.tfrecord")[:16]
    np.testing.assert_array_equal(batch["input_word_ids"].numpy(),
                                  np.stack([r["token_ids"] for r in ours]))
    np.testing.assert_array_equal(batch["masked_lm_ids"].numpy(),
                                  np.stack([r["mlm_labels"] for r in ours]))
    np.testing.assert_array_equal(batch["next_sentence_labels"].numpy()[:, 0],
                                  np.array([r["nsp_labels"] for r in ours]))


def test_bad_input_is_counted_or_refused(tmp_path, sotu_files):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    real = [" ".join(d) for d in read_documents(sotu_files[:2], "paragraph_per_line")]
    (corpus / "a_good.txt").write_text(f"{real[0][:3000]}\n\n{real[1][:3000]}\n")
    (corpus / "b_empty.txt").write_text("")
    (corpus / "c_binary.bin").write_bytes(bytes(range(256)) * 40)
    (corpus / "d_latin1.txt").write_bytes("Caf\u00e9 au lait, s'il vous pla\u00eet. "
                                          "Tr\u00e8s bien.\n".encode("latin-1"))
    (corpus / "e_long_line.txt").write_text("x" * (10 << 20) + "\n\nA short document.\n")
    # One worker: Beam runs in this process (two would each start a Python that imports
    # TensorFlow, ~5 s of CPU apiece, for what the one-or-two-workers test already covers).
    statistics = create_pretraining_data(
        f"{corpus}/*", str(tmp_path / "out"), layout="paragraph_per_line",
        max_line_bytes=1 << 20, dupe_factor=1, sequence_length=64, max_predictions_per_seq=10,
        num_workers=1, log=lambda *_: None)
    assert statistics["skipped_binary_files"] == 1 and statistics["empty_files"] == 1
    assert statistics["skipped_line_too_long"] == 1
    assert statistics["documents_with_invalid_utf8"] == 1  # kept: bad bytes dropped
    assert statistics["documents_read"] == 5  # 2 good, latin-1, long line, the short one
    assert statistics["train_documents"] + statistics["documents_skipped"] == 5

    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("\n".join([json.dumps({"text": real[0][:2000]}), "{not json",
                                json.dumps({"title": "no text"}),
                                json.dumps({"text": real[1][:2000]})]) + "\n")
    statistics = create_pretraining_data(str(jsonl), str(tmp_path / "jsonl"), layout="jsonl",
                                         dupe_factor=1, sequence_length=64,
                                         max_predictions_per_seq=10, num_workers=1,
                                         log=lambda *_: None)
    assert statistics["documents_read"] == 4 and statistics["train_documents"] == 2
    assert statistics["skipped_invalid_json"] == 1 and statistics["skipped_no_text_field"] == 1

    one = tmp_path / "one.txt"
    one.write_text("Only one document here. It has two sentences.\n")
    with pytest.raises(ValueError, match="needs at least 2 documents"):
        create_pretraining_data(str(one), str(tmp_path / "x"), layout="paragraph_per_line",
                                log=lambda *_: None)
    with pytest.raises(ValueError, match="The corpus is empty"):
        create_pretraining_data(str(corpus / "c_binary.bin"), str(tmp_path / "x"),
                                log=lambda *_: None)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "a"]) + "\n")
    with pytest.raises(ValueError, match=r"no \[MASK\] token"):
        create_pretraining_data(str(one), str(tmp_path / "x"), vocabulary=str(vocab))
    with pytest.raises(ValueError, match="No input file matches"):
        create_pretraining_data(str(tmp_path / "nothing*.txt"), str(tmp_path / "x"))


def test_input_and_output_through_tf_io_gfile(sotu_files):
    """A file system other than the local one (TensorFlow's ram://, as gs:// would be)."""
    for index, path in enumerate(sotu_files[:3]):
        tf.io.gfile.copy(path, f"ram://corpus/{index}.txt", overwrite=True)
    statistics = create_pretraining_data("ram://corpus/*.txt", "ram://out", num_workers=1,
                                         **SETTINGS)
    assert statistics["documents_read"] == 3
    assert len(_features("ram://out/train-*")) == statistics["instances"] > 0


def test_cli(tmp_path, sotu_files, capsys):
    from keras_bert_suite.cli import main

    main(["create-pretraining-data", "--input", *sotu_files[:3], "--output_dir",
          str(tmp_path / "out"), "--layout", "paragraph_per_line", "--max_seq_length", "64",
          "--max_predictions_per_seq", "10", "--dupe_factor", "1", "--unmasked",
          "--num_workers", "1"])
    with open(tmp_path / "out" / "statistics.json") as f:
        statistics = json.load(f)
    assert statistics["masked_positions"] == 0 and statistics["instances"] > 0
    rows = _features(f"{tmp_path}/out/train-*")
    assert len(rows) == statistics["instances"]
    with pytest.raises(SystemExit):
        main(["create-pretraining-data", "--input", str(tmp_path / "none*.txt"),
              "--output_dir", str(tmp_path / "x")])
    assert "No input file matches" in capsys.readouterr().err


def test_kbs_pretrain_trains_on_the_records(pipeline_output, tmp_path):
    from keras_bert_suite import recipe_runner

    output, statistics = pipeline_output
    recipe = recipe_runner.load_recipe("pretrain_cpu_smoke", overrides=[
        'model.encoder_overrides={"num_layers": 1, "hidden_dim": 16, "num_heads": 2, '
        '"intermediate_dim": 32, "max_sequence_length": 64, "dropout": 0.0}',
        f'data.tfrecords="{output}/train-*.tfrecord"',
        f'data.eval_tfrecords="{output}/eval-*.tfrecord"', "data.sequence_length=64",
        "data.max_predictions_per_seq=10", "training.batch_size=8",
        "training.num_train_steps=4", "training.checkpoint_every_n_steps=2",
        "training.eval_batches=2", "training.optimizer.num_warmup_steps=0"])
    summary = recipe_runner.run_pretraining(recipe, str(tmp_path / "run"), verbose=0,
                                            log=lambda *_: None)
    assert summary["step"] == 4
    history = summary["history"]
    assert [row["step"] for row in history] == [0, 2, 4]
    assert all(np.isfinite(row["val_loss"]) for row in history)


def test_kbs_pretrain_packs_the_records_into_rows(pipeline_output, tmp_path):
    """data.max_instances_per_row: the records' instances packed in the stream, 3 to a row."""
    from keras_bert_suite import recipe_runner
    from keras_bert_suite.tasks.pretrainer.data.recipe_data import build_datasets, recipe_tokenizer

    output, _ = pipeline_output
    recipe = recipe_runner.load_recipe("pretrain_cpu_smoke", overrides=[
        'model.encoder_overrides={"num_layers": 1, "hidden_dim": 16, "num_heads": 2, '
        '"intermediate_dim": 32, "max_sequence_length": 64, "dropout": 0.0}',
        f'data.tfrecords="{output}/train-*.tfrecord"', "data.sequence_length=64",
        "data.max_predictions_per_seq=10", "data.max_instances_per_row=3",
        "training.batch_size=8", "training.num_train_steps=2",
        "training.checkpoint_every_n_steps=2", "training.optimizer.num_warmup_steps=0"])
    train, _ = build_datasets(recipe, recipe_tokenizer(recipe["model"]), log=lambda *_: None)
    batches = list(train.take(10))
    assert all(tuple(y["nsp_labels"].shape) == tuple(y["nsp_weights"].shape) == (8, 3)
               for _, y in batches)
    # Most instances fill their 64 tokens; the short ones share rows.
    assert max(int(tf.reduce_max(x["padding_mask"])) for x, _ in batches) > 1
    summary = recipe_runner.run_pretraining(recipe, str(tmp_path / "run"), verbose=0,
                                            log=lambda *_: None)
    assert summary["model"].max_instances_per_row == 3
    assert np.isfinite(summary["history"][-1]["loss"])
