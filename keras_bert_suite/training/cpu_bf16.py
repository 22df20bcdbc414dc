"""Which bf16 instructions this CPU has, and the precision a CPU recipe runs in.

oneDNN multiplies bfloat16 with AMX (amx_bf16) or AVX512_BF16 (avx512_bf16); without either
it has no fast bf16. Measured on an AMD Zen 5 with AVX512_BF16 (docs/benchmarks.md, "bf16 on
the CPU"): neither TensorFlow's `TF_SET_ONEDNN_FPMATH_MODE=BF16` nor torch's
`torch.backends.mkldnn.matmul.fp32_precision = "bf16"` changed a MiniLM training step's time
or its outputs (bit-identical: the math mode did not reach these builds' matmuls), and Keras'
`mixed_bfloat16` policy gained nothing on TensorFlow. So recipes stay float32 on every CPU
and their log says what the CPU offers; `training.precision="mixed_bfloat16"` still opts in.
"""

from keras_bert_suite.cpu_flags import cpu_flags, flags_of

# The /proc/cpuinfo flag of each bf16 instruction set oneDNN uses, best first.
BF16_INSTRUCTIONS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512_BF16"))


def bf16_instructions(cpuinfo_text=None):
    """"AMX", "AVX512_BF16" or None (this CPU's, or those of the /proc/cpuinfo text given)."""
    flags = cpu_flags() if cpuinfo_text is None else flags_of(cpuinfo_text)
    return next((name for flag, name in BF16_INSTRUCTIONS if flag in flags), None)


def cpu_precision(cpuinfo_text=None):
    """(precision policy, the log line saying why) for a recipe on this CPU."""
    instructions = bf16_instructions(cpuinfo_text)
    if instructions is None:
        return "float32", "float32: this CPU has no bf16 instructions"
    return "float32", (f"float32: this CPU has {instructions}, but bf16 measured no faster "
                       "here (docs/benchmarks.md); training.precision=mixed_bfloat16 opts in")
