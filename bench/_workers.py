"""Interleaved benchmarking across processes (one Keras backend per process).

The orchestrator starts one long-lived worker per process kind; each worker builds its
contestants once, then answers {"time": NAME, "repeats": N} with the median seconds of REPEATS calls.
Only one worker computes at a time, and rounds go A B A B ..., so the shared, noisy machine
slows every contestant alike and the ratios stay meaningful.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time


def serve(contestants, report=None, warmups=2):
    """Worker side: contestants = {name: zero-argument callable}. Reads commands on stdin;
    {"report": true} answers `report()` (a JSON-able dict: peak memory, outputs to compare)."""
    for name, fn in contestants.items():  # warm-up: tracing, compilation, allocator
        for _ in range(warmups):
            fn()
    print(json.dumps({"ready": sorted(contestants)}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("report"):
            print(json.dumps(report() if report else {}), flush=True)
            continue
        name, repeats = request["time"], request["repeats"]
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            contestants[name]()
            times.append(time.perf_counter() - start)
        print(json.dumps({"seconds": statistics.median(times), "samples": times}), flush=True)


class Worker:
    """Orchestrator side of one worker process."""

    def __init__(self, args, env=None):
        self.process = subprocess.Popen(
            [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, **(env or {})}, text=True)
        self.names = self._read()["ready"]

    def _read(self):
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {self.process.args} exited early")
            if line.startswith("{"):
                return json.loads(line)

    def time(self, name, repeats):
        self.process.stdin.write(json.dumps({"time": name, "repeats": repeats}) + "\n")
        self.process.stdin.flush()
        return self._read()["seconds"]

    def samples(self, name, repeats):
        """The seconds of each of REPEATS calls (for percentiles)."""
        self.process.stdin.write(json.dumps({"time": name, "repeats": repeats}) + "\n")
        self.process.stdin.flush()
        return self._read()["samples"]

    def report(self):
        """What the worker's `report` callable answers."""
        self.process.stdin.write(json.dumps({"report": True}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:  # a worker slow to shut down must not lose results
            self.process.kill()
            self.process.wait()


def interleave(workers, rounds, repeats):
    """{contestant: median seconds over rounds}, measured A B A B across all workers."""
    samples = {}
    for _ in range(rounds):
        for worker in workers:
            for name in worker.names:
                samples.setdefault(name, []).append(worker.time(name, repeats))
    return {name: statistics.median(values) for name, values in samples.items()}


def thread_env(threads):
    """Same thread budget for every library."""
    value = str(threads)
    return {"OMP_NUM_THREADS": value, "MKL_NUM_THREADS": value, "TF_NUM_INTRAOP_THREADS": value,
            "TF_NUM_INTEROP_THREADS": "1", "RAYON_NUM_THREADS": value,
            # XLA has no thread-count flag (a bare "intra_op_parallelism_threads=N" here made
            # XLA stop reading the flags that followed it); OMP/TF settings above bound it.
            "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true",
            "TF_CPP_MIN_LOG_LEVEL": "3"}


def bench_parser(description, shapes, default_shapes, default_rounds, worker_kinds):
    """The command line every interleaved benchmark shares (+ hidden worker flags)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--shapes", nargs="+", default=default_shapes, choices=shapes)
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax", "torch"])
    parser.add_argument("--rounds", type=int, default=default_rounds)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--worker", choices=worker_kinds, help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    return parser


def cpu_name():
    """The CPU's model name and the vector/matrix extensions that decide CPU kernel speed."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    flags = set(fields.get("flags", "").split())
    extensions = [name for name, flag in (("AVX-512", "avx512f"), ("VNNI", "avx512_vnni"),
                                          ("BF16", "avx512_bf16"), ("AMX", "amx_tile"))
                  if flag in flags]
    return f"{fields.get('model name', platform.machine())} ({', '.join(extensions)})"


def cpu_flags():
    """The /proc/cpuinfo flags that decide which export precisions run fast, or right
    (docs/export.md, "Which CPU each export needs")."""
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "avx512_bf16",
              "amx_bf16")
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.partition(":")[2].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        flags = []
    return [flag for flag in wanted if flag in flags]


def results_header(threads, **details):
    """Date and machine facts that every results JSON starts with."""
    return {"date": datetime.date.today().isoformat(),
            "machine": cpu_name(), "cpus": os.cpu_count(),
            "threads": threads,
            # How busy the shared machine was (1/5/15-minute run-queue averages) at the start.
            "load_average_at_start": os.getloadavg(), **details}


def write_results(name, results):
    """Writes bench/results/<name>.json (gitignored: the README's tables are the record)."""
    directory = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{name}.json"), "w") as f:
        json.dump(results, f, indent=1)
