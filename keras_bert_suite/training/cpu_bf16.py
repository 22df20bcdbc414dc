"""Which bf16 instructions this CPU has, and the precision a CPU recipe runs in.

oneDNN multiplies bfloat16 with AMX (amx_bf16) or AVX512_BF16 (avx512_bf16); without either
it has no fast bf16. Measured on an AMD Zen 5 with AVX512_BF16 (docs/benchmarks.md, "bf16 on
the CPU"), a MiniLM training step under Keras' `mixed_bfloat16` policy (float32 variables,
bf16 math) took 0.6-0.75x of its float32 time on TensorFlow and PyTorch and the same time on
JAX (XLA's CPU backend has no oneDNN bf16 matmul), at the same held-out accuracy. So a CPU
recipe trains in mixed_bfloat16 where the CPU and the backend gain from it, float32
elsewhere, and its log says which and why; `training.precision` set by hand overrides.
"""

from keras_bert_suite.cpu_flags import cpu_flags, flags_of

# The /proc/cpuinfo flag of each bf16 instruction set oneDNN uses, best first.
BF16_INSTRUCTIONS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512_BF16"))

# Backends whose CPU matmuls reach oneDNN's bf16 kernels (measured faster, see above).
BF16_FAST_BACKENDS = ("tensorflow", "torch")


def bf16_instructions(cpuinfo_text=None):
    """"AMX", "AVX512_BF16" or None (this CPU's, or those of the /proc/cpuinfo text given)."""
    flags = cpu_flags() if cpuinfo_text is None else flags_of(cpuinfo_text)
    return next((name for flag, name in BF16_INSTRUCTIONS if flag in flags), None)


def cpu_precision(backend=None, cpuinfo_text=None):
    """(precision policy, the log line saying why) for a recipe on this CPU and `backend`
    (default: Keras' current backend)."""
    if backend is None:
        import keras

        backend = keras.backend.backend()
    instructions = bf16_instructions(cpuinfo_text)
    if instructions is None:
        return "float32", "float32: this CPU has no bf16 instructions (AMX or AVX512_BF16)"
    if backend not in BF16_FAST_BACKENDS:
        return "float32", (f"float32: this CPU has {instructions}, but the {backend} backend "
                           "measured no faster in bf16 (docs/benchmarks.md)")
    return "mixed_bfloat16", (f"mixed_bfloat16: this CPU has {instructions} (bf16 matmuls, "
                              "float32 weights); training.precision=float32 opts out")
