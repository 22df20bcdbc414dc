"""The BERT family's pretraining objectives side by side, as the papers compared them: the
same small architecture pretrained on the same real text with the same compute budget per
objective, then each fine-tuned (and the same architecture from random init) on the Rotten
Tomatoes split of `make demo` and on WNUT-16 NER.

    python scripts/compare_objectives.py [--steps 400] [--output runs/objectives]
    python scripts/compare_objectives.py --plot-only   # redraw the image from the JSON
    python scripts/compare_objectives.py --reference   # the same fine-tuning on a shape with
                                                       # real pretrained weights, and random

Pretraining: the CPU recipes pretrain_cpu_smoke (MLM + NSP), pretrain_cpu_roberta (MLM only),
pretrain_cpu_albert (n-gram MLM + SOP, shared layers), pretrain_cpu_electra and
pretrain_cpu_ltr: a 2-layer, 128-wide encoder. The corpus is the real text the project
fetches: the 233 State of the Union addresses, plus the TRAINING sentences of the two
fine-tuning sets as unlabelled text (Rotten Tomatoes review sentences grouped by movie,
WNUT-16 tweets in groups of 10; the held-out sentences never), as task-adaptive pretraining
does: State of the Union alone leaves most review and tweet words unseen, and their
embeddings all drift the same way under the tied softmax. The budget
is BERT's `--steps` steps in training FLOPs; an objective whose step costs more (ELECTRA's
generator) gets proportionally fewer steps. Every objective scores 20 positions per row
(LTR: 20 next tokens), so the LM head costs the same.
Fine-tuning: the same settings for every model (fine_tune_overrides below), attention
bidirectional (the LTR model's weights fine-tune with full attention, as its [CLS] would
otherwise see only itself). Writes docs/objectives_comparison.json and .png.
"""

import argparse
import json
import os
import shutil
import sys
import time

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
NAME = "objectives_comparison"
# objective -> its CPU recipe (all share the model, corpus, batch and learning rate).
RECIPES = {"mlm_nsp": "pretrain_cpu_smoke", "mlm": "pretrain_cpu_roberta",
           "mlm_sop": "pretrain_cpu_albert", "electra": "pretrain_cpu_electra",
           "ltr": "pretrain_cpu_ltr"}
LABELS = {"mlm_nsp": "MLM + NSP (BERT)", "mlm": "MLM (RoBERTa)",
          "mlm_sop": "MLM + SOP, shared layers (ALBERT)", "electra": "ELECTRA",
          "ltr": "left-to-right LM", "random": "random init"}
ARCHITECTURE = "bert_uncased_L-2_H-128_A-2"
# The fine-tuning settings every model gets (a tiny model wants a larger rate than MiniLM's).
FINE_TUNE = {
    "sentiment_rotten_tomatoes_cpu": ["training.epochs=2",
                                      "training.optimizer.learning_rate=5e-4"],
    "ner_wnut16_cpu": ["training.epochs=5", "training.optimizer.learning_rate=1e-3"],
}
ENCODER = {"dropout": 0.1, "causal": False, "max_sequence_length": 128}
# --reference: what real pretraining gives through the same fine-tuning recipes, a shape with
# released weights (all-MiniLM-L6-v2) against that shape from random init; 1e-4 suits both (a
# random 6-layer model diverges at the tiny model's 5e-4 / 1e-3).
REFERENCE = "minilm_l6_h384_uncased"
REFERENCE_FINE_TUNE = {
    "sentiment_rotten_tomatoes_cpu": ["training.epochs=2",
                                      "training.optimizer.learning_rate=1e-4"],
    "ner_wnut16_cpu": ["training.epochs=5", "training.optimizer.learning_rate=1e-4"],
}
REFERENCE_RUNS = {"random_init": False, "pretrained": True}  # label -> load_weights


def training_flops_per_row(config, sequence_length, predictions, vocabulary_size,
                           generator=None):
    """Training FLOPs of one row: 3 x forward (backward ~2 x forward). Forward per token:
    2 x the non-embedding weights + the attention scores and context (4 x T x H per
    layer), plus the LM head at the scored positions; ELECTRA adds its generator (run on
    the same row) and the detector's per-token head."""
    def encoder(c):
        hidden, inner, layers = c["hidden_dim"], c["intermediate_dim"], c["num_layers"]
        per_token = layers * (2 * (4 * hidden * hidden + 2 * hidden * inner)
                              + 4 * sequence_length * hidden)
        return sequence_length * per_token

    def lm_head(c):
        width = c.get("embedding_dim") or c["hidden_dim"]
        return predictions * 2 * (c["hidden_dim"] * width + width * vocabulary_size)

    forward = encoder(config)
    if generator is None:
        forward += lm_head(config)
    else:
        forward += encoder(generator) + lm_head(generator)
        forward += sequence_length * 2 * config["hidden_dim"] * (config["hidden_dim"] + 1)
    return 3 * forward


def write_corpus(directory):
    """The pretraining corpus as paragraph_per_line files (a blank line between documents);
    returns their glob. The held-out splits are those the fine-tuning recipes hold out."""
    import bz2
    import csv
    import random


    from keras_bert_suite.data import corpora
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import (
        load_rotten_tomatoes, split_held_out)
    from keras_bert_suite.tasks.token_classifier.conll import read_conll

    os.makedirs(directory, exist_ok=True)
    for path in corpora.sotu_files():
        shutil.copy(path, directory)
    held_out = {name: recipe_value(name, "data.held_out") for name in FINE_TUNE}
    seed = {name: recipe_value(name, "data.seed") for name in FINE_TUNE}

    # Rotten Tomatoes: the recipe's training split, each movie's sentences one document.
    with bz2.open(corpora.fetch_rotten_tomatoes(), "rt", encoding="utf-8") as f:
        reviews = [(row["text"], row["movie_name"]) for row in csv.DictReader(f)
                   if row["category"] in ("fresh", "rotten")]
    texts, labels = load_rotten_tomatoes()
    assert texts == [text for text, _ in reviews]  # the same sentences, the same order
    (train, _), _ = split_held_out(list(range(len(texts))), labels,
                                   held_out=held_out["sentiment_rotten_tomatoes_cpu"],
                                   seed=seed["sentiment_rotten_tomatoes_cpu"])
    movies = {}
    for index in sorted(train):
        movies.setdefault(reviews[index][1], []).append(reviews[index][0])
    _write_documents(directory, "rotten_tomatoes_train", list(movies.values()), 20)

    # WNUT-16: the token classifier recipe's split (a seeded shuffle, the first held out).
    sentences = read_conll(corpora.fetch_wnut16())
    order = list(range(len(sentences)))
    random.Random(seed["ner_wnut16_cpu"]).shuffle(order)
    kept = sorted(order[held_out["ner_wnut16_cpu"]:])
    tweets = [" ".join(sentences[i].words) for i in kept]
    _write_documents(directory, "wnut16_train", [tweets[i:i + 10] for i in
                                                 range(0, len(tweets), 10)], 5)
    return os.path.join(directory, "*.txt")


def _write_documents(directory, name, documents, num_files):
    # Several files, so the recipe's held-out fraction of files takes some of each source.
    for index in range(num_files):
        with open(os.path.join(directory, f"{name}_{index:02d}.txt"), "w") as f:
            f.write("\n\n".join("\n".join(lines) for lines in documents[index::num_files])
                    + "\n")


def recipe_value(name, key):
    from keras_bert_suite import recipe_runner

    value = recipe_runner.load_recipe(name)
    for part in key.split("."):
        value = value[part]
    return value


def pretrain(name, steps_for, corpus, output, log):
    from keras_bert_suite import recipe_runner

    recipe = recipe_runner.load_recipe(RECIPES[name])
    steps = steps_for(name, recipe)
    interval = max(steps // 4, 1)
    steps = interval * 4
    recipe = recipe_runner.load_recipe(RECIPES[name], overrides=[
        f"data.corpus={json.dumps([corpus])}", f"training.num_train_steps={steps}",
        f"training.checkpoint_every_n_steps={interval}",
        f"training.optimizer.num_warmup_steps={max(steps // 10, 1)}"])
    directory = os.path.join(output, name)
    shutil.rmtree(directory, ignore_errors=True)
    started = time.perf_counter()
    summary = recipe_runner.run_pretraining(recipe, directory, verbose=0, log=log)
    return {"steps": steps, "seconds": round(time.perf_counter() - started, 1),
            "history": summary["history"], "preset": summary["preset_dir"]}


def fine_tune(preset, load_weights, output, log, settings=None, encoder=ENCODER):
    from keras_bert_suite import recipe_runner

    scores = {}
    for recipe_name, overrides in (settings or FINE_TUNE).items():
        recipe = recipe_runner.load_recipe(recipe_name, overrides=[
            f"model.preset={json.dumps(preset)}", f"model.load_weights={json.dumps(load_weights)}",
            *([f"model.encoder_overrides={json.dumps(encoder)}"] if encoder else []),
            *overrides])
        directory = os.path.join(output, recipe_name)
        shutil.rmtree(directory, ignore_errors=True)
        metrics = recipe_runner.run_finetuning(recipe, directory, verbose=0, log=log)["metrics"]
        scores[recipe_name] = metrics
    return scores


def step_budget(steps):
    """steps_for(objective, recipe): BERT's `steps` in FLOPs, spent by each objective."""
    from keras_bert_suite.models.encoder import BertEncoder

    architecture = BertEncoder.from_preset(ARCHITECTURE, load_weights=False).get_config()

    def flops(name, recipe):
        data = recipe["data"]
        generator = None
        if name == "electra":
            size = recipe["model"]["generator_size"]
            generator = {**architecture, **{key: max(1, int(architecture[key] * size)) for key in
                                            ("hidden_dim", "intermediate_dim", "num_heads")},
                         "embedding_dim": architecture.get("embedding_dim")
                         or architecture["hidden_dim"]}
        return training_flops_per_row(architecture, data["sequence_length"],
                                      data["max_predictions_per_seq"],
                                      architecture["vocabulary_size"], generator) \
            * recipe["training"]["batch_size"]

    from keras_bert_suite import recipe_runner

    bert = flops("mlm_nsp", recipe_runner.load_recipe(RECIPES["mlm_nsp"]))
    budget = steps * bert

    def steps_for(name, recipe):
        return max(4, int(budget // flops(name, recipe)))

    return steps_for, flops, budget


def run(args):
    log = print
    results = {"steps": args.steps, "architecture": ARCHITECTURE, "objectives": {}}
    previous = _read() if os.path.exists(os.path.join(DOCS, f"{NAME}.json")) else {}
    if "reference" in previous:  # --reference's runs stay
        results["reference"] = previous["reference"]
    steps_for, flops, budget = step_budget(args.steps)
    results["budget_flops"] = budget
    from keras_bert_suite import recipe_runner

    corpus = write_corpus(os.path.join(args.output, "corpus"))
    for name in RECIPES:
        log(f"=== pretraining: {LABELS[name]} ===")
        pretrained = pretrain(name, steps_for, corpus, os.path.join(args.output, "pretrain"),
                              log)
        pretrained["flops"] = pretrained["steps"] * flops(
            name, recipe_runner.load_recipe(RECIPES[name]))
        log(f"=== fine-tuning: {LABELS[name]} ===")
        pretrained["fine_tuning"] = fine_tune(pretrained.pop("preset"), True,
                                              os.path.join(args.output, "finetune", name), log)
        results["objectives"][name] = pretrained
        _write(results)
    log("=== fine-tuning: random init ===")
    results["objectives"]["random"] = {"fine_tuning": fine_tune(
        ARCHITECTURE, False, os.path.join(args.output, "finetune", "random"), log)}
    _write(results)
    plot(results)
    print(table(results))


def reference(args):
    """Fine-tunes REFERENCE from random init and from its released weights with the same
    settings; adds them to the JSON as "reference"."""
    results = _read()
    results["reference"] = {"preset": REFERENCE, "fine_tuning_settings": REFERENCE_FINE_TUNE}
    for label, load_weights in REFERENCE_RUNS.items():
        print(f"=== fine-tuning: {REFERENCE}, {label.replace('_', ' ')} ===")
        results["reference"][label] = {"fine_tuning": fine_tune(
            REFERENCE, load_weights, os.path.join(args.output, "reference", label), print,
            settings=REFERENCE_FINE_TUNE, encoder=None)}
        _write(results)
    print(table(results))


def _read():
    with open(os.path.join(DOCS, f"{NAME}.json")) as f:
        return json.load(f)


def _write(results):
    with open(os.path.join(DOCS, f"{NAME}.json"), "w") as f:
        json.dump(results, f, indent=1)


def _scores(entry):
    tuning = entry["fine_tuning"]
    return (tuning["sentiment_rotten_tomatoes_cpu"]["accuracy"],
            tuning["ner_wnut16_cpu"]["entity_f1"])


def table(results):
    rows = ["| objective | pretraining steps | wall-clock | training FLOPs | Rotten Tomatoes "
            "accuracy | WNUT-16 entity F1 |", "|---|---|---|---|---|---|"]
    for name, entry in results["objectives"].items():
        accuracy, f1 = _scores(entry)
        if name == "random":
            rows.append(f"| {LABELS[name]} | - | - | - | {accuracy:.2%} | {f1:.2%} |")
        else:
            rows.append(f"| {LABELS[name]} | {entry['steps']} | {entry['seconds']:.0f} s | "
                        f"{entry['flops']:.2e} | {accuracy:.2%} | {f1:.2%} |")
    reference = results.get("reference", {})
    for label in REFERENCE_RUNS:
        if label in reference:
            accuracy, f1 = _scores(reference[label])
            rows.append(f"| {REFERENCE}, {label.replace('_', ' ')} (--reference settings) "
                        f"| - | - | - | {accuracy:.2%} | {f1:.2%} |")
    return "\n".join(rows)


def plot(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (curves, bars) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, entry in results["objectives"].items():
        if name == "random":
            continue
        rows = [row for row in entry["history"] if "val_loss" in row]
        first = rows[0]["val_loss"]
        curves.plot([row["step"] / entry["steps"] for row in rows],
                    [row["val_loss"] / first for row in rows], marker="o", label=LABELS[name])
    curves.set_xlabel("fraction of the compute budget")
    curves.set_ylabel("held-out loss / its value at step 0")
    curves.set_title("Pretraining (held-out corpus files)")
    curves.legend(fontsize=8)
    names = list(results["objectives"])
    scores = [_scores(results["objectives"][name]) for name in names]
    positions = range(len(names))
    bars.bar([p - 0.2 for p in positions], [s[0] for s in scores], 0.4,
             label="Rotten Tomatoes accuracy")
    bars.bar([p + 0.2 for p in positions], [s[1] for s in scores], 0.4,
             label="WNUT-16 entity F1")
    bars.set_xticks(list(positions), [LABELS[n].split(" (")[0] for n in names], rotation=20,
                    fontsize=8)
    bars.set_title("Fine-tuned, held out")
    bars.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(os.path.join(DOCS, f"{NAME}.png"), dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400,
                        help="BERT's pretraining steps; the FLOP budget of every objective")
    parser.add_argument("--output", default="runs/objectives")
    parser.add_argument("--plot-only", action="store_true")
    parser.add_argument("--reference", action="store_true",
                        help=f"only fine-tune {REFERENCE} from random init and from its "
                             "released weights, into the JSON beside the objectives")
    args = parser.parse_args(argv)
    if args.reference:
        return reference(args)
    if args.plot_only:
        results = _read()
        plot(results)
        print(table(results))
        return
    run(args)


if __name__ == "__main__":
    sys.exit(main())
