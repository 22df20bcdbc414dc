"""One long document through ModernBERT-base's shape: ours per backend vs transformers.

    python bench/long_document.py [--length 8192] [--rounds 3] [--threads 2]

ModernBERT-base's shape (22 layers, width 768, 12 heads, GeGLU 1152, a 128-token window on
two layers of three) with random weights: transformers' `ModernBertModel` (its default
attention on CPU) is saved once with `save_pretrained`, and every contestant loads that same
directory (ours through `BertEncoder.from_preset`), so the outputs must agree; the table
prints each one's largest difference from transformers' on the document's rows. Speed does
not depend on the values.

Every contestant runs in its own process, one at a time, rounds interleaved A B A B (see
_workers.py); "peak memory" is the process's peak resident size (`ru_maxrss`) after loading
the weights and encoding the document: what a server with that one model would need.
"""

import argparse
import os
import resource
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402

# ModernBERT-base (answerdotai/ModernBERT-base's config.json).
BASE = dict(vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
            intermediate_size=1152, local_attention=128, max_position_embeddings=8192)
SHAPES = {"base": BASE}


def _document(length):
    """[1, length] token ids (ModernBERT's [CLS] first, [SEP] last) and its padding mask."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(1000, BASE["vocab_size"] - 100, (1, length)).astype("int32")
    ids[0, 0], ids[0, -1] = 50281, 50282
    return ids, np.ones_like(ids)


def _peak_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _serve(name, encode):
    """Serves `name` (one warm-up call: a call takes seconds) and answers its peak memory and
    every 512th row of its last output, for the check."""
    last = {}

    def call():
        last["output"] = encode()

    _workers.serve({name: call}, warmups=1, report=lambda: {
        "peak_gib": _peak_gib(), "rows": last["output"][0, ::512].tolist()})


def keras_worker(directory, length):
    import keras

    from keras_bert_suite import BertEncoder

    encoder = BertEncoder.from_preset(directory)
    ids, mask = _document(length)
    inputs = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": mask}
    _serve(f"ours {keras.backend.backend()}",
           lambda: keras.ops.convert_to_numpy(
               encoder.predict_on_batch(inputs)["sequence_output"]))


def transformers_worker(directory, length):
    import torch
    import transformers

    model = transformers.ModernBertModel.from_pretrained(directory).eval()
    ids, mask = _document(length)
    inputs = {"input_ids": torch.tensor(ids, dtype=torch.long),
              "attention_mask": torch.tensor(mask, dtype=torch.long)}

    def encode():
        with torch.inference_mode():
            return model(**inputs).last_hidden_state.numpy()

    _serve("transformers torch", encode)


def _save_transformers_model(directory):
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.ModernBertModel(transformers.ModernBertConfig(**BASE))
    model.save_pretrained(directory)


def main():
    import numpy as np

    parser = _workers.bench_parser(__doc__.splitlines()[0], SHAPES, ["base"], 3,
                                   ["keras", "transformers"])
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "keras":
        return keras_worker(args.directory, args.length)
    if args.worker == "transformers":
        return transformers_worker(args.directory, args.length)

    env = _workers.thread_env(args.threads)
    script = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as directory:
        _save_transformers_model(directory)
        common = ["--directory", directory, "--length", str(args.length)]
        workers = [_workers.Worker([script, "--worker", "transformers", *common], env)]
        for backend in args.backends:
            workers.append(_workers.Worker([script, "--worker", "keras", *common],
                                           {**env, "KERAS_BACKEND": backend}))
        try:
            seconds = _workers.interleave(workers, rounds=args.rounds, repeats=1)
            reports = {worker.names[0]: worker.report() for worker in workers}
        finally:
            for worker in workers:
                worker.close()

    reference = np.asarray(reports["transformers torch"]["rows"])
    baseline = seconds["transformers torch"]
    print(f"\nOne {args.length}-token document, ModernBERT-base shape, {_workers.cpu_name()}, "
          f"flags {' '.join(_workers.cpu_flags())}, {args.threads} threads")
    print(f"{'contestant':24} {'seconds':>8} {'vs transformers':>16} {'peak memory':>12} "
          f"{'max |diff|':>11}")
    results = []
    for name, report in reports.items():
        difference = float(np.max(np.abs(np.asarray(report["rows"]) - reference)))
        print(f"{name:24} {seconds[name]:8.2f} {baseline / seconds[name]:15.2f}x "
              f"{report['peak_gib']:9.2f} GiB {difference:11.2e}")
        results.append({"contestant": name, "seconds": seconds[name],
                        "peak_gib": report["peak_gib"], "max_abs_difference": difference})
    _workers.write_results("long_document", {
        **_workers.results_header(args.threads, length=args.length, flags=_workers.cpu_flags()),
        "results": results})


if __name__ == "__main__":
    main()
