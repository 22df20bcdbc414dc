"""Fine-tuning wall-clock and held-out accuracy: fixed-length batches vs length buckets, on each
Keras backend, and transformers' `Trainer` with `DataCollatorWithPadding` and
`group_by_length` sampling on the same weights and split.

    python bench/bucketed_finetuning.py [--backends tensorflow jax torch] [--max_train N]
                                        [--skip_fixed] [--float32]

The run is `make demo`'s fine-tune (recipes/sentiment_rotten_tomatoes_cpu.json): the real
all-MiniLM-L6-v2 weights, the Rotten Tomatoes review sentences with 2,000 held out, AdamW 5e-5
with 10% warm-up and linear decay, batch 32, max length 64, one epoch, seed 1234.

* fixed: `training.bucket_boundaries=null`, every batch padded to 64 (what TPUs get).
* bucketed: the recipe's default: each batch cut to its longest row rounded up to 16, 24, 32,
  48 or 64, rows grouped by length 50 batches at a time.
* precision: the recipe's "auto" (mixed_bfloat16 on TensorFlow and PyTorch where the CPU has
  AMX or AVX512_BF16, float32 otherwise: training/cpu_bf16.py). On such a CPU the run adds
  `Trainer` with bf16=True (torch autocast), and --float32 adds ours bucketed in float32 on
  each backend.
* --skip_fixed leaves the fixed-length runs out (the comparison with `Trainer` only).
* transformers: `BertForSequenceClassification` from the same checkpoint, the same split,
  `Trainer` (torch AdamW, lr 5e-5, weight decay 0.01, eps 1e-6, clip 1.0, 10% warm-up, linear
  decay) with `DataCollatorWithPadding` (pad to each batch's longest) and `group_by_length`.

Each contestant runs in its own process, one after the other, the backends' fixed and bucketed
runs alternating in order (fixed first on one backend, bucketed first on the next). Training
seconds are the fit's wall-clock, compilation included (it is part of what a user waits for);
accuracy is on the 2,000 held-out sentences. One epoch each: a run is minutes, so there is one
run per contestant, not a median. Results: stdout and bench/results/bucketed_finetuning.json.
"""

import argparse
import json
import os
import subprocess
import sys
import time

RECIPE = "sentiment_rotten_tomatoes_cpu"
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       "bucketed_finetuning.json")


def ours(mode, max_train=None):
    """One recipe run on this process's backend: {"train_seconds", "accuracy", ...}. `mode`:
    fixed, bucketed (both in the recipe's automatic precision), or bucketed_float32."""
    import keras

    from keras_bert_suite import recipe_runner
    from keras_bert_suite.training.cpu_bf16 import cpu_precision

    overrides = ["training.bucket_boundaries=null"] if mode == "fixed" else []
    if mode.endswith("_float32"):
        overrides.append('training.precision="float32"')
    if max_train:
        overrides.append(f"data.max_train_examples={max_train}")
    recipe = recipe_runner.load_recipe(RECIPE, overrides=overrides)
    with _temporary_directory() as output:
        summary = recipe_runner.run_recipe(recipe, output, command="finetune",
                                           log=lambda message: None, verbose=0)
    metrics = summary["metrics"]
    # what the recipe's "auto" chose on this CPU (TrainingRun asks the same function)
    precision = "float32" if mode.endswith("_float32") else cpu_precision()[0]
    return {"contestant": f"ours {keras.backend.backend()} {mode}", "precision": precision,
            "train_seconds": metrics["train_seconds"], "accuracy": metrics["accuracy"],
            "train_examples": metrics["train_examples"]}


def transformers_trainer(max_train=None, bf16=False):
    """The same fine-tune with transformers' Trainer, dynamic padding and length grouping
    (`bf16`: Trainer's bf16=True, torch autocast to bfloat16 on the CPU)."""
    import numpy as np
    import torch
    import transformers

    from keras_bert_suite import recipe_runner
    from keras_bert_suite.presets import packaged_checkpoint_dir
    from keras_bert_suite.tasks.classifier.recipe import read_examples

    recipe = recipe_runner.load_recipe(RECIPE)
    data, training = recipe["data"], recipe["training"]
    train, test = read_examples(data)
    count = max_train or len(train)
    checkpoint = packaged_checkpoint_dir("all-MiniLM-L6-v2")
    tokenizer = transformers.BertTokenizerFast.from_pretrained(checkpoint)
    torch.manual_seed(training["seed"])
    model = transformers.BertForSequenceClassification.from_pretrained(checkpoint, num_labels=2)

    def encoded(texts, labels):
        rows = tokenizer(list(texts), truncation=True, max_length=data["sequence_length"])
        return [{**{k: v[i] for k, v in rows.items()}, "labels": int(labels[i])}
                for i in range(len(texts))]

    optimizer = training["optimizer"]
    steps = -(-count // training["batch_size"])
    with _temporary_directory() as output:
        arguments = transformers.TrainingArguments(
            output_dir=output, per_device_train_batch_size=training["batch_size"],
            per_device_eval_batch_size=64, num_train_epochs=1,
            learning_rate=optimizer["learning_rate"], weight_decay=0.01, adam_epsilon=1e-6,
            max_grad_norm=1.0, lr_scheduler_type="linear",
            warmup_steps=int(optimizer["warmup_fraction"] * steps),
            train_sampling_strategy="group_by_length",  # transformers 5's group_by_length=True
            seed=training["seed"], report_to=[], save_strategy="no", logging_strategy="no",
            use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, bf16=bf16)
        trainer = transformers.Trainer(
            model=model, args=arguments,
            train_dataset=encoded(train.texts[:count], train.labels[:count]),
            data_collator=transformers.DataCollatorWithPadding(tokenizer))
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
        # group_by_length also orders the evaluation rows by length: score the predictions
        # against the labels that come back with them, not against the file's order.
        predicted = trainer.predict(encoded(test.texts, test.labels))
    return {"contestant": "transformers Trainer (torch)" + (" bf16" if bf16 else ""),
            "precision": "bf16 autocast" if bf16 else "float32", "train_seconds": round(seconds, 1),
            "accuracy": float(np.mean(predicted.predictions.argmax(-1) == predicted.label_ids)),
            "train_examples": count}


class _temporary_directory:
    def __enter__(self):
        import tempfile

        self.directory = tempfile.TemporaryDirectory()
        return self.directory.name

    def __exit__(self, *exc):
        self.directory.cleanup()


def _in_subprocess(arguments, backend="torch"):
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *arguments], env=env,
                          capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{arguments} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax", "torch"])
    parser.add_argument("--max_train", type=int, default=None,
                        help="train on the first N examples only (a quick look)")
    parser.add_argument("--skip_fixed", action="store_true",
                        help="leave out the fixed-length runs")
    parser.add_argument("--float32", action="store_true",
                        help="on a bf16 CPU, also run ours bucketed in float32")
    parser.add_argument("--worker", choices=["fixed", "bucketed", "bucketed_float32",
                                             "transformers", "transformers_bf16"])
    args = parser.parse_args()
    extra = ["--max_train", str(args.max_train)] if args.max_train else []
    if args.worker and args.worker.startswith("transformers"):
        print(json.dumps(transformers_trainer(args.max_train, args.worker.endswith("_bf16"))))
        return
    if args.worker:
        print(json.dumps(ours(args.worker, args.max_train)))
        return

    from keras_bert_suite.training.cpu_bf16 import bf16_instructions

    bf16 = bf16_instructions() is not None
    results = []
    for index, backend in enumerate(args.backends):
        order = ("fixed", "bucketed") if index % 2 == 0 else ("bucketed", "fixed")
        order = tuple(mode for mode in order if not (args.skip_fixed and mode == "fixed"))
        for mode in order + (("bucketed_float32",) if bf16 and args.float32 else ()):
            results.append(_in_subprocess(["--worker", mode, *extra], backend))
            print(json.dumps(results[-1]), flush=True)
        if index == 0:  # the peer between our backends
            for worker in ("transformers",) + (("transformers_bf16",) if bf16 else ()):
                results.append(_in_subprocess(["--worker", worker, *extra]))
                print(json.dumps(results[-1]), flush=True)
    if "transformers" not in " ".join(r["contestant"] for r in results):
        results.append(_in_subprocess(["--worker", "transformers", *extra]))
    _report(results, args)


def _report(results, args):
    by_name = {r["contestant"]: r for r in results}
    peer = by_name["transformers Trainer (torch)"]
    print(f"\n{'contestant':34s} {'precision':>14s} {'train s':>8s} {'accuracy':>9s} "
          f"{'vs fixed':>9s} {'vs Trainer':>10s}")
    for result in results:
        name = result["contestant"]
        fixed = by_name.get(name.replace("bucketed_float32", "").replace("bucketed", "fixed"))
        versus_fixed = (f"{result['train_seconds'] / fixed['train_seconds']:.2f}x"
                        if fixed and "bucketed" in name else "")
        speedup = peer["train_seconds"] / result["train_seconds"]
        print(f"{name:34s} {result['precision']:>14s} {result['train_seconds']:8.1f} "
              f"{result['accuracy']:9.2%} "
              f"{versus_fixed:>9s} {speedup:9.2f}x")
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w", encoding="utf-8") as handle:
        json.dump({"date": time.strftime("%Y-%m-%d"), "max_train": args.max_train,
                   "results": results}, handle, indent=2)
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
