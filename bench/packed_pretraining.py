"""Packed pretraining: real (non-padding) tokens per second, packed rows vs one instance per
row, with the CPU smoke recipe (recipes/pretrain_cpu_smoke.json) on State of the Union text.

    python bench/packed_pretraining.py [--files-every 4] [--rounds 5] [--steps 8]
                                       [--curve-steps 120] [--max-instances 3]

One process, the Keras backend of $KERAS_BACKEND. For each instance setting ("smoke": the
recipe's own, short_seq_prob 0.1; "short": short_seq_prob 1.0, every document drawing a random
target length) the bench
* makes unmasked NSP instances of every `--files-every`-th address with the recipe's settings
  (128 tokens, paragraph_per_line, dupe_factor 1), masks each once (DynamicMasker, seeded), and
  lays the SAME masked instances out twice: one per row (the original layout) and packed
  first-fit into rows of 128 (tasks/pretrainer/data/packing.py, at most `--max-instances`
  instances and 20 predictions per row);
* builds the smoke recipe's model (BERT-tiny: 2 layers, width 128; dropout 0) and optimizer
  (AdamW, 2e-3 after a 40-step warm-up) twice from the same initial weights, one per layout
  (`BertPretrainer(max_instances_per_row=K)` for the packed one);
* equal loss: both models' loss on the same 64 instances before training (the packed one
  computes every instance in a shared row), relative difference printed;
* speed: A B A B ... `--rounds` rounds of `--steps` training steps (train_on_batch, batch 32
  rows) per layout; real tokens/s per round, the median and the packed/unpacked ratio;
* loss curves: both models trained `--curve-steps` steps from the same start on the same
  instance stream (a packed step eats more instances); the training loss printed against the
  instances seen, side by side.

Results go to stdout and bench/results/packed_pretraining_<backend>.json.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SETTINGS = {"smoke": 0.1, "short": 1.0}  # short_seq_prob
BATCH = 32


def masked_instances(files, short_seq_prob, tokenizer, recipe):
    """The recipe's instances of `files`, each masked once: flat numpy features."""
    import tensorflow as tf

    from keras_bert_suite.tasks.pretrainer.data.documents import read_documents
    from keras_bert_suite.tasks.pretrainer.data.dynamic_masking import DynamicMasker
    from keras_bert_suite.tasks.pretrainer.data.instances import create_pretraining_instances
    from keras_bert_suite.tasks.pretrainer.data.packing import instance_features

    data = recipe["data"]
    instances = create_pretraining_instances(
        list(read_documents(files, layout=data["layout"])), tokenizer,
        data["sequence_length"], dupe_factor=1, short_seq_prob=short_seq_prob,
        static_masking=False, seed=data["seed"])
    features = instance_features(instances, data["sequence_length"],
                                 data["max_predictions_per_seq"], masked=False)
    masker = DynamicMasker.from_tokenizer(tokenizer,
                                          max_predictions_per_seq=data["max_predictions_per_seq"])
    x, y = masker(features, seed=tf.constant([data["seed"], 1], tf.int64))
    return {**{k: v.numpy() for k, v in x.items()}, **{k: v.numpy() for k, v in y.items()}}


def pack(features, recipe, max_instances):
    """The same masked instances packed into rows; also how many instances each row holds."""
    import tensorflow as tf

    from keras_bert_suite.tasks.pretrainer.data.packing import pack_instances

    data = recipe["data"]
    rows = list(pack_instances(tf.data.Dataset.from_tensor_slices(features),
                               data["sequence_length"], max_instances,
                               data["max_predictions_per_seq"]).as_numpy_iterator())
    return {name: np.stack([row[name] for row in rows]) for name in rows[0]}


def x_y(features, start, stop):
    x = {k: features[k][start:stop] for k in
         ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
    y = {k: features[k][start:stop] for k in
         ("mlm_labels", "mlm_weights", "nsp_labels", "nsp_weights") if k in features}
    return x, y


def instances_in(features, start, stop):
    if "nsp_weights" in features:
        return int(features["nsp_weights"][start:stop].sum())
    return stop - start


def build_models(recipe, vocabulary_size, max_instances, num_train_steps):
    import keras

    from keras_bert_suite import BertPretrainer
    from keras_bert_suite.recipe_runner.common import recipe_optimizer

    model = recipe["model"]
    keras.utils.set_random_seed(recipe["data"]["seed"])
    models = []
    for instances in (None, max_instances):
        pretrainer = BertPretrainer.from_preset(
            model["preset"], load_weights=False, max_instances_per_row=instances,
            encoder_overrides={"vocabulary_size": vocabulary_size,
                               **model["encoder_overrides"]})
        if models:
            pretrainer.set_weights(models[0].get_weights())
        pretrainer.compile(optimizer=recipe_optimizer(recipe["training"]["optimizer"],
                                                      num_train_steps),
                           jit_compile=recipe["training"]["jit_compile"])
        models.append(pretrainer)
    return models


def equal_loss(models, unpacked, recipe, max_instances, count=64):
    """Both models' loss on the same `count` instances (before any training)."""
    first = {k: v[:count] for k, v in unpacked.items()}
    packed = pack(first, recipe, max_instances)
    losses = [float(model.evaluate(*x_y(data, 0, len(data["token_ids"])), batch_size=1024,
                                   verbose=0, return_dict=True)["loss"])
              for model, data in zip(models, (first, packed))]
    return {"unpacked": losses[0], "packed": losses[1],
            "relative_difference": abs(losses[1] - losses[0]) / abs(losses[0])}


def timed_steps(model, features, cursor, steps):
    """`steps` training steps from row `cursor` (wrapping); (seconds, real tokens, cursor)."""
    rows = len(features["token_ids"])
    tokens, start = 0, time.perf_counter()
    for _ in range(steps):
        if cursor + BATCH > rows:
            cursor = 0
        x, y = x_y(features, cursor, cursor + BATCH)
        model.train_on_batch(x, y)
        tokens += int((x["padding_mask"] > 0).sum())
        cursor += BATCH
    return time.perf_counter() - start, tokens, cursor


def curve(model, features, steps):
    """Training loss per step against the instances seen, from the start of `features`."""
    points, seen = [], 0
    for step in range(steps):
        start = (step * BATCH) % (len(features["token_ids"]) - BATCH)
        x, y = x_y(features, start, start + BATCH)
        loss = model.train_on_batch(x, y, return_dict=True)["loss"]
        seen += instances_in(features, start, start + BATCH)
        points.append((seen, float(loss)))
    return points


def at_instances(points, marks):
    """The mean loss of the steps whose instances end in each bin (marks: bin ends)."""
    out, previous = [], 0
    for mark in marks:
        losses = [loss for seen, loss in points if previous < seen <= mark]
        out.append(float(np.mean(losses)) if losses else float("nan"))
        previous = mark
    return out


def run(setting, args, recipe, tokenizer, files):
    import keras

    unpacked = masked_instances(files, SETTINGS[setting], tokenizer, recipe)
    packed = pack(unpacked, recipe, args.max_instances)
    real = int((unpacked["padding_mask"] > 0).sum())
    fill = {"unpacked": real / unpacked["padding_mask"].size,
            "packed": real / packed["padding_mask"].size}
    print(f"\n[{setting}] {len(unpacked['token_ids'])} instances of mean length "
          f"{real / len(unpacked['token_ids']):.1f} -> {len(packed['token_ids'])} packed rows; "
          f"real tokens per row slot: {fill['unpacked']:.1%} unpacked, {fill['packed']:.1%} "
          f"packed", flush=True)

    steps_total = args.rounds * args.steps + 2 + args.curve_steps
    models = build_models(recipe, tokenizer.vocabulary_size(), args.max_instances,
                          max(steps_total, recipe["training"]["num_train_steps"]))
    loss_check = equal_loss(models, unpacked, recipe, args.max_instances)
    print(f"  equal loss on 64 instances: unpacked {loss_check['unpacked']:.6f}, packed "
          f"{loss_check['packed']:.6f} (relative difference "
          f"{loss_check['relative_difference']:.1e})", flush=True)

    # Curves first (from the shared start), then speed (the weights only move on).
    points = [curve(model, data, args.curve_steps)
              for model, data in zip(models, (unpacked, packed))]
    marks = list(np.linspace(0, min(p[-1][0] for p in points), 9)[1:].astype(int))
    curves = {"instances": [int(m) for m in marks],
              "unpacked": at_instances(points[0], marks), "packed": at_instances(points[1], marks)}
    print("  training loss by instances seen (mean of the steps ending in each bin):")
    print("    " + "  ".join(f"{m:>7d}" for m in marks))
    print("    " + "  ".join(f"{v:7.3f}" for v in curves["unpacked"]) + "   unpacked")
    print("    " + "  ".join(f"{v:7.3f}" for v in curves["packed"]) + "   packed", flush=True)

    for model, data in zip(models, (unpacked, packed)):
        timed_steps(model, data, 0, 2)  # warm-up (traced already by the curve)
    cursors, rates = [0, 0], {"unpacked": [], "packed": []}
    for _ in range(args.rounds):
        for index, (name, data) in enumerate((("unpacked", unpacked), ("packed", packed))):
            seconds, tokens, cursors[index] = timed_steps(models[index], data, cursors[index],
                                                          args.steps)
            rates[name].append(tokens / seconds)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    ratio = medians["packed"] / medians["unpacked"]
    print(f"  real tokens/s (median of {args.rounds} rounds of {args.steps} steps): unpacked "
          f"{medians['unpacked']:.0f}, packed {medians['packed']:.0f}: packed / unpacked = "
          f"{ratio:.2f}x", flush=True)
    keras.backend.clear_session()
    return {"instances": len(unpacked["token_ids"]), "packed_rows": len(packed["token_ids"]),
            "fill": fill, "equal_loss": loss_check, "loss_curves": curves,
            "real_tokens_per_second": rates, "median_real_tokens_per_second": medians,
            "packed_over_unpacked": ratio}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files-every", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--curve-steps", type=int, default=120)
    parser.add_argument("--max-instances", type=int, default=3)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    args = parser.parse_args()

    import keras

    from keras_bert_suite.data import corpora
    from keras_bert_suite.recipe_runner import load_recipe
    from keras_bert_suite.tasks.pretrainer.data.recipe_data import recipe_tokenizer

    recipe = load_recipe("pretrain_cpu_smoke")
    tokenizer = recipe_tokenizer(recipe["model"])
    files = corpora.sotu_files()[::args.files_every]
    backend = keras.backend.backend()
    print(f"Packed vs unpacked pretraining, {backend} backend, smoke recipe model, batch "
          f"{BATCH} rows x {recipe['data']['sequence_length']}, {len(files)} addresses")
    results = {"backend": backend, "args": vars(args), "files": len(files),
               "settings": {setting: run(setting, args, recipe, tokenizer, files)
                            for setting in args.settings}}
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    path = os.path.join(ROOT, "bench", "results", f"packed_pretraining_{backend}.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    print(f"\n{path}")


if __name__ == "__main__":
    main()
