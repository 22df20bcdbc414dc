"""Our encoder on the PyTorch backend: the settings a user can switch on, against ONNX Runtime.

    python bench/torch_backend_settings.py [--rounds 5] [--threads 2]

MiniLM shapes (random weights), batch 32 x 128, one process, every contestant interleaved
A B A B (median of rounds): ONNX Runtime fp32 on the same network exported from
`transformers` (bench/onnx_peers.py) against our BertEncoder on KERAS_BACKEND=torch called
as a user would, with

* `predict_on_batch` (Keras' default path),
* the model called under `torch.inference_mode()`,
* `torch.set_float32_matmul_precision("medium")` (fp32 matmuls through oneDNN's bf16 kernels
  where the CPU has AMX / AVX512_BF16),
* the `mixed_bfloat16` dtype policy,

and torch's fp32 GEMM ([4096, 384] x [384, 1536]) in both matmul precisions.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ["KERAS_BACKEND"] = "torch"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _workers  # noqa: E402
import onnx_peers  # noqa: E402

SHAPE = dict(vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=384,
             intermediate_dim=1536)
BATCH, LENGTH = 32, 128


def with_matmul_precision(function, precision):
    import torch

    def run():
        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(precision)
        try:
            function()
        finally:
            torch.set_float32_matmul_precision(previous)
    return run


def contestants(threads):
    import keras
    import numpy as np
    import torch
    import transformers

    from keras_bert_suite import BertEncoder

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    inputs = {"token_ids": rng.integers(1000, SHAPE["vocabulary_size"], (BATCH, LENGTH)),
              "segment_ids": np.zeros((BATCH, LENGTH)), "padding_mask": np.ones((BATCH, LENGTH))}
    inputs = {name: value.astype("int32") for name, value in inputs.items()}
    encoder = BertEncoder(**SHAPE)
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    bf16_encoder = BertEncoder(**SHAPE)
    keras.mixed_precision.set_dtype_policy("float32")
    bf16_encoder.set_weights(encoder.get_weights())
    peer = transformers.BertModel(transformers.BertConfig(
        vocab_size=SHAPE["vocabulary_size"], num_hidden_layers=SHAPE["num_layers"],
        hidden_size=SHAPE["hidden_dim"], num_attention_heads=SHAPE["num_heads"],
        intermediate_size=SHAPE["intermediate_dim"])).eval()
    with tempfile.TemporaryDirectory() as work_dir:
        session = onnx_peers.onnx_sessions(peer, threads, work_dir)["fp32"]
    feed = onnx_peers.onnx_feed(inputs["token_ids"], inputs["padding_mask"],
                                inputs["segment_ids"])
    a, b = torch.randn(4096, 384), torch.randn(384, 1536)

    def gemm():
        with torch.inference_mode():
            torch.matmul(a, b)

    def predict():
        encoder.predict_on_batch(inputs)

    def inference_mode():
        with torch.inference_mode():
            encoder(inputs, training=False)

    return {
        "onnxruntime fp32": lambda: session.run(None, feed),
        "ours torch predict_on_batch": predict,
        "ours torch inference_mode": inference_mode,
        "ours torch matmul precision medium": with_matmul_precision(predict, "medium"),
        "ours torch mixed_bfloat16": lambda: bf16_encoder.predict_on_batch(inputs),
        "gemm torch": gemm,
        "gemm torch matmul precision medium": with_matmul_precision(gemm, "medium"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    functions = contestants(args.threads)
    for function in functions.values():  # warm up: traces, oneDNN primitives
        function()
        function()
    seconds = {name: [] for name in functions}
    for _ in range(args.rounds):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            seconds[name].append(time.perf_counter() - start)
    results = _workers.results_header(args.threads, batch=BATCH, sequence_length=LENGTH,
                                      rows={})
    reference = statistics.median(seconds["onnxruntime fp32"])
    print(f"\nMiniLM shapes, batch {BATCH} x {LENGTH}, {args.threads} threads, "
          f"{results['date']}, {results['machine']}")
    for name, values in seconds.items():
        median = statistics.median(values)
        if name.startswith("gemm"):
            row = {"gflops": 2 * 4096 * 384 * 1536 / median / 1e9}
            print(f"{name:40s} {1e3 * median:8.1f} ms {row['gflops']:8.0f} GFLOP/s")
        else:
            row = {"seq_per_s": BATCH / median, "vs_onnxruntime_fp32": reference / median}
            print(f"{name:40s} {1e3 * median:8.1f} ms {row['seq_per_s']:8.1f} seq/s "
                  f"{row['vs_onnxruntime_fp32']:6.2f}x ONNX Runtime fp32")
        results["rows"][name] = row
    _workers.write_results("torch_backend_settings", results)


if __name__ == "__main__":
    main()
