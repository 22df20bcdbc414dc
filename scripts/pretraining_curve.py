"""Pretrains the CPU smoke recipe on real text and plots held-out MLM / NSP accuracy.

    python scripts/pretraining_curve.py [--set key=value ...] [--output runs/pretraining_curve]
    python scripts/pretraining_curve.py --plot-only   # redraw the image from the JSON

Writes docs/pretraining_curve.png and docs/pretraining_curve.json. The scores are on
held-out State of the Union addresses (`data.eval_fraction` of the files), with masks drawn
once, so every point scores the same predictions. NSP "chance" is the majority-class rate
of the held-out pairs: BERT's pair sampler makes a chunk of one long sentence always a
random-next pair, so the labels are not 50/50. The NSP ROC AUC (chance 0.5 whatever the
label balance) shows what the classifier has learned before its accuracy leaves the majority
rate: it ranks the held-out pairs by the model's "B is random" logit margin.
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
# Figure names in docs/ per recipe: from scratch, and continued from the MiniLM checkpoint.
CURVE_NAMES = {"pretrain_cpu_smoke": "pretraining_curve",
               "pretrain_cpu_continued_minilm": "pretraining_curve_minilm"}


def nsp_majority_rate(labels):
    return float(max(labels.mean(), 1 - labels.mean()))


def roc_auc(labels, scores):
    """P(score of a random-next pair > score of a true-next pair), ties count half.

    >>> roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    0.75
    """
    positive, negative = scores[labels == 1], scores[labels == 0]
    greater = (positive[:, None] > negative[None, :]).mean()
    ties = (positive[:, None] == negative[None, :]).mean()
    return float(greater + 0.5 * ties)


def nsp_auc_callback(evaluation):
    """A Keras callback: held-out NSP ROC AUC at the start and after every interval."""
    import keras

    labels = np.concatenate([keras.ops.convert_to_numpy(y["nsp_labels"]) for _, y in evaluation])

    class NspAuc(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.by_step = {}

        def _score(self):
            margins = []
            for x, _ in evaluation:
                logits = keras.ops.convert_to_numpy(self.model(x, training=False)["nsp_logits"])
                margins.append(logits[:, 1] - logits[:, 0])  # log-odds of "B is random"
            step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
            self.by_step[step] = roc_auc(labels, np.concatenate(margins))

        def on_train_begin(self, logs=None):
            if not self.by_step:
                self._score()

        def on_epoch_end(self, epoch, logs=None):
            self._score()

    return NspAuc(), labels


def plot(result, path):
    """Draws the figure at `path` (a .png) from a result dict (docs/<name>.json)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = result["steps"]
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    axes[0].plot(steps, result["eval_mlm_accuracy"], "o-", label="held-out")
    axes[0].set(title="Masked-LM accuracy", xlabel="step", ylabel="accuracy")
    axes[1].plot(steps, result["eval_nsp_accuracy"], "o-", label="held-out")
    axes[1].axhline(result["nsp_majority_rate"], color="gray", ls="--", label="majority class")
    axes[1].set(title="Next-sentence accuracy", xlabel="step", ylim=(0.3, 1.0))
    axes[2].plot(steps, result["eval_nsp_auc"], "o-", label="held-out")
    axes[2].axhline(0.5, color="gray", ls="--", label="chance")
    # Fixed ranges, so noise around chance does not look like a trend.
    axes[2].set(title="Next-sentence ROC AUC", xlabel="step", ylim=(0.3, 1.0))
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle(f"{result['recipe']} on State of the Union text ({result['backend']}, "
                    f"{result['train_seconds'] / 60:.1f} min on CPU, "
                    f"{result['eval_pairs']} held-out pairs)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def default_name(recipe):
    """docs/<name>.{png,json}: the smoke recipe keeps the original name."""
    return CURVE_NAMES.get(recipe, f"pretraining_curve_{recipe}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="pretrain_cpu_smoke")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--output", default="runs/pretraining_curve")
    parser.add_argument("--name", default=None,
                        help="write docs/NAME.{png,json} (default: pretraining_curve for "
                             "pretrain_cpu_smoke, pretraining_curve_minilm for "
                             "pretrain_cpu_continued_minilm)")
    parser.add_argument("--docs", default=DOCS, help="folder for the figure and JSON")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the image from docs/NAME.json, no training")
    args = parser.parse_args(argv)
    stem = os.path.join(args.docs, args.name or default_name(args.recipe))
    if args.plot_only:
        with open(stem + ".json") as f:
            result = json.load(f)
        plot(result, stem + ".png")
        return result

    import keras

    recipe = recipe_runner.load_recipe(args.recipe, overrides=args.set)
    shutil.rmtree(args.output, ignore_errors=True)  # a fresh run, not a resumed one
    # The same held-out batches the runner evaluates on (same files, seed and masks).
    _, evaluation = recipe_runner.build_datasets(
        recipe, recipe_runner.pretraining.recipe_tokenizer(recipe["model"]), log=lambda *_: None)
    auc, labels = nsp_auc_callback(evaluation)
    start = time.perf_counter()
    summary = recipe_runner.run_pretraining(recipe, args.output, callbacks=[auc], verbose=2)
    seconds = time.perf_counter() - start
    nsp_chance = nsp_majority_rate(labels)

    rows = [r for r in summary["history"] if "val_mlm_logits_accuracy" in r]
    steps = [r["step"] for r in rows]
    mlm = [r["val_mlm_logits_accuracy"] for r in rows]
    nsp = [r["val_nsp_logits_accuracy"] for r in rows]
    nsp_auc = [auc.by_step.get(step) for step in steps]
    result = {
        "recipe": recipe["name"], "overrides": args.set, "backend": keras.backend.backend(),
        "train_seconds": round(seconds, 1), "eval_pairs": int(labels.size),
        "eval_random_next_rate": float(labels.mean()), "nsp_majority_rate": nsp_chance,
        "steps": steps, "eval_mlm_accuracy": mlm, "eval_nsp_accuracy": nsp,
        "eval_nsp_auc": nsp_auc,
        "eval_mlm_perplexity": [r["val_mlm_logits_perplexity"] for r in rows],
        "eval_nsp_loss": [r["val_nsp_logits_loss"] for r in rows],
        "train_mlm_accuracy": [r.get("mlm_logits_accuracy") for r in rows],
        "train_nsp_accuracy": [r.get("nsp_logits_accuracy") for r in rows],
        "train_nsp_loss": [r.get("nsp_logits_loss") for r in rows],
    }
    os.makedirs(args.docs, exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)

    plot(result, stem + ".png")
    print(json.dumps({k: result[k] for k in ("steps", "eval_mlm_accuracy", "eval_nsp_accuracy",
                                             "eval_nsp_auc", "nsp_majority_rate",
                                             "train_seconds")}))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
