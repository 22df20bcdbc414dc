"""Light BERT on real data: a fine-tuned teacher, distilled students, a pruned model and a
small model fine-tuned without a teacher, side by side on held-out accuracy and served speed.

    KERAS_BACKEND=tensorflow python scripts/light_bert_rotten_tomatoes.py [--output runs/light_bert]

Rotten Tomatoes review sentences, 2,000 held out (the sentiment recipe's split):
  teacher       the embedded MiniLM-L6 fine-tuned as recipes/sentiment_rotten_tomatoes_cpu
  distilled L3  student_from_teacher(teacher, num_layers=3) (teacher layers 0, 3, 5), trained
                on the teacher's soft targets (T = 2, written once and streamed from disk)
                plus the labels
  distilled L2  the same with layers 0 and 5
  no teacher L3 the same 3-layer architecture from the pretrained (not fine-tuned) MiniLM's
                layers 0, 3, 5 and a fresh head, fine-tuned on the labels alone, same schedule
  pruned        the teacher without half its attention heads and half its FFN neurons
                (pruning.prune, scored on 512 training sentences), then one epoch of
                distillation from the teacher to recover
Students train 1 epoch at AdamW 1e-4 (10% warm-up, linear decay), batch 32, length 64.
Each model is exported (export_saved_model) and timed in one process, interleaved (A B C ...
per round, median): batch-1 p50 on single real sentences, raw text in, and batch-32
sentences/s. Writes <output>/light_bert.json, docs/light_bert_rotten_tomatoes.json and
docs/light_bert_rotten_tomatoes.png (accuracy against batch-1 latency). Stages whose output
exists are reused.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
SEQUENCE_LENGTH, BATCH, EPOCHS, STUDENT_RATE = 64, 32, 1, 1e-4


def _recipe(overrides=()):
    from keras_bert_suite.recipe_runner import load_recipe

    return load_recipe("sentiment_rotten_tomatoes_cpu", overrides=list(overrides))


def _data(preprocessor):
    from keras_bert_suite.tasks.classifier import recipe as classifier_recipe
    from keras_bert_suite.tasks.classifier.data import make_classification_dataset

    train, held_out = classifier_recipe.read_examples(_recipe()["data"])
    in_order = make_classification_dataset(train, BATCH, preprocessor=preprocessor)
    return train, held_out, in_order


def _accuracy(model, held_out):
    from keras_bert_suite.tasks.classifier.data import make_classification_dataset

    x = make_classification_dataset(held_out, 64, preprocessor=model.preprocessor).map(
        lambda x, y: x)
    logits = np.asarray(model.predict(x, verbose=0))
    return float((logits.argmax(-1) == held_out.labels).mean())


def _optimizer(steps):
    from keras_bert_suite.training import create_optimizer

    return create_optimizer("adamw", learning_rate=STUDENT_RATE, num_train_steps=steps,
                            num_warmup_steps=int(0.1 * steps))


def _stage(output, name, build):
    """Runs build() -> (model, info) once; later runs load <output>/<name>/model.keras."""
    from keras_bert_suite.tasks import load_model

    directory = os.path.join(output, name)
    path = os.path.join(directory, "model.keras")
    if os.path.exists(path):
        with open(os.path.join(directory, "info.json")) as f:
            return load_model(path), json.load(f)
    os.makedirs(directory, exist_ok=True)
    started = time.perf_counter()
    model, info = build()
    info["train_seconds"] = round(time.perf_counter() - started, 1)
    model.save(path)
    with open(os.path.join(directory, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
    return model, info


def train_models(output, log=print):
    import keras

    from keras_bert_suite import BertClassifier
    from keras_bert_suite.distillation import (
        BertDistiller, student_from_teacher, with_teacher_outputs, write_teacher_outputs)
    from keras_bert_suite.pruning import prune
    from keras_bert_suite.recipe_runner import run_recipe

    def fine_tune_teacher():
        summary = run_recipe(_recipe(), os.path.join(output, "teacher_run"), verbose=2)
        return summary["model"], {}

    teacher, teacher_info = _stage(output, "teacher", fine_tune_teacher)
    train, held_out, in_order = _data(teacher.preprocessor)
    steps = EPOCHS * int(np.ceil(len(train) / BATCH))
    logits_path = os.path.join(output, "teacher_logits.tfrecord")
    if not os.path.exists(logits_path):
        log("Writing the teacher's logits once")
        write_teacher_outputs(teacher, in_order, logits_path)

    def distilled_data():
        return with_teacher_outputs(in_order, logits_path, BATCH, shuffle_buffer=len(train),
                                    seed=0)

    def distil(student, with_teacher=False):
        keras.utils.set_random_seed(1234)
        distiller = BertDistiller(teacher if with_teacher else None, student, temperature=2.0)
        distiller.compile(optimizer=_optimizer(steps))
        distiller.fit(distilled_data(), epochs=EPOCHS, verbose=2)
        return student

    models, infos = {"teacher": teacher}, {"teacher": teacher_info}
    for layers in (3, 2):
        label = f"distilled L{layers}"
        models[label], infos[label] = _stage(
            output, f"distilled_l{layers}",
            lambda layers=layers: (distil(student_from_teacher(teacher, num_layers=layers)),
                                   {}))

    def no_teacher():
        keras.utils.set_random_seed(1234)
        pretrained = BertClassifier.from_preset(
            "minilm_l6_h384_uncased", num_classes=2, preprocessor=teacher.preprocessor,
            label_names=teacher.label_names)
        student = student_from_teacher(pretrained, num_layers=3)
        student.compile(optimizer=_optimizer(steps))
        data = in_order.unbatch().shuffle(len(train), seed=0).batch(BATCH)
        student.fit(data, epochs=EPOCHS, verbose=2)
        return student, {}

    models["no teacher L3"], infos["no teacher L3"] = _stage(output, "no_teacher_l3",
                                                             no_teacher)

    def pruned():
        calibration = (list(train.texts[:512]), np.asarray(train.labels[:512]))
        smaller = prune(teacher, calibration, head_fraction=0.5, ffn_fraction=0.5)
        before = _accuracy(smaller, held_out)
        return distil(smaller), {"accuracy_before_recovery": before}

    models["pruned 50%"], infos["pruned 50%"] = _stage(output, "pruned", pruned)
    return models, infos, held_out


def export_models(models, output):
    from keras_bert_suite.export import export_saved_model

    paths = {}
    for label, model in models.items():
        name = label.replace(" ", "_").replace("%", "pct").lower()
        base = os.path.join(output, "saved_models")
        existing = os.path.join(base, name, "1")
        paths[label] = existing if os.path.exists(existing) else export_saved_model(
            model, base, name=name, version=1)
    return paths


def time_served(paths, sentences, rounds=7, requests=40):
    """{label: {"p50_ms", "sentences_per_s_b32"}}: every SavedModel's serving_default on raw
    text, in one process, A B C ... per round (so machine load hits all alike)."""
    import tensorflow as tf

    serves = {label: tf.saved_model.load(path).signatures["serving_default"]
              for label, path in paths.items()}
    batches = [sentences[i:i + BATCH] for i in range(0, len(sentences) - BATCH + 1, BATCH)]
    for serve in serves.values():  # warm-up
        serve(text=tf.constant(batches[0]))
        serve(text=tf.constant(sentences[:1]))
    single, batched = {label: [] for label in serves}, {label: [] for label in serves}
    for round_index in range(rounds):
        for label, serve in serves.items():
            for i in range(requests):
                text = tf.constant([sentences[(round_index * requests + i) % len(sentences)]])
                start = time.perf_counter()
                serve(text=text)
                single[label].append(time.perf_counter() - start)
            for batch in batches[:3]:
                start = time.perf_counter()
                serve(text=tf.constant(batch))
                batched[label].append(time.perf_counter() - start)
    return {label: {"p50_ms": 1e3 * statistics.median(single[label]),
                    "sentences_per_s_b32": BATCH / statistics.median(batched[label])}
            for label in serves}


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for label, row in rows.items():
        axes.scatter(row["p50_ms"], 100 * row["accuracy"])
        axes.annotate(label, (row["p50_ms"], 100 * row["accuracy"]), textcoords="offset points",
                      xytext=(5, 3), fontsize=8)
    axes.set_xlabel("served batch-1 p50 latency, ms (raw text in, 2 CPU threads)")
    axes.set_ylabel("held-out accuracy, %")
    axes.set_title("Rotten Tomatoes: accuracy against latency")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main():
    import keras

    from keras_bert_suite.models.lora import parameter_count
    from keras_bert_suite.pruning.units import head_counts, neuron_counts

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="runs/light_bert")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if keras.backend.backend() != "tensorflow":
        sys.exit("Run with KERAS_BACKEND=tensorflow (the exports need it).")
    models, infos, held_out = train_models(args.output)
    rows = {}
    for label, model in models.items():
        rows[label] = {"accuracy": _accuracy(model, held_out),
                       "layers": model.encoder.num_layers,
                       "attention_heads": sum(head_counts(model.encoder)),
                       "ffn_neurons": sum(neuron_counts(model.encoder)),
                       "parameters": parameter_count(model.weights),
                       **infos[label]}
    paths = export_models(models, args.output)
    timings = time_served(paths, list(held_out.texts[:512]), rounds=args.rounds)
    teacher = timings["teacher"]
    for label in rows:
        rows[label].update(timings[label])
        rows[label]["p50_speedup"] = teacher["p50_ms"] / timings[label]["p50_ms"]
        rows[label]["b32_speedup"] = timings[label]["sentences_per_s_b32"] / teacher[
            "sentences_per_s_b32"]
        rows[label]["accuracy_vs_teacher_points"] = 100 * (rows[label]["accuracy"]
                                                           - rows["teacher"]["accuracy"])
    import platform
    import datetime

    results = {"date": datetime.date.today().isoformat(),
               "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
               "held_out": len(held_out), "sequence_length": SEQUENCE_LENGTH, "rows": rows}
    print(f"{'model':14s} {'acc %':>6s} {'vs T':>6s} {'p50 ms':>7s} {'x T':>5s} "
          f"{'b32 s/s':>8s} {'x T':>5s} {'params':>11s}")
    for label, row in rows.items():
        print(f"{label:14s} {100 * row['accuracy']:6.1f} {row['accuracy_vs_teacher_points']:+6.1f} "
              f"{row['p50_ms']:7.2f} {row['p50_speedup']:5.2f} {row['sentences_per_s_b32']:8.1f} "
              f"{row['b32_speedup']:5.2f} {row['parameters']:11,d}")
    for path in (os.path.join(args.output, "light_bert.json"),
                 os.path.join(DOCS, "light_bert_rotten_tomatoes.json")):
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
    plot(rows, os.path.join(DOCS, "light_bert_rotten_tomatoes.png"))


if __name__ == "__main__":
    main()
