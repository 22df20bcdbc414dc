"""Encoder inference speed: ours per backend vs transformers, ONNX Runtime and keras-hub.

    python bench/encoder_inference.py [--shapes minilm base] [--rounds 5] [--threads 2]

Batch 32 x 128 tokens, CPU, random weights of the real shapes (speed does not depend on the
values). Every library runs with the same thread count, in its own process, A B A B
interleaved (see _workers.py), and the table prints sequences/s and ratios measured in this one
run.

Peers (bench/onnx_peers.py): transformers.BertModel in torch fp32 and with torch's dynamic
int8 (FBGEMM); the same BertModel exported to ONNX and run by ONNX Runtime in fp32 and
dynamic int8; keras-hub's BertBackbone on each Keras backend. Each Keras library is timed as
a user calls it: `model.predict_on_batch(inputs)`, with the default compile settings and with
`jit_compile=True` (XLA on TensorFlow and JAX). "ours tensorflow export [bfloat16|int8|
int8_vnni]" is the encoder graph an `export_saved_model(..., precision=)` SavedModel runs
(ServingEncoder; int8_vnni only where the CPU has VNNI / AMX);
"ours <backend> mixed_bfloat16" the same encoder under Keras' mixed_bfloat16 dtype policy;
"<library> <backend> keras int8" the model after Keras' `model.quantize("int8")`.

"of roofline": the model's FLOPs per second over the best fp32 GEMM ([4096, 384] x
[384, 1536]) that any library (ONNX Runtime, TensorFlow, torch, numpy) reaches in this run:
how close the whole model comes to the machine's reachable matmul speed.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402
import onnx_peers  # noqa: E402

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


def keras_worker(shape_name, threads):
    import keras
    import keras_hub

    from keras_bert_suite import BertEncoder

    layers, hidden, heads, intermediate = SHAPES[shape_name]
    config = dict(vocabulary_size=VOCABULARY, num_layers=layers, num_heads=heads,
                  hidden_dim=hidden, intermediate_dim=intermediate)
    backend = keras.backend.backend()
    inputs = _inputs()
    contestants = {}
    ours_encoder = BertEncoder(**config)
    for label, model in (("ours", ours_encoder),
                         ("keras-hub", keras_hub.models.BertBackbone(**config))):
        default = model  # no compile(): exactly what a user's predict_on_batch runs
        contestants[f"{label} {backend}"] = lambda m=default: m.predict_on_batch(inputs)
        if backend != "torch":  # torch.compile of these graphs is not a supported path here
            jitted = _copy(model)
            jitted.compile(jit_compile=True)
            contestants[f"{label} {backend} xla"] = lambda m=jitted: m.predict_on_batch(inputs)
        quantized = _copy(model)  # Keras' own post-training int8, as a user calls it
        quantized.quantize("int8")
        contestants[f"{label} {backend} keras int8"] = (
            lambda m=quantized: m.predict_on_batch(inputs))
    # bf16 compute, as a user asks for it: the mixed_bfloat16 policy (AMX / AVX512_BF16).
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    bf16 = BertEncoder(**config)
    keras.mixed_precision.set_dtype_policy("float32")
    bf16.set_weights(ours_encoder.get_weights())
    contestants[f"ours {backend} mixed_bfloat16"] = lambda: bf16.predict_on_batch(inputs)
    if backend == "tensorflow":
        contestants.update(_serving_graph_contestants(ours_encoder, inputs))
        contestants.update(onnx_peers.gemm_contestants(["tensorflow"], threads))
    _workers.serve(contestants)


def _copy(model):
    copy = model.__class__.from_config(model.get_config())
    copy.set_weights(model.get_weights())
    return copy


def _serving_graph_contestants(encoder, inputs):
    """The encoder graph our SavedModels run (ServingEncoder), per export precision;
    int8_vnni without calibration text (the ops, hence the speed, are the same), and only
    where this CPU computes it right."""
    import tensorflow as tf

    from keras_bert_suite.export.cpu_features import int8_vnni_flags
    from keras_bert_suite.export.serving_encoder import ServingEncoder
    from keras_bert_suite.names import SERVING_PRECISIONS

    tensors = {name: tf.constant(value) for name, value in inputs.items()}
    contestants = {}
    for precision in SERVING_PRECISIONS:
        if precision == "int8_vnni" and not int8_vnni_flags():
            continue
        graph = tf.function(ServingEncoder(encoder, precision).__call__)
        label = "" if precision == "float32" else f" {precision}"
        contestants[f"ours tensorflow export{label}"] = (
            lambda g=graph: g(tensors)["sequence_output"].numpy())
    return contestants


def _transformers_model(shape_name):
    import transformers

    layers, hidden, heads, intermediate = SHAPES[shape_name]
    return transformers.BertModel(transformers.BertConfig(
        vocab_size=VOCABULARY, num_hidden_layers=layers, hidden_size=hidden,
        num_attention_heads=heads, intermediate_size=intermediate)).eval()


def torch_worker(shape_name, threads):
    import torch

    torch.set_num_threads(threads)
    model = _transformers_model(shape_name)
    quantized = onnx_peers.torch_int8(model)
    inputs = {"input_ids": torch.tensor(_inputs()["token_ids"], dtype=torch.long),
              "attention_mask": torch.ones(BATCH, LENGTH, dtype=torch.long)}

    def call(network):
        with torch.inference_mode():
            network(**inputs)

    _workers.serve({"transformers torch": lambda: call(model),
                    "transformers torch int8": lambda: call(quantized),
                    **onnx_peers.gemm_contestants(["torch", "numpy"], threads)})


def onnxruntime_worker(shape_name, threads):
    import numpy as np

    with tempfile.TemporaryDirectory() as work_dir:
        sessions = onnx_peers.onnx_sessions(_transformers_model(shape_name), threads, work_dir)
    inputs = _inputs()
    feed = onnx_peers.onnx_feed(inputs["token_ids"], inputs["padding_mask"],
                                np.zeros_like(inputs["token_ids"]))
    contestants = {f"onnxruntime {precision}": lambda s=sess: s.run(None, feed)
                   for precision, sess in sessions.items()}
    _workers.serve({**contestants, **onnx_peers.gemm_contestants(["onnxruntime"], threads)})


def run(shape_name, rounds, threads, backends):
    env = _workers.thread_env(threads)
    script = os.path.abspath(__file__)
    common = ["--shape", shape_name, "--threads", str(threads)]
    workers = [_workers.Worker([script, "--worker", kind, *common], env)
               for kind in ("torch", "onnxruntime")]
    for backend in backends:
        workers.append(_workers.Worker([script, "--worker", "keras", *common],
                                       {**env, "KERAS_BACKEND": backend}))
    try:
        seconds = _workers.interleave(workers, rounds=rounds, repeats=3)
    finally:
        for worker in workers:
            worker.close()
    gemm_library, roofline_gflops, gemm_gflops = onnx_peers.best_gemm_gflops(seconds)
    reference = seconds["transformers torch"]
    rows = []
    for name, value in sorted(seconds.items(), key=lambda item: item[1]):
        backend = name.split()[1]
        hub = seconds.get(name.replace("ours", "keras-hub"))
        rows.append({
            "contestant": name, "seq_per_s": BATCH / value,
            "vs_transformers": reference / value,
            "vs_onnxruntime_fp32": seconds["onnxruntime fp32"] / value,
            "vs_keras_hub_same_backend": hub / value if name.startswith("ours") and hub else None,
            "fraction_of_roofline": (model_flops(SHAPES[shape_name]) / value
                                     / (roofline_gflops * 1e9)),
            "backend": backend})
    return {"shape": shape_name, "roofline_gflops": roofline_gflops,
            "roofline_library": gemm_library, "gemm_gflops": gemm_gflops, "rows": rows}


def main():
    args = _workers.bench_parser(__doc__.splitlines()[0], SHAPES, ["minilm", "base"], 5,
                                 ["keras", "torch", "onnxruntime"]).parse_args()
    workers = {"keras": keras_worker, "torch": torch_worker, "onnxruntime": onnxruntime_worker}
    if args.worker:
        return workers[args.worker](args.shape, args.threads)

    results = _workers.results_header(args.threads, batch=BATCH, sequence_length=LENGTH, shapes=[])
    for shape_name in args.shapes:
        result = run(shape_name, args.rounds, args.threads, args.backends)
        results["shapes"].append(result)
        gemms = ", ".join(f"{name} {value:.0f}" for name, value in result["gemm_gflops"].items())
        print(f"\n{shape_name} (batch {BATCH} x {LENGTH}, {args.threads} threads; roofline = best "
              f"fp32 GEMM in this run, {result['roofline_library']} "
              f"{result['roofline_gflops']:.0f} GFLOP/s; all GEMMs: {gemms})")
        print(f"{'contestant':28s} {'seq/s':>7s} {'x ORT fp32':>11s} {'x transformers':>15s} "
              f"{'x keras-hub':>12s} {'of roofline':>12s}")
        for row in result["rows"]:
            hub = row["vs_keras_hub_same_backend"]
            print(f"{row['contestant']:28s} {row['seq_per_s']:7.1f} "
                  f"{row['vs_onnxruntime_fp32']:11.2f} {row['vs_transformers']:15.2f} "
                  f"{(f'{hub:.2f}' if hub else ''):>12s} {row['fraction_of_roofline']:12.0%}")
    _workers.write_results("encoder_inference", results)


if __name__ == "__main__":
    main()
