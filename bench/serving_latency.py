"""Serving latency, raw text -> prediction: our SavedModel vs transformers and ONNX Runtime.

    python bench/serving_latency.py [--rounds 10] [--threads 2] [--no-rest] [--ours-only]
    python bench/serving_latency.py --baseline-ref REF [--rounds 5]

Model: BertClassifier.from_preset("minilm_l6_h384_uncased", num_classes=2,
sequence_length=128) — the real all-MiniLM-L6-v2 encoder weights with a random 2-class head
(the head's values change no timing). transformers gets the same network:
BertForSequenceClassification from the same checkpoint directory with our head's weights
copied in, so both sides compute the same probabilities (checked: "max |p diff|").

Contestants, each in its own process, A B A B interleaved (see _workers.py):
  savedmodel   export_saved_model(...) loaded by a process that imports only tensorflow and
               tensorflow_text; `signatures["serving_default"](text=...)` on raw strings.
  pipeline     transformers.pipeline("text-classification", model, fast tokenizer), torch CPU.
  direct       the same tokenizer + model called directly (no pipeline overhead).
  ort fp32     Hugging Face `tokenizers` (the fast tokenizer's Rust core, called directly) +
               ONNX Runtime on the same network exported from transformers (bench/onnx_peers.py).
  ort int8     the same with ONNX Runtime's dynamic int8 quantization of that export.
  savedmodel bf16  the same with export_saved_model(..., precision="bfloat16").
  savedmodel int8  the same with precision="int8" (int8 kernels computed in float32).
  savedmodel int8_vnni  precision="int8_vnni", calibrated on 256 other reviews; only where
               the CPU has VNNI / AMX (the export refuses it elsewhere).
  rest         the fp32 SavedModel behind `kbs serve`, called with RestClient (HTTP + JSON).
--ours-only times our SavedModels alone (no transformers, ONNX Runtime or rest workers).
--baseline-ref REF (implies --ours-only) times the same classifier (same encoder weights, same
head, same calibration texts) exported by the current code and by the code at git ref REF
(checked out in a temporary `git worktree add --detach`, exported in a subprocess with
PYTHONPATH on it, removed afterwards), each precision's two SavedModels A B A B; it prints
new/old ratios and the max |p diff| between the two exports of each precision.
Inputs are real Rotten Tomatoes review sentences. Batch 1: p50/p99 of single requests;
batch 32: sentences/s (median of batches); our SavedModels also answer batches of 32 x 128
packed tokens on their `encoder_inputs` signature (no padding trimmed: b32x128 ms, median).
Every process runs with the same thread budget
(--threads intra-op threads, 1 inter-op thread; see _workers.thread_env; and
OMP_WAIT_POLICY=PASSIVE, see run()). The export trims each batch's padding to its longest
row (tasks/classifier/serving.py `trim_padding`), as the transformers tokenizer pads to the longest.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402
import onnx_peers  # noqa: E402

PRESET, NUM_CLASSES, LENGTH, BATCH = "minilm_l6_h384_uncased", 2, 128, 32
SENTENCES, CHECK = 512, 64  # distinct sentences cycled through; rows compared across sides
MODEL_NAME = "sentiment"
REFERENCES = ("ort fp32", "pipeline")  # the peers every row is divided by
# Our exports (export_saved_model(..., precision=)), fp32 last: `kbs serve` (the rest row)
# serves the newest version. int8_vnni only where this CPU has VNNI / AMX.
PRECISIONS = ("int8_vnni", "int8", "bfloat16", "float32")
LABELS = {"float32": "savedmodel", "bfloat16": "savedmodel bf16", "int8": "savedmodel int8",
          "int8_vnni": "savedmodel int8_vnni"}
CALIBRATION = 256  # other reviews than the timed ones, for the int8_vnni export's calibration
BEFORE = "before"  # the label suffix of a --baseline-ref export
# Older refs' name for a precision: the calibrated VNNI export was "int8" before the portable
# int8 export existed (the baseline export falls back to it when the ref rejects the name).
OLDER_NAMES = {"int8_vnni": "int8"}


def _cycle(items):
    while True:
        yield from items


def _contestants(label, predict, sentences):
    """{label b1: one request of one sentence, label b32: one request of 32 sentences}."""
    singles = _cycle(sentences)
    batches = _cycle([sentences[i:i + BATCH] for i in range(0, len(sentences), BATCH)])
    return {f"{label} b1": lambda: predict([next(singles)]),
            f"{label} b32": lambda: predict(next(batches))}


def _read_work(work_dir):
    with open(os.path.join(work_dir, "sentences.json")) as f:
        return json.load(f)


# === the export (orchestrator side, a TensorFlow-backend Keras process) ===

def export_worker(work_dir):
    import keras
    import numpy as np

    import keras_bert_suite
    from keras_bert_suite.presets import packaged_checkpoint_dir
    from keras_bert_suite.export.cpu_features import int8_vnni_flags
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
    from keras_bert_suite.export import export_saved_model

    texts, _ = load_rotten_tomatoes()
    rng = np.random.default_rng(0)
    chosen = rng.choice(len(texts), SENTENCES + CALIBRATION, replace=False)
    sentences = [texts[i] for i in chosen[:SENTENCES]]
    calibration = [texts[i] for i in chosen[SENTENCES:]]
    with open(os.path.join(work_dir, "sentences.json"), "w") as f:
        json.dump(sentences, f)
    with open(os.path.join(work_dir, "calibration.json"), "w") as f:  # for a baseline export
        json.dump(calibration, f)
    with open(os.path.join(work_dir, "checkpoint.txt"), "w") as f:  # the peer's weights
        f.write(packaged_checkpoint_dir("all-MiniLM-L6-v2"))
    keras.utils.set_random_seed(0)
    model = keras_bert_suite.BertClassifier.from_preset(
        PRESET, num_classes=NUM_CLASSES, sequence_length=LENGTH)
    kernel, bias = model.classifier_head.get_weights()
    np.savez(os.path.join(work_dir, "head.npz"), kernel=kernel, bias=bias)
    base_dir = os.path.join(work_dir, "saved_models")
    paths = {precision: export_saved_model(
        model, base_dir=base_dir, name=MODEL_NAME, precision=precision,
        calibration_texts=calibration if precision == "int8_vnni" else None)
             for precision in PRECISIONS if precision != "int8_vnni" or int8_vnni_flags()}
    print(json.dumps(paths), flush=True)


def baseline_export_worker(work_dir, precisions):
    """The export worker's classifier exported by the keras_bert_suite on PYTHONPATH (the
    --baseline-ref checkout): the same preset weights, the head from head.npz, the same
    calibration texts. Written to work_dir/baseline_models."""
    import numpy as np

    import keras_bert_suite
    from keras_bert_suite.export import export_saved_model

    model = keras_bert_suite.BertClassifier.from_preset(
        PRESET, num_classes=NUM_CLASSES, sequence_length=LENGTH)
    head = np.load(os.path.join(work_dir, "head.npz"))
    model.classifier_head.set_weights([head["kernel"], head["bias"]])
    with open(os.path.join(work_dir, "calibration.json")) as f:
        calibration = json.load(f)
    paths = {}
    for precision in precisions:
        names = [precision] + ([OLDER_NAMES[precision]] if precision in OLDER_NAMES else [])
        for name in names:
            try:  # the name is checked before any file is written
                paths[precision] = export_saved_model(
                    model, base_dir=os.path.join(work_dir, "baseline_models"), name=MODEL_NAME,
                    precision=name,
                    calibration_texts=calibration if precision == "int8_vnni" else None)
                break
            except ValueError:
                if name == names[-1]:
                    raise
    print(json.dumps({"package": keras_bert_suite.__file__, "paths": paths}), flush=True)


# === workers ===

def savedmodel_worker(work_dir, export_dir, threads, label):
    sys.modules["keras_bert_suite"] = None  # as on a serving host: TF + tf-text only
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]

    def predict(texts):
        return serve(text=tf.constant(texts))["probabilities"].numpy()

    packed = tf.saved_model.load(export_dir).signatures["encoder_inputs"]
    rng = np.random.default_rng(0)
    full = {"token_ids": tf.constant(rng.integers(1000, 30000, (BATCH, LENGTH)), tf.int32),
            "segment_ids": tf.zeros((BATCH, LENGTH), tf.int32),
            "padding_mask": tf.ones((BATCH, LENGTH), tf.int32)}

    sentences = _read_work(work_dir)
    np.save(os.path.join(work_dir, f"{label}.npy"), predict(sentences[:CHECK]))
    _workers.serve({**_contestants(label, predict, sentences),
                    f"{label} b32x128": lambda: [v.numpy() for v in packed(**full).values()]})


def _peer_model(work_dir):
    """transformers' BertForSequenceClassification with our head's weights, and its fast
    tokenizer: the same network as our export, so both sides compute the same answers."""
    import numpy as np
    import torch
    import transformers

    with open(os.path.join(work_dir, "checkpoint.txt")) as f:
        checkpoint = f.read()
    model = transformers.BertForSequenceClassification.from_pretrained(
        checkpoint, num_labels=NUM_CLASSES).eval()
    head = np.load(os.path.join(work_dir, "head.npz"))
    with torch.no_grad():
        model.classifier.weight.copy_(torch.tensor(head["kernel"].T))
        model.classifier.bias.copy_(torch.tensor(head["bias"]))
    return model, transformers.AutoTokenizer.from_pretrained(checkpoint, use_fast=True)


def transformers_worker(work_dir, threads):
    import numpy as np
    import torch
    import transformers

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    model, tokenizer = _peer_model(work_dir)
    pipe = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer,
                                 device="cpu")

    def pipeline_predict(texts):  # as documented: a list in, one dict per text out
        return pipe(texts, batch_size=len(texts), truncation=True, max_length=LENGTH)

    def direct_predict(texts):
        with torch.inference_mode():
            encoded = tokenizer(texts, padding=True, truncation=True, max_length=LENGTH,
                                return_tensors="pt")
            return model(**encoded).logits.softmax(-1).numpy()

    sentences = _read_work(work_dir)
    np.save(os.path.join(work_dir, "transformers.npy"), direct_predict(sentences[:CHECK]))
    _workers.serve({**_contestants("pipeline", pipeline_predict, sentences),
                    **_contestants("direct", direct_predict, sentences)})


def onnxruntime_worker(work_dir, threads):
    import numpy as np

    model, tokenizer = _peer_model(work_dir)
    sessions = onnx_peers.onnx_sessions(model, threads, work_dir)
    fast = tokenizer.backend_tokenizer  # the Rust `tokenizers.Tokenizer`, no Python wrapper
    fast.enable_truncation(LENGTH)
    fast.enable_padding(pad_id=tokenizer.pad_token_id)

    def predictor(session):
        def predict(texts):
            encodings = fast.encode_batch(texts)
            feed = onnx_peers.onnx_feed(*(np.array([getattr(e, name) for e in encodings])
                                          for name in ("ids", "attention_mask", "type_ids")))
            logits = session.run(None, feed)[0]
            odds = np.exp(logits - logits.max(-1, keepdims=True))
            return odds / odds.sum(-1, keepdims=True)
        return predict

    sentences = _read_work(work_dir)
    contestants = {}
    for precision, session in sessions.items():
        predict = predictor(session)
        np.save(os.path.join(work_dir, f"ort_{precision}.npy"), predict(sentences[:CHECK]))
        contestants.update(_contestants(f"ort {precision}", predict, sentences))
    _workers.serve(contestants)


def rest_worker(work_dir, base_dir):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, repo)
    from keras_bert_suite.serving.client import RestClient

    server = subprocess.Popen(  # `kbs serve`, as a user starts it
        [sys.executable, "-m", "keras_bert_suite.cli", "serve", "--model_base_path", base_dir,
         "--port", "0"], stdout=subprocess.PIPE, text=True, cwd=repo)
    try:
        url = None
        for line in server.stdout:
            if line.startswith("REST at "):
                url = line.split()[2].split("/v1/")[0]
                break
        if url is None:
            raise RuntimeError("kbs serve exited before printing its URL")
        client = RestClient(url)

        def predict(texts):
            return client.predict(MODEL_NAME, instances=texts)

        _workers.serve(_contestants("rest", predict, _read_work(work_dir)))
    finally:
        server.terminate()
        server.wait(timeout=30)


# === orchestrator ===

def _percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def _baseline_exports(script, work_dir, ref, precisions, env):
    """{precision: SavedModel dir} exported by the code at git `ref` (see baseline_export_worker);
    the ref's checkout is removed again before this returns."""
    repo = os.path.dirname(os.path.dirname(script))
    checkout = os.path.join(work_dir, "baseline_checkout")
    subprocess.run(["git", "-C", repo, "worktree", "add", "--detach", checkout, ref],
                   check=True, capture_output=True, text=True)
    try:
        exporter = subprocess.run(
            [sys.executable, script, "--worker", "baseline-export", "--work-dir", work_dir,
             "--precisions", *precisions],
            env={**os.environ, **env, "KERAS_BACKEND": "tensorflow", "PYTHONPATH": checkout},
            capture_output=True, text=True, check=False, cwd=checkout)
    finally:
        subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", checkout],
                       check=True, capture_output=True, text=True)
    if exporter.returncode:
        raise RuntimeError(f"baseline export failed:\n{exporter.stderr[-3000:]}")
    answer = json.loads(exporter.stdout.strip().splitlines()[-1])
    if not answer["package"].startswith(checkout + os.sep):  # the ref's code, not ours
        raise RuntimeError(f"baseline export imported {answer['package']}, not {checkout}")
    return answer["paths"]


def run(rounds, threads, rest, requests_per_round, peers=True, baseline_ref=None):
    script = os.path.abspath(__file__)
    # OMP_WAIT_POLICY=PASSIVE: torch's OpenMP threads otherwise spin at barriers, and on a
    # loaded machine a descheduled partner thread made batch-1 torch calls 10-30x slower
    # (1 s instead of 40 ms). TensorFlow's thread pool is not OpenMP; the setting only helps
    # the peer.
    env = {**_workers.thread_env(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    with tempfile.TemporaryDirectory() as work_dir:
        exporter = subprocess.run(
            [sys.executable, script, "--worker", "export", "--work-dir", work_dir],
            env={**os.environ, **env, "KERAS_BACKEND": "tensorflow"}, capture_output=True,
            text=True, check=False)
        if exporter.returncode:
            raise RuntimeError(f"export failed:\n{exporter.stderr[-3000:]}")
        export_dirs = json.loads(exporter.stdout.strip().splitlines()[-1])
        export_dir = export_dirs["float32"]
        common = ["--work-dir", work_dir, "--threads", str(threads)]
        # (label, SavedModel dir) of each savedmodel worker; with a baseline, each precision's
        # new and old exports side by side (the portable int8 has no older counterpart).
        contestants = [(LABELS[precision], path) for precision, path in export_dirs.items()]
        if baseline_ref:
            before = _baseline_exports(script, work_dir, baseline_ref,
                                       [p for p in export_dirs if p != "int8"], env)
            contestants = [pair for precision, path in before.items() for pair in (
                (LABELS[precision], export_dirs[precision]),
                (f"{LABELS[precision]} {BEFORE}", path))]
        workers = [
            _workers.Worker([script, "--worker", "savedmodel", "--export-dir", path, "--label",
                             label, *common], env)
            for label, path in contestants]
        if peers:
            workers += [_workers.Worker([script, "--worker", kind, *common], env)
                        for kind in ("transformers", "onnxruntime")]
        if rest:
            workers.append(_workers.Worker(
                [script, "--worker", "rest", "--export-dir", os.path.dirname(
                    os.path.dirname(export_dir)), *common], env))
        import numpy as np

        ours = np.load(os.path.join(work_dir, "savedmodel.npy"))
        # Max |probability difference| of each export (and ONNX Runtime) against transformers,
        # or against our fp32 export with --ours-only.
        reference = "transformers.npy" if peers else "savedmodel.npy"
        peer = np.load(os.path.join(work_dir, reference))
        agreement = {"reference": reference.removesuffix(".npy"), "sentences": len(ours),
                     "same_label": float((ours.argmax(-1) == peer.argmax(-1)).mean())}
        compared = [label for label, _ in contestants]
        if peers:
            compared += ["ort_fp32", "ort_int8"]
        for label in compared:
            got = np.load(os.path.join(work_dir, f"{label}.npy"))
            agreement[label] = float(np.abs(got - peer).max())
        if baseline_ref:  # each new export against the same precision's old one
            agreement[BEFORE] = {label: float(np.abs(
                np.load(os.path.join(work_dir, f"{label}.npy"))
                - np.load(os.path.join(work_dir, f"{label} {BEFORE}.npy"))).max())
                for label, _ in contestants if not label.endswith(BEFORE)}
        samples = {}
        try:
            for round_index in range(rounds):  # A B B A: every contestant sees the same
                # machine load, and each goes first as often as second (a pair's first
                # request may pay for what the other left in the caches)
                for worker in workers if round_index % 2 == 0 else workers[::-1]:
                    for name in worker.names:
                        repeats = requests_per_round if name.endswith("b1") else 3
                        samples.setdefault(name, []).extend(worker.samples(name, repeats))
        finally:
            for worker in workers:
                worker.close()
    return samples, agreement


def summarize(samples):
    rows = {}
    for label in dict.fromkeys(name.rsplit(" ", 1)[0] for name in samples):
        single, batch = samples[f"{label} b1"], samples[f"{label} b32"]
        rows[label] = {"p50_ms": 1e3 * statistics.median(single),
                       "p99_ms": 1e3 * _percentile(single, 99),
                       "requests": len(single),
                       "sentences_per_s_b32": BATCH / statistics.median(batch),
                       "batches": len(batch)}
        if f"{label} b32x128" in samples:  # our exports: 32 x 128 packed tokens
            rows[label]["b32x128_ms"] = 1e3 * statistics.median(samples[f"{label} b32x128"])
    for peer in (peer for peer in REFERENCES if peer in rows):
        reference = rows[peer]
        for row in rows.values():
            row[f"p50_vs_{peer}"] = row["p50_ms"] / reference["p50_ms"]
            row[f"p99_vs_{peer}"] = row["p99_ms"] / reference["p99_ms"]
            row[f"throughput_vs_{peer}"] = (row["sentences_per_s_b32"]
                                            / reference["sentences_per_s_b32"])
    return rows


def main():
    parser = _workers.bench_parser(__doc__.splitlines()[0], ["minilm"], ["minilm"], 10,
                                   ["export", "baseline-export", "savedmodel", "transformers",
                                    "onnxruntime", "rest"])
    parser.add_argument("--requests-per-round", type=int, default=40)
    parser.add_argument("--no-rest", action="store_true", help="skip the kbs serve row")
    parser.add_argument("--ours-only", action="store_true",
                        help="time our SavedModels only (no transformers, ONNX Runtime, rest)")
    parser.add_argument("--baseline-ref", help="also export with the code at this git ref "
                        "and time both (implies --ours-only)")
    parser.add_argument("--work-dir", help=argparse_hidden())
    parser.add_argument("--precisions", nargs="+", help=argparse_hidden())
    parser.add_argument("--export-dir", help=argparse_hidden())
    parser.add_argument("--label", help=argparse_hidden())
    args = parser.parse_args()
    if args.worker == "export":
        return export_worker(args.work_dir)
    if args.worker == "baseline-export":
        return baseline_export_worker(args.work_dir, args.precisions)
    if args.worker == "savedmodel":
        return savedmodel_worker(args.work_dir, args.export_dir, args.threads, args.label)
    if args.worker == "transformers":
        return transformers_worker(args.work_dir, args.threads)
    if args.worker == "onnxruntime":
        return onnxruntime_worker(args.work_dir, args.threads)
    if args.worker == "rest":
        return rest_worker(args.work_dir, args.export_dir)

    peers = not (args.ours_only or args.baseline_ref)
    samples, agreement = run(args.rounds, args.threads, not args.no_rest and peers,
                             args.requests_per_round, peers=peers,
                             baseline_ref=args.baseline_ref)
    rows = summarize(samples)
    results = _workers.results_header(args.threads, preset=PRESET, sequence_length=LENGTH,
                                      batch=BATCH, data="rotten_tomatoes", rounds=args.rounds,
                                      cpu_flags=_workers.cpu_flags(), agreement=agreement,
                                      rows=rows, baseline_ref=args.baseline_ref)
    print(f"\nraw text -> probabilities, {PRESET}, sequence_length {LENGTH}, CPU, "
          f"{args.threads} threads; {results['date']}, {results['machine']} x{results['cpus']}")
    print("CPU flags:", " ".join(results["cpu_flags"]))
    differences = ", ".join(f"{label} {value:.1e}" for label, value in agreement.items()
                            if label not in ("reference", "sentences", "same_label", BEFORE))
    print(f"agreement with {agreement['reference']} on {agreement['sentences']} sentences, "
          f"max |p diff|: {differences} (savedmodel's same label "
          f"{agreement['same_label']:.0%})")
    print(f"{'contestant':20s} {'p50 ms':>8s} {'p99 ms':>8s} {'b32 sent/s':>11s} "
          f"{'b32x128 ms':>11s}" + (f" {'p50 x ort':>10s} {'b32 x ort':>10s} "
                                    f"{'p50 x pipe':>11s} {'b32 x pipe':>11s}" if peers else ""))
    for label, row in rows.items():
        packed = f"{row['b32x128_ms']:11.1f}" if "b32x128_ms" in row else " " * 11
        print(f"{label:20s} {row['p50_ms']:8.2f} {row['p99_ms']:8.2f} "
              f"{row['sentences_per_s_b32']:11.1f} {packed}" + (
                  f" {row['p50_vs_ort fp32']:10.2f} {row['throughput_vs_ort fp32']:10.2f} "
                  f"{row['p50_vs_pipeline']:11.2f} {row['throughput_vs_pipeline']:11.2f}"
                  if peers else ""))
    if peers:
        print("(x ort: against tokenizers + ONNX Runtime fp32; x pipe: against the "
              "transformers pipeline; latency ratios < 1 and throughput ratios > 1 mean faster)")
    if args.baseline_ref:
        _print_against_baseline(rows, agreement[BEFORE], args.baseline_ref)
    _workers.write_results("serving_latency", results)


def _print_against_baseline(rows, differences, ref):
    """new/old ratios of each precision (latency > 1 or throughput < 1: the new code is slower)."""
    print(f"\nnew / {ref} (same run, A B A B): p50, p99 and b32x128 ms ratios (> 1: slower), "
          f"b32 sentences/s ratio (< 1: slower); max |p diff| new vs old")
    print(f"{'export':20s} {'p50':>6s} {'p99':>6s} {'b32':>6s} {'b32x128':>8s} {'|p diff|':>9s}")
    for label, difference in differences.items():
        new, old = rows[label], rows[f"{label} {BEFORE}"]
        print(f"{label:20s} {new['p50_ms'] / old['p50_ms']:6.3f} "
              f"{new['p99_ms'] / old['p99_ms']:6.3f} "
              f"{new['sentences_per_s_b32'] / old['sentences_per_s_b32']:6.3f} "
              f"{new['b32x128_ms'] / old['b32x128_ms']:8.3f} {difference:9.1e}")


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
