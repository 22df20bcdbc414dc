"""The mixed-precision helpers."""

import keras
import pytest

from keras_bert_suite.training import create_optimizer, loss_scaled, set_mixed_precision


def test_mixed_precision_helpers():
    try:
        policy = set_mixed_precision("mixed_float16")
        assert keras.config.dtype_policy().name == "mixed_float16"
        assert policy.variable_dtype == "float32"
        optimizer = create_optimizer()
        assert isinstance(loss_scaled(optimizer), keras.optimizers.LossScaleOptimizer)
    finally:
        set_mixed_precision("float32")
    assert loss_scaled(optimizer) is optimizer
    assert loss_scaled(optimizer, "mixed_bfloat16") is optimizer
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        set_mixed_precision("float8")


def test_cpu_bf16_detection_reads_cpuinfo_flags():
    from keras_bert_suite.training.cpu_bf16 import bf16_instructions, cpu_precision

    def cpuinfo(flags):
        return f"processor\t: 0\nmodel name\t: a CPU\nflags\t\t: fpu sse2 avx2 {flags}\n"

    assert bf16_instructions(cpuinfo("avx512f avx512_bf16 amx_tile amx_bf16")) == "AMX"
    assert bf16_instructions(cpuinfo("avx512f avx512_bf16")) == "AVX512_BF16"
    assert bf16_instructions(cpuinfo("avx512f")) is None
    assert bf16_instructions("Features\t: fp asimd bf16\n") is None  # ARM lists "Features"
    assert cpu_precision("tensorflow", cpuinfo("avx512f"))[0] == "float32"
    assert "no bf16 instructions" in cpu_precision("torch", cpuinfo(""))[1]
    for backend in ("tensorflow", "torch"):
        policy, line = cpu_precision(backend, cpuinfo("avx512_bf16"))
        assert policy == "mixed_bfloat16" and "AVX512_BF16" in line
    policy, line = cpu_precision("jax", cpuinfo("amx_bf16 avx512_bf16"))
    assert policy == "float32" and "AMX" in line and "jax" in line
