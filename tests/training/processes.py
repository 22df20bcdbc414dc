"""Starting the distributed programs (tests/training/distributed_programs.py) in fresh
processes: devices must be set up before TensorFlow or JAX start, which the pytest process
has long done. Each program prints one RESULT line of JSON."""

import json
import os
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The Makefile's TEST_XLA_FLAGS: XLA without LLVM's expensive optimization passes and with
# its older loop emitters compiles the JAX programs faster (without the last flag, the one-host
# JAX run took 47 s of CPU, with it 32); every comparison is between runs made with the same
# flags.
FAST_XLA_FLAGS = ("--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
                  " --xla_cpu_use_fusion_emitters=false")


def _xla_flags(num_devices):
    return f"{FAST_XLA_FLAGS} --xla_force_host_platform_device_count={num_devices}"


def _environment(backend, **extra):
    environment = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3",
                   "PYTHONPATH": ROOT, "XLA_FLAGS": FAST_XLA_FLAGS}
    environment.pop("TF_CONFIG", None)  # only the multi-worker test sets one, in `extra`
    return {**environment, **extra}


def _result(completed_output):
    lines = [line for line in completed_output.splitlines() if line.startswith("RESULT ")]
    assert lines, completed_output[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _results_of_all(processes, timeout):
    """Waits for every process; each must succeed and print a RESULT line (all are killed on
    the first failure)."""
    results = []
    try:
        for process in processes:
            stdout, stderr = process.communicate(timeout=timeout)
            assert process.returncode == 0, stderr[-3000:]
            results.append(_result(stdout))
    finally:
        for process in processes:
            process.kill()
    return results


def _program(name, *args, backend="tensorflow", timeout=600, **extra_environment):
    completed = subprocess.run(
        [sys.executable, "-m", "tests.training.distributed_programs", name, *args],
        cwd=ROOT, env=_environment(backend, **extra_environment), capture_output=True,
        text=True, timeout=timeout)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return _result(completed.stdout)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
