"""WordPiece throughput on the State of the Union corpus: ours vs Hugging Face `tokenizers` vs
keras-hub, measured in one run (A B C A B C ..., median), at an equal thread count.

    python bench/tokenizer_throughput.py [--threads 2] [--repeats 5] [--batch-size 4096]

The corpus (~10.7 MB, 233 addresses) is split into sentences. Every contender tokenizes all of
it, uncased, with the bert-base-uncased vocabulary of the packaged all-MiniLM-L6-v2 checkpoint:

* ours, tf.function: `BertTokenizer` in a graph, 4096 sentences per call, each call split into
  `threads` shards that TensorFlow's inter-op pool runs side by side;
* ours, tf.data: the same layer in `Dataset.map(num_parallel_calls=threads)` over the same
  4096-sentence batches (one iterator per 3 passes over the corpus);
* tokenizers: `BertWordPieceTokenizer.encode_batch` on the same 4096-sentence batches, with
  RAYON_NUM_THREADS=threads;
* keras-hub: `WordPieceTokenizer(lowercase=True, strip_accents=True)` in a tf.function, also
  sharded;
* ours, the eager calls a user writes on Python lists (4096 sentences each): `tokenizer(texts)`
  (ragged ids), `tokenizer.encode_batch(texts)` (lists of ids) and `preprocessor(texts)`
  (`BertPreprocessor`, packed to 128: numpy arrays).

TensorFlow's intra- and inter-op pools are both set to `threads`. Before timing, ours is checked
to give exactly the ids `tokenizers` gives on every sentence. Results go to stdout and
bench/results/tokenizer_throughput.json.
"""

import json
import os
import platform
import statistics
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tokenizing import parse_args_and_set_threads  # noqa: E402

ARGS = parse_args_and_set_threads(__doc__.split("\n")[0], "tokenizer_throughput.json")

import tensorflow as tf  # noqa: E402

import keras_hub  # noqa: E402
import tokenizers  # noqa: E402

from _tokenizing import sharded_graph, sotu_sentences  # noqa: E402

from keras_bert_suite.presets import packaged_checkpoint_dir  # noqa: E402
from keras_bert_suite.text import BertPreprocessor, BertTokenizer  # noqa: E402

MAX_CHARS_PER_WORD = 200  # google-research/bert's value; `tokenizers` is set to match
DATASET_PASSES = 3  # corpus passes per tf.data iterator (see dataset_contender)


def graph_contender(tokenize, batches, shards):
    graph = sharded_graph(tokenize, shards)

    def run():
        return [graph(batch) for batch in batches]

    return run


def dataset_contender(tokenize, chunks, threads, passes):
    """The layer in `Dataset.map`; elements are whole batches, as when reading batched files.

    One iterator reads the corpus `passes` times: starting an iterator instantiates the map
    function (graph optimization, kernels), ~0.2 s that a real input pipeline pays once.
    """
    options = tf.data.Options()
    options.threading.private_threadpool_size = threads
    dataset = (tf.data.Dataset.from_tensor_slices(tf.ragged.constant(chunks)).repeat(passes)
               .map(tokenize, num_parallel_calls=threads, deterministic=True)
               .with_options(options))

    def run():
        return list(dataset)

    return run


def tokenizers_contender(tokenizer, chunks):
    def run():
        return [tokenizer.encode_batch(chunk, add_special_tokens=False) for chunk in chunks]

    return run


def check_parity(ours, reference, chunks):
    mismatches = 0
    for chunk in chunks:
        expected = [e.ids for e in reference.encode_batch(chunk, add_special_tokens=False)]
        mismatches += sum(a != b for a, b in zip(ours.encode_batch(chunk), expected))
    return mismatches


def main():
    sentences = sotu_sentences()
    megabytes = sum(len(s.encode("utf-8")) for s in sentences) / 1e6
    size = ARGS.batch_size
    chunks = [sentences[i:i + size] for i in range(0, len(sentences), size)]
    batches = [tf.constant(chunk) for chunk in chunks]
    vocab_path = os.path.join(packaged_checkpoint_dir("all-MiniLM-L6-v2"), "vocab.txt")

    ours = BertTokenizer(vocab_path, max_input_chars_per_word=MAX_CHARS_PER_WORD)
    preprocessor = BertPreprocessor(ours, sequence_length=128)
    reference = tokenizers.BertWordPieceTokenizer(vocab_path, lowercase=True)
    reference._tokenizer.model.max_input_chars_per_word = MAX_CHARS_PER_WORD
    hub = keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocab_path, lowercase=True, strip_accents=True, dtype="int32")

    mismatches = check_parity(ours, reference, chunks)
    print(f"{len(sentences)} sentences, {megabytes:.2f} MB, batches of {size}, "
          f"{ARGS.threads} thread(s); ours vs tokenizers: {mismatches} sentences differ")

    contenders = {
        "ours (tf.function)": graph_contender(ours, batches, ARGS.threads),
        "ours (tf.data map)": dataset_contender(ours, chunks, ARGS.threads, DATASET_PASSES),
        "tokenizers": tokenizers_contender(reference, chunks),
        "keras-hub (tf.function)": graph_contender(hub, batches, ARGS.threads),
        # The natural eager calls on Python lists, as a user writes them.
        "ours tokenizer(texts)": lambda: [ours(chunk) for chunk in chunks],
        "ours encode_batch": lambda: [ours.encode_batch(chunk) for chunk in chunks],
        "ours preprocessor(texts)": lambda: [preprocessor(chunk) for chunk in chunks],
    }
    for run in contenders.values():  # warm-up: tracing, kernel and thread pool start-up
        run()
    speeds = {name: [] for name in contenders}
    passes = {name: DATASET_PASSES if "tf.data" in name else 1 for name in contenders}
    for _ in range(ARGS.repeats):  # interleaved, so load changes hit every contender alike
        for name, run in contenders.items():
            start = time.perf_counter()
            run()
            speeds[name].append(passes[name] * megabytes / (time.perf_counter() - start))

    baseline = statistics.median(speeds["tokenizers"])
    results = {}
    print(f"{'contender':26s} {'MB/s':>8s} {'min':>8s} {'max':>8s} {'vs tokenizers':>14s}")
    for name, values in speeds.items():
        median = statistics.median(values)
        results[name] = {"median_mb_per_s": round(median, 3),
                         "runs_mb_per_s": [round(v, 3) for v in values],
                         "ratio_vs_tokenizers": round(median / baseline, 2)}
        print(f"{name:26s} {median:8.2f} {min(values):8.2f} {max(values):8.2f} "
              f"{median / baseline:13.1f}x")

    report = {
        "benchmark": "WordPiece throughput, State of the Union sentences, uncased MiniLM vocab",
        "corpus_mb": round(megabytes, 3), "sentences": len(sentences), "batch_size": size,
        "threads": ARGS.threads, "repeats": ARGS.repeats,
        "ids_identical_to_tokenizers": mismatches == 0, "mismatched_sentences": mismatches,
        "results": results,
        "versions": {"tensorflow": tf.__version__, "tokenizers": tokenizers.__version__,
                     "keras_hub": keras_hub.__version__, "python": platform.python_version()},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "load_average_1min": round(os.getloadavg()[0], 2)},
    }
    os.makedirs(os.path.dirname(ARGS.output), exist_ok=True)
    with open(ARGS.output, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {ARGS.output}")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
