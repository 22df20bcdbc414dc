"""Encoder inference speed: ours per backend vs transformers.BertModel and keras-hub BertBackbone.

    python bench/encoder_inference.py [--shapes minilm base] [--rounds 5] [--threads 2]

Batch 32 x 128 tokens, fp32, CPU, random weights of the real shapes (speed does not depend
on the values). Every library runs with the same thread count, in its own process, A B A B
interleaved (see _workers.py), and the table prints sequences/s and ratios measured in this one
run. "matmul roofline" times only the dense layers' matmuls of the same shapes in torch; a
contestant's fraction of it says how close to the machine's GEMM speed the whole model runs.

Each Keras library is timed as a user calls it: `model.predict_on_batch(inputs)`, both with
the default compile settings and with `jit_compile=True` (XLA on TensorFlow and JAX).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402

SHAPES = {  # num_layers, hidden_dim, num_heads, intermediate_dim
    "minilm": (6, 384, 12, 1536),
    "base": (12, 768, 12, 3072),
}
BATCH, LENGTH, VOCABULARY = 32, 128, 30522


def model_flops(shape):
    layers, hidden, _, intermediate = shape
    dense = hidden * 3 * hidden + hidden * hidden + 2 * hidden * intermediate
    attention = 2 * LENGTH * hidden  # scores + weighted sum, per token per layer
    return 2 * BATCH * LENGTH * layers * (dense + attention)


def _inputs():
    import numpy as np

    rng = np.random.default_rng(0)
    return {"token_ids": rng.integers(1000, VOCABULARY, (BATCH, LENGTH)).astype("int32"),
            "segment_ids": np.zeros((BATCH, LENGTH), "int32"),
            "padding_mask": np.ones((BATCH, LENGTH), "int32")}


def keras_worker(shape_name):
    import keras
    import keras_hub

    from keras_bert_suite import BertEncoder

    layers, hidden, heads, intermediate = SHAPES[shape_name]
    config = dict(vocabulary_size=VOCABULARY, num_layers=layers, num_heads=heads,
                  hidden_dim=hidden, intermediate_dim=intermediate)
    backend = keras.backend.backend()
    inputs = _inputs()
    contestants = {}
    for label, model in (("ours", BertEncoder(**config)),
                         ("keras-hub", keras_hub.models.BertBackbone(**config))):
        default = model  # no compile(): exactly what a user's predict_on_batch runs
        contestants[f"{label} {backend}"] = lambda m=default: m.predict_on_batch(inputs)
        if backend != "torch":  # torch.compile of these graphs is not a supported path here
            jitted = model.__class__.from_config(model.get_config())
            jitted.set_weights(model.get_weights())
            jitted.compile(jit_compile=True)
            contestants[f"{label} {backend} xla"] = lambda m=jitted: m.predict_on_batch(inputs)
    _workers.serve(contestants)


def torch_worker(shape_name, threads):
    import torch
    import transformers

    torch.set_num_threads(threads)
    layers, hidden, heads, intermediate = SHAPES[shape_name]
    model = transformers.BertModel(transformers.BertConfig(
        vocab_size=VOCABULARY, num_hidden_layers=layers, hidden_size=hidden,
        num_attention_heads=heads, intermediate_size=intermediate)).eval()
    inputs = {"input_ids": torch.tensor(_inputs()["token_ids"], dtype=torch.long),
              "attention_mask": torch.ones(BATCH, LENGTH, dtype=torch.long)}

    def transformers_call():
        with torch.inference_mode():
            model(**inputs)

    rows = BATCH * LENGTH
    x = torch.randn(rows, hidden)
    h = torch.randn(rows, intermediate)
    weights = [torch.randn(hidden, 3 * hidden), torch.randn(hidden, hidden),
               torch.randn(hidden, intermediate), torch.randn(intermediate, hidden)]

    def matmul_roofline():  # the dense layers' GEMMs only, no attention, no element-wise work
        with torch.inference_mode():
            for _ in range(layers):
                x @ weights[0], x @ weights[1], x @ weights[2], h @ weights[3]

    _workers.serve({"transformers torch": transformers_call, "matmul roofline": matmul_roofline})


def run(shape_name, rounds, threads, backends):
    env = _workers.thread_env(threads)
    script = os.path.abspath(__file__)
    workers = [_workers.Worker([script, "--worker", "torch", "--shape", shape_name,
                                "--threads", str(threads)], env)]
    for backend in backends:
        workers.append(_workers.Worker([script, "--worker", "keras", "--shape", shape_name],
                                       {**env, "KERAS_BACKEND": backend}))
    try:
        seconds = _workers.interleave(workers, rounds=rounds, repeats=3)
    finally:
        for worker in workers:
            worker.close()
    layers, hidden, _, intermediate = SHAPES[shape_name]
    roofline_flops = 2 * BATCH * LENGTH * layers * (
        hidden * 3 * hidden + hidden * hidden + 2 * hidden * intermediate)
    roofline = roofline_flops / seconds.pop("matmul roofline")
    reference = seconds["transformers torch"]
    rows = []
    for name, value in sorted(seconds.items(), key=lambda item: item[1]):
        backend = name.split()[1]
        hub = seconds.get(name.replace("ours", "keras-hub"))
        rows.append({
            "contestant": name, "seq_per_s": BATCH / value,
            "vs_transformers": reference / value,
            "vs_keras_hub_same_backend": hub / value if name.startswith("ours") and hub else None,
            "fraction_of_matmul_roofline": model_flops(SHAPES[shape_name]) / value / roofline,
            "backend": backend})
    return {"shape": shape_name, "roofline_gflops": roofline / 1e9, "rows": rows}


def main():
    args = _workers.bench_parser(__doc__.splitlines()[0], SHAPES, ["minilm", "base"], 5,
                                 ["keras", "torch"]).parse_args()
    if args.worker == "keras":
        return keras_worker(args.shape)
    if args.worker == "torch":
        return torch_worker(args.shape, args.threads)

    results = _workers.results_header(args.threads, batch=BATCH, sequence_length=LENGTH, shapes=[])
    for shape_name in args.shapes:
        result = run(shape_name, args.rounds, args.threads, args.backends)
        results["shapes"].append(result)
        print(f"\n{shape_name} (batch {BATCH} x {LENGTH}, fp32, {args.threads} threads; "
              f"matmul roofline {result['roofline_gflops']:.0f} GFLOP/s)")
        print(f"{'contestant':28s} {'seq/s':>7s} {'x transformers':>15s} {'x keras-hub':>12s} "
              f"{'of roofline':>12s}")
        for row in result["rows"]:
            hub = row["vs_keras_hub_same_backend"]
            print(f"{row['contestant']:28s} {row['seq_per_s']:7.1f} {row['vs_transformers']:15.2f} "
                  f"{(f'{hub:.2f}' if hub else ''):>12s} {row['fraction_of_matmul_roofline']:12.0%}")
    _workers.write_results("encoder_inference", results)


if __name__ == "__main__":
    main()
