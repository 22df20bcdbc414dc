"""Per-test CPU seconds, for finding where the suite's time goes.

`make test` runs four pytest processes on two cores, so a test's wall-clock duration
(`--durations`) depends on what the others were doing at that moment; its CPU time does not.
With $KBS_CPU_TIMES set to a folder, each process writes one line per test there (its nodeid,
the CPU seconds of this process and of the subprocesses it waited for, setup + call +
teardown), in `<backend>-<split>.tsv`. Module and session fixtures count toward the first test
that uses them.
"""

import os
import resource

import pytest


def _cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get("KBS_CPU_TIMES")
    if not folder:
        yield
        return
    start = _cpu_seconds()
    yield
    import keras
    name = f"{keras.backend.backend()}-{os.environ.get('KBS_SPLIT', 'all')}.tsv"
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "a") as log:
        log.write(f"{item.nodeid}\t{_cpu_seconds() - start:.2f}\n")
