"""What the tokenizer benchmarks share: their command line and thread pools, the State of
the Union sentences, and a tokenizer run in one tf.function whose batch is split into shards
that TensorFlow's inter-op pool runs side by side."""

import argparse
import os
import re


def parse_args_and_set_threads(description, output_name):
    """--threads/--repeats/--batch-size/--output; every library's pools get `threads`. Call
    before importing TensorFlow or `tokenizers`: pools are fixed when a library starts."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--output", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "results", output_name))
    args = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    return args


def sotu_sentences():
    from keras_bert_suite.data import corpora

    sentences = []
    for path in corpora.sotu_files():
        with open(path, encoding="utf-8") as f:
            for line in f:
                sentences += [s for s in re.split(r"(?<=[.!?])\s+", line.strip()) if s]
    return sentences


def sharded_graph(tokenize, shards):
    """A tf.function that tokenizes a batch as `shards` independent slices (parallel ops)."""
    import tensorflow as tf

    def run(strings):
        size = tf.shape(strings)[0]
        bounds = [size * i // shards for i in range(shards + 1)]
        parts = [tokenize(strings[bounds[i]:bounds[i + 1]]) for i in range(shards)]
        return parts[0] if shards == 1 else tf.concat(parts, axis=0)

    return tf.function(run, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
