"""The CPU's feature flags, from Linux's /proc/cpuinfo: what an int8_vnni export
(`export/cpu_features.py`) and a CPU recipe's precision (`training/cpu_bf16.py`) look for."""


def flags_of(cpuinfo_text):
    """The flags of the first "flags" line of a /proc/cpuinfo text (empty where there is
    none: another OS, or an ARM CPU, which lists "Features")."""
    for line in cpuinfo_text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def cpu_flags(path="/proc/cpuinfo"):
    """This CPU's feature flags (empty where /proc/cpuinfo cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return flags_of(f.read())
    except OSError:
        return frozenset()
