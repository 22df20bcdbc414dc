"""Byte-level BPE and SentencePiece throughput on the State of the Union corpus: ours (in the
TF graph) vs Hugging Face `tokenizers`, `sentencepiece` and keras-hub's in-graph tokenizers,
measured in one run (A B C A B C ..., median), at an equal thread count.

    python bench/family_tokenizer_throughput.py [--threads 2] [--repeats 5]

The models are learned from the corpus itself (no model hub): a 5,000-token byte-level BPE by
`tokenizers` and a 3,000-piece unigram SentencePiece model by `sentencepiece` (XLM-R's
flags). Every contender tokenizes all 63,559 sentences in batches of 4,096:

* ours: `BytePairTokenizer` / `SentencePieceTokenizer(style="xlm_roberta")` in a tf.function,
  each batch split into `threads` shards that TensorFlow's inter-op pool runs side by side;
* tokenizers: `ByteLevelBPETokenizer.encode_batch` (RAYON_NUM_THREADS=threads);
* sentencepiece: `SentencePieceProcessor.encode` (`num_threads=threads`);
* keras-hub: `BytePairTokenizer` / `SentencePieceTokenizer` in a sharded tf.function.

Before timing, ours is checked against `tokenizers` / `sentencepiece` on every sentence.
Results go to stdout and bench/results/family_tokenizer_throughput.json.
"""

import json
import os
import platform
import statistics
import sys
import tempfile
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tokenizing import parse_args_and_set_threads  # noqa: E402

ARGS = parse_args_and_set_threads(__doc__.split("\n")[0], "family_tokenizer_throughput.json")

import tensorflow as tf  # noqa: E402

import keras_hub  # noqa: E402
import sentencepiece  # noqa: E402
import tokenizers  # noqa: E402

from _tokenizing import sharded_graph, sotu_sentences  # noqa: E402
from _workers import results_header, write_results  # noqa: E402

from keras_bert_suite.text import BytePairTokenizer, SentencePieceTokenizer  # noqa: E402


def learn_models(sentences, directory):
    bpe = tokenizers.ByteLevelBPETokenizer()
    bpe.train_from_iterator(sentences, vocab_size=5000, min_frequency=2, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(directory)
    prefix = os.path.join(directory, "sentencepiece.bpe")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences[::3]), model_prefix=prefix, vocab_size=3000,
        model_type="unigram", character_coverage=0.99995, minloglevel=2)
    return bpe, prefix + ".model"


def main():
    sentences = sotu_sentences()
    megabytes = sum(len(s.encode("utf-8")) for s in sentences) / 1e6
    chunks = [sentences[i:i + ARGS.batch_size] for i in range(0, len(sentences), ARGS.batch_size)]
    batches = [tf.constant(chunk) for chunk in chunks]
    directory = tempfile.mkdtemp()
    reference_bpe, spm_path = learn_models(sentences, directory)
    ours_bpe = BytePairTokenizer.from_directory(directory)
    ours_spm = SentencePieceTokenizer(spm_path, style="xlm_roberta")
    processor = sentencepiece.SentencePieceProcessor(model_file=spm_path, num_threads=ARGS.threads)
    with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
        vocabulary = json.load(f)
    with open(os.path.join(directory, "merges.txt"), encoding="utf-8") as f:
        merges = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    hub_bpe = keras_hub.tokenizers.BytePairTokenizer(vocabulary=vocabulary, merges=merges,
                                                     dtype="int32")
    with open(spm_path, "rb") as f:
        hub_spm = keras_hub.tokenizers.SentencePieceTokenizer(proto=f.read(), dtype="int32")

    bpe_differ = sum(a != b.ids for a, b in zip(ours_bpe.encode_batch(sentences),
                                                reference_bpe.encode_batch(sentences)))
    spm_differ = sum(a != [i + 1 if i else 3 for i in b] for a, b in zip(
        ours_spm.encode_batch(sentences), processor.encode(sentences)))
    print(f"{len(sentences)} sentences, {megabytes:.2f} MB, {ARGS.threads} thread(s); "
          f"sentences that differ: BPE {bpe_differ}, SentencePiece {spm_differ}")

    contenders = {
        "BPE ours (tf.function)": lambda f=sharded_graph(ours_bpe, ARGS.threads): [f(b) for b in batches],
        "BPE tokenizers": lambda: [reference_bpe.encode_batch(c) for c in chunks],
        "BPE keras-hub (tf.function)": lambda f=sharded_graph(hub_bpe, ARGS.threads): [f(b) for b in batches],
        "SentencePiece ours (tf.function)": lambda f=sharded_graph(ours_spm, ARGS.threads): [f(b) for b in batches],
        "SentencePiece sentencepiece": lambda: [processor.encode(c) for c in chunks],
        "SentencePiece keras-hub (tf.function)":
            lambda f=sharded_graph(hub_spm, ARGS.threads): [f(b) for b in batches],
    }
    for run in contenders.values():  # warm-up: tracing, kernels, thread pools
        run()
    speeds = {name: [] for name in contenders}
    for _ in range(ARGS.repeats):
        for name, run in contenders.items():
            start = time.perf_counter()
            run()
            speeds[name].append(megabytes / (time.perf_counter() - start))

    baselines = {"BPE": statistics.median(speeds["BPE tokenizers"]),
                 "SentencePiece": statistics.median(speeds["SentencePiece sentencepiece"])}
    results = {}
    print(f"{'contender':40s} {'MB/s':>7s} {'vs reference':>13s}")
    for name, values in speeds.items():
        median = statistics.median(values)
        ratio = median / baselines[name.split()[0]]
        results[name] = {"median_mb_per_s": round(median, 3),
                         "runs_mb_per_s": [round(v, 3) for v in values],
                         "ratio_vs_reference": round(ratio, 2)}
        print(f"{name:40s} {median:7.2f} {ratio:12.2f}x")
    write_results("family_tokenizer_throughput", {
        **results_header(ARGS.threads, corpus_mb=round(megabytes, 3), sentences=len(sentences),
                         batch_size=ARGS.batch_size, repeats=ARGS.repeats),
        "sentences_that_differ": {"bpe": bpe_differ, "sentencepiece": spm_differ},
        "results": results,
        "versions": {"tensorflow": tf.__version__, "tokenizers": tokenizers.__version__,
                     "sentencepiece": sentencepiece.__version__,
                     "keras_hub": keras_hub.__version__, "python": platform.python_version()}})
    return 0 if bpe_differ == spm_differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
