"""The optimizer's share of a fine-tuning step: Keras' AdamW against FusedAdamW, in one process.

    KERAS_BACKEND=tensorflow python bench/optimizer_step.py [--rounds 7] [--lengths 16 64]

Model: BertClassifier on an encoder of all-MiniLM-L6-v2's shape (6 layers, hidden 384, 12
heads, the 30,522-token table: 22.7M parameters, 11.7M of them the table), random weights
(speed does not depend on them), batch 32. Both optimizers are `create_optimizer`'s BERT
set-up (weight decay 0.01 with LayerNorm and biases excluded, global clipnorm 1.0, eps 1e-6),
one built as Keras' AdamW, one as FusedAdamW, each on its own copy of the model.

Contestants, A B A B interleaved, each the median of its rounds, in wall-clock and in this
process's CPU seconds (the machine is shared; CPU time moves less with the neighbours):
* `step L`: one `train_on_batch` at sequence length L (forward, backward, update), also with
  FusedAdamW's row-wise update of the token table (`touched_rows_names`);
* `fixed`: step at the shortest length minus that length times the per-token slope between
  the shortest and the longest length (what a step costs whatever its length);
* `update` (TensorFlow and torch): `optimizer.apply` alone, on fixed gradients (the token
  table's of 512 looked-up ids: row slices on TensorFlow, as a lookup makes them, dense with
  the other rows 0 on torch; traced once with tf.function on TensorFlow, as fit runs it).
The fixed cost of a step is what does not shrink with the length: the update. Results:
stdout and bench/results/optimizer_step.json.
"""

import argparse
import os
import statistics
import sys
import time

import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402

from keras_bert_suite import BertClassifier, BertEncoder  # noqa: E402
from keras_bert_suite.training import create_optimizer  # noqa: E402
from keras_bert_suite.training.optimizers import AdamW, FusedAdamW  # noqa: E402

MINILM = dict(vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=384,
              intermediate_dim=1536, max_sequence_length=512)
BATCH = 32
OPTIMIZERS = {"keras AdamW": (AdamW, {}), "FusedAdamW": (FusedAdamW, {}),
              "FusedAdamW touched rows": (FusedAdamW, {"touched_rows_names": ["token_embedding"]})}


def _batch(length, seed=0):
    rng = np.random.default_rng(seed)
    x = {"token_ids": rng.integers(1000, 30000, (BATCH, length)).astype("int32"),
         "segment_ids": np.zeros((BATCH, length), "int32"),
         "padding_mask": np.ones((BATCH, length), "int32")}
    return x, (np.arange(BATCH) % 2).astype("int32")


def _classifier(optimizer_class, options, weights=None):
    classifier = BertClassifier(BertEncoder(**MINILM), num_classes=2)
    if weights is not None:
        classifier.set_weights(weights)
    bert = create_optimizer(learning_rate=5e-5)
    classifier.compile(optimizer=optimizer_class.from_config({**bert.get_config(), **options}))
    return classifier


def _update_alone(classifier, length=16):
    """A zero-argument callable running `optimizer.apply` on fixed gradients: dense, except
    the token table's on TensorFlow, row slices of a batch of `length` tokens (as a lookup's
    gradient arrives there; on torch the rows outside the batch are 0)."""
    variables = classifier.trainable_variables
    rng = np.random.default_rng(1)
    gradients = [(rng.standard_normal(v.shape) * 1e-3).astype("float32") for v in variables]
    ids = rng.integers(1000, 30000, BATCH * length)
    table = next(i for i, v in enumerate(variables) if "token_embedding" in v.path)
    gradients[table] = np.zeros(gradients[table].shape, "float32")
    np.add.at(gradients[table], ids, rng.standard_normal((len(ids), MINILM["hidden_dim"])))
    gradients = [keras.ops.convert_to_tensor(g) for g in gradients]
    optimizer = classifier.optimizer
    optimizer.build(variables)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        rows = tf.constant(rng.standard_normal((len(ids), MINILM["hidden_dim"])), tf.float32)
        gradients[table] = tf.IndexedSlices(rows, tf.constant(ids), variables[table].shape)
        return tf.function(lambda: optimizer.apply(gradients, variables))
    return lambda: optimizer.apply(gradients, variables)


def contestants(lengths):
    calls = {}
    weights = None
    for label, (optimizer_class, options) in OPTIMIZERS.items():
        classifier = _classifier(optimizer_class, options, weights)
        weights = classifier.get_weights()
        for length in lengths:
            x, y = _batch(length)
            calls[f"step {length}, {label}"] = (
                lambda c=classifier, x=x, y=y: c.train_on_batch(x, y))
        if keras.backend.backend() in ("tensorflow", "torch"):
            calls[f"update, {label}"] = _update_alone(classifier)
    return calls


def _timed(call, repeats):
    wall, cpu = [], []
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - start_wall)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64])
    args = parser.parse_args()
    calls = contestants(args.lengths)
    for call in calls.values():  # warm-up: tracing, allocator
        call(), call()
    samples = {name: [] for name in calls}
    for _ in range(args.rounds):  # A B A B: the neighbours slow every contestant alike
        for name, call in calls.items():
            samples[name].append(_timed(call, args.repeats))
    results = _workers.results_header(os.cpu_count(), backend=keras.backend.backend(),
                                      cpu_flags=_workers.cpu_flags(), rounds=args.rounds,
                                      repeats=args.repeats)
    print(f"{results['machine']}, {os.cpu_count()} CPUs, load {results['load_average_at_start']}")
    print("CPU flags:", " ".join(results["cpu_flags"]), "| backend:", keras.backend.backend())
    table = {}
    for name, values in samples.items():
        wall = statistics.median(value[0] for value in values)
        cpu = statistics.median(value[1] for value in values)
        table[name] = {"wall_ms": 1000 * wall, "cpu_ms": 1000 * cpu}
        print(f"{name:28s} wall {1000 * wall:8.1f} ms   cpu {1000 * cpu:8.1f} ms")
    for name, value in table.items():
        what, label = name.split(", ")
        keras_ms = table[f"{what}, keras AdamW"]
        if label != "keras AdamW":
            print(f"{what}: {label} / keras AdamW = "
                  f"{value['wall_ms'] / keras_ms['wall_ms']:.2f}x wall, "
                  f"{value['cpu_ms'] / keras_ms['cpu_ms']:.2f}x cpu")
    if len(args.lengths) >= 2:  # fixed cost: the step at the shortest length minus its slope
        short, long = min(args.lengths), max(args.lengths)
        for label in OPTIMIZERS:
            for clock in ("wall_ms", "cpu_ms"):
                a, b = (table[f"step {n}, {label}"][clock] for n in (short, long))
                slope = (b - a) / (long - short)
                table[f"fixed, {label}"] = {**table.get(f"fixed, {label}", {}),
                                            clock: a - slope * short}
            fixed = table[f"fixed, {label}"]
            print(f"fixed cost (step {short} minus {short} x per-token slope), {label}: "
                  f"wall {fixed['wall_ms']:.1f} ms, cpu {fixed['cpu_ms']:.1f} ms")
    _workers.write_results("optimizer_step", {**results, "milliseconds": table})


if __name__ == "__main__":
    main()
