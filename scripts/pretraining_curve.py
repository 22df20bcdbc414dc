"""Pretrains the CPU smoke recipe on real text and plots held-out MLM / NSP accuracy.

    python scripts/pretraining_curve.py [--set key=value ...] [--output runs/pretraining_curve]

Writes docs/pretraining_curve.png and docs/pretraining_curve.json. The accuracies are on
held-out State of the Union addresses (`data.eval_fraction` of the files), with masks drawn
once, so every point scores the same predictions. NSP "chance" is the majority-class rate
of the held-out pairs: BERT's pair sampler makes a chunk of one long sentence always a
random-next pair, so the labels are not 50/50.
"""

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

from keras_bert_suite import recipe_runner

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


def nsp_majority_rate(evaluation):
    labels = np.concatenate([y["nsp_labels"].numpy() for _, y in evaluation])
    return float(max(labels.mean(), 1 - labels.mean())), int(labels.size)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="pretrain_cpu_smoke")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--output", default="runs/pretraining_curve")
    args = parser.parse_args(argv)

    import keras
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recipe = recipe_runner.load_recipe(args.recipe, overrides=args.set)
    shutil.rmtree(args.output, ignore_errors=True)  # a fresh run, not a resumed one
    start = time.perf_counter()
    summary = recipe_runner.run_pretraining(recipe, args.output, verbose=2)
    seconds = time.perf_counter() - start
    _, evaluation = recipe_runner.build_datasets(
        recipe, recipe_runner.pretraining.recipe_tokenizer(recipe["model"]), log=lambda *_: None)
    nsp_chance, num_pairs = nsp_majority_rate(evaluation)

    rows = [r for r in summary["history"] if "val_mlm_logits_accuracy" in r]
    steps = [r["step"] for r in rows]
    mlm = [r["val_mlm_logits_accuracy"] for r in rows]
    nsp = [r["val_nsp_logits_accuracy"] for r in rows]
    result = {
        "recipe": recipe["name"], "overrides": args.set, "backend": keras.backend.backend(),
        "train_seconds": round(seconds, 1), "eval_pairs": num_pairs,
        "nsp_majority_rate": nsp_chance,
        "steps": steps, "eval_mlm_accuracy": mlm, "eval_nsp_accuracy": nsp,
        "eval_mlm_perplexity": [r["val_mlm_logits_perplexity"] for r in rows],
        "train_mlm_accuracy": [r.get("mlm_logits_accuracy") for r in rows],
        "train_nsp_accuracy": [r.get("nsp_logits_accuracy") for r in rows],
    }
    os.makedirs(DOCS, exist_ok=True)
    with open(os.path.join(DOCS, "pretraining_curve.json"), "w") as f:
        json.dump(result, f, indent=1)

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    axes[0].plot(steps, mlm, "o-", label="held-out")
    axes[0].set(title="Masked-LM accuracy", xlabel="step", ylabel="accuracy")
    axes[1].plot(steps, nsp, "o-", label="held-out")
    axes[1].axhline(nsp_chance, color="gray", ls="--", label="majority class")
    axes[1].set(title="Next-sentence accuracy", xlabel="step")
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle(f"{recipe['name']} on State of the Union text "
                    f"({keras.backend.backend()}, {seconds / 60:.1f} min on CPU)")
    figure.tight_layout()
    figure.savefig(os.path.join(DOCS, "pretraining_curve.png"), dpi=110)
    print(json.dumps({k: result[k] for k in ("steps", "eval_mlm_accuracy", "eval_nsp_accuracy",
                                             "nsp_majority_rate", "train_seconds")}))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
