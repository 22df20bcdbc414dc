"""The CPU inference peers a user would assemble instead of us, built the same way everywhere.

* ONNX Runtime fp32 and dynamic int8 on weights exported from a `transformers` model
  (`torch.onnx.export`, opset 17, TorchScript exporter; then
  `onnxruntime.quantization.quantize_dynamic` with int8 weights), the route the ONNX Runtime
  and Hugging Face docs give for BERT on CPU.
* torch dynamic int8 (`torch.ao.quantization.quantize_dynamic` of the Linear layers; FBGEMM,
  which uses VNNI where the CPU has it).
* The GEMM roofline: one fp32 [4096, 384] x [384, 1536] matmul in each library; a bench takes
  the best of them, measured in the same run, as the machine's reachable GEMM speed.

Needs `bench/requirements.txt` (onnxruntime, onnx) on top of the project's requirements.
"""

import os
import tempfile

GEMM_SHAPE = (4096, 384, 1536)  # rows x inner x columns: MiniLM's FFN at 32 x 128 tokens
GEMM_FLOPS = 2 * GEMM_SHAPE[0] * GEMM_SHAPE[1] * GEMM_SHAPE[2]
ENCODER_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def export_onnx(model, path):
    """Writes `model` (a transformers BertModel or BertForSequenceClassification) to `path`:
    inputs input_ids / attention_mask / token_type_ids [batch, sequence] int64, output the
    model's first output (last_hidden_state or logits)."""
    import torch

    class ByName(torch.nn.Module):  # transformers 5 takes these by keyword only
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids)[0]

    example = tuple(torch.ones(1, 8, dtype=torch.long) for _ in ENCODER_INPUT_NAMES)
    with torch.no_grad():
        torch.onnx.export(
            ByName(model).eval(), example, path, opset_version=17, dynamo=False,
            input_names=list(ENCODER_INPUT_NAMES), output_names=["output"],
            dynamic_axes={name: {0: "batch", 1: "sequence"}
                          for name in (*ENCODER_INPUT_NAMES, "output")})
    return path


def quantize_int8(source, destination):
    """ONNX Runtime's dynamic int8 quantization (int8 weights, activations per call)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(source, destination, weight_type=QuantType.QInt8)
    return destination


def onnx_sessions(model, threads, work_dir):
    """{"fp32": session, "int8": session} for `model`, exported into `work_dir`."""
    fp32 = export_onnx(model, os.path.join(work_dir, "model.onnx"))
    int8 = quantize_int8(fp32, os.path.join(work_dir, "model.int8.onnx"))
    return {"fp32": session(fp32, threads), "int8": session(int8, threads)}


def session(path, threads):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def onnx_feed(input_ids, attention_mask, token_type_ids=None):
    """ONNX Runtime's input dict from int arrays [B, T]."""
    import numpy as np

    if token_type_ids is None:
        token_type_ids = np.zeros_like(input_ids)
    return {name: np.asarray(value, np.int64) for name, value in
            zip(ENCODER_INPUT_NAMES, (input_ids, attention_mask, token_type_ids))}


def torch_int8(model):
    """`model` with its Linear layers dynamically quantized to int8 (FBGEMM)."""
    import torch

    torch.backends.quantized.engine = "fbgemm"
    return torch.ao.quantization.quantize_dynamic(model.eval(), {torch.nn.Linear},
                                                  dtype=torch.qint8)


def gemm_contestants(libraries, threads):
    """{"gemm <library>": a zero-argument callable running one fp32 GEMM_SHAPE matmul}."""
    import numpy as np

    rows, inner, columns = GEMM_SHAPE
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, inner), dtype=np.float32)
    b = rng.standard_normal((inner, columns), dtype=np.float32)
    contestants = {}
    for library in libraries:
        if library == "numpy":
            contestants["gemm numpy"] = lambda: a @ b
        elif library == "torch":
            import torch

            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            contestants["gemm torch"] = lambda: ta @ tb
        elif library == "tensorflow":
            import tensorflow as tf

            ta, tb = tf.constant(a), tf.constant(b)
            matmul = tf.function(tf.matmul)
            contestants["gemm tensorflow"] = lambda: matmul(ta, tb).numpy()
        elif library == "onnxruntime":
            contestants["gemm onnxruntime"] = _onnx_gemm(a, b, threads)
        else:
            raise ValueError(f"no GEMM contestant for {library!r}")
    return contestants


def _onnx_gemm(a, b, threads):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a.shape))],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [a.shape[0], b.shape[1]])],
        initializer=[numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "gemm.onnx")
        onnx.save(model, path)
        gemm = session(path, threads)
    return lambda: gemm.run(None, {"a": a})


def best_gemm_gflops(seconds):
    """(library, GFLOP/s) of the fastest "gemm <library>" entry in `seconds` (popped)."""
    gemms = {name.split(" ", 1)[1]: seconds.pop(name)
             for name in [name for name in seconds if name.startswith("gemm ")]}
    library = min(gemms, key=gemms.get)
    return library, GEMM_FLOPS / gemms[library] / 1e9, {
        name: GEMM_FLOPS / value / 1e9 for name, value in gemms.items()}
