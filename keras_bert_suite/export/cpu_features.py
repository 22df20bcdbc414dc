"""What the exporting CPU offers the int8_vnni precision.

`precision="int8_vnni"` multiplies with oneDNN's quantized matmul (`layers/serving/
int8_matmul.py`, `vnni_dense`), whose answers are right only where oneDNN runs it on VNNI or
AMX: AVX512_VNNI, AVX_VNNI or AMX-INT8. On other x86-64 CPUs the op returned wrong numbers
(AVX2, AVX-512 without VNNI: u8 x s8 pairs summed in saturating int16) or no output at all
(an AMD Zen 3). An export checks the CPU it runs on, as the closest thing to the serving
fleet it can see: it refuses int8_vnni where oneDNN could not use VNNI or AMX, and warns
where it can that the SavedModel must be served on such CPUs only.
"""

import os

from keras_bert_suite.cpu_flags import cpu_flags

# The /proc/cpuinfo flags of the instructions oneDNN's int8 kernels need.
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
# ONEDNN_MAX_CPU_ISA (oneDNN's dispatch cap) values that keep oneDNN from some of them: the
# flags each still lets it use. Other values (the AMX ones, ALL, DEFAULT) cap none.
ISA_CAPS = {"SSE41": (), "AVX": (), "AVX2": (), "AVX512_CORE": (),
            "AVX2_VNNI": ("avx_vnni",), "AVX2_VNNI_2": ("avx_vnni",),
            "AVX512_CORE_VNNI": ("avx512_vnni",), "AVX512_CORE_BF16": ("avx512_vnni",),
            "AVX512_CORE_FP16": ("avx512_vnni",), "AVX10_1_512": ("avx512_vnni",)}


def isa_cap():
    """ONEDNN_MAX_CPU_ISA (or its older name DNNL_MAX_CPU_ISA), upper case; "" when unset."""
    return (os.environ.get("ONEDNN_MAX_CPU_ISA")
            or os.environ.get("DNNL_MAX_CPU_ISA") or "").strip().upper()


def int8_vnni_flags():
    """The VNNI / AMX flags oneDNN may use in this process: the CPU's, less what
    ONEDNN_MAX_CPU_ISA caps away."""
    return sorted(cpu_flags() & set(ISA_CAPS.get(isa_cap(), VNNI_FLAGS)))


def require_int8_vnni():
    """This CPU's usable VNNI / AMX flags; ValueError saying why where there are none."""
    flags = int8_vnni_flags()
    if flags:
        return flags
    found = sorted(cpu_flags() & set(VNNI_FLAGS))
    if found:
        why = (f"it has {', '.join(found)}, but ONEDNN_MAX_CPU_ISA={isa_cap()} keeps oneDNN "
               "from using them")
    elif cpu_flags():
        why = f"its /proc/cpuinfo flags have none of {', '.join(VNNI_FLAGS)}"
    else:
        why = "no CPU flags could be read from /proc/cpuinfo"
    raise ValueError(
        "precision='int8_vnni' needs a CPU with AVX512_VNNI, AVX_VNNI or AMX, and this one "
        f"does not qualify ({why}). Without them oneDNN's quantized matmul returns wrong "
        "numbers or no output. Export precision='int8' instead: the same int8 kernels, "
        "computed in float32 on any CPU.")


def int8_vnni_warning(flags):
    """What an int8_vnni export tells its user (`flags`: this CPU's, from require_int8_vnni)."""
    return ("precision='int8_vnni': serve this SavedModel only on CPUs with AVX512_VNNI, "
            f"AVX_VNNI or AMX (this one has {', '.join(flags)}). On other CPUs its quantized "
            "matmuls return wrong answers or fail every request; precision='int8' serves on "
            "any CPU (docs/export.md, \"Which CPU each export needs\").")
