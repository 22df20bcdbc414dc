"""Shared pieces of the export tests: real text, awkward strings, the serving-host runner."""

import atexit
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

SERVING_HOST = os.path.join(os.path.dirname(__file__), "serving_host.py")

# A random 2-layer BERT (architecture only) keeps exports fast; MiniLM brings real weights.
PRESET = "bert_uncased_L-2_H-128_A-2"
SEQUENCE_LENGTH = 32
SENTIMENT = ["rotten", "fresh"]
NER_TAGS = ["O", "B-person", "I-person", "B-location", "I-location"]

# Strings a server must answer (not error on): empty, invalid UTF-8, control characters, emoji.
AWKWARD_TEXTS = [
    b"",
    b"caf\xc3 \xff\xfe broken \xed\xa0\x80 bytes",
    "tab\there\x00nul \x07bell \x1b[31mansi\r\n".encode(),
    "emoji 😀👍🏽 family 👨‍👩‍👧 flags 🇫🇷 mixed😀words".encode(),
    "[CLS] [SEP] [MASK] \u200b zero width".encode(),
]


@pytest.fixture(scope="session")
def real_sentences(sotu_files):
    """A few real sentences and one real 100,000-character text (State of the Union)."""
    with open(sotu_files[-1], encoding="utf-8") as f:
        text = f.read()
    sentences = [s.strip() + "." for s in text.split(".") if 40 < len(s.strip()) < 200][:6]
    long_text = " ".join(open(p, encoding="utf-8").read() for p in sotu_files[:12])[:100_000]
    assert len(long_text) == 100_000
    return sentences, long_text


def small(task_class, **arguments):
    """A task on the random small BERT, its preprocessor at SEQUENCE_LENGTH."""
    return task_class.from_preset(PRESET, load_weights=False, sequence_length=SEQUENCE_LENGTH,
                                  **arguments)


def small_task_models():
    """The models both export suites serve: every task head (and a pair regression) on the
    small BERT, and the bare encoder."""
    from keras_bert_suite import (
        BertClassifier, BertEncoder, BertMultipleChoice, BertSpanLabeler, BertTokenClassifier)
    from keras_bert_suite.tasks.span_labeler.preprocessor import SpanLabelerPreprocessor

    return {
        "classifier": small(BertClassifier, num_classes=2, label_names=SENTIMENT),
        "pair_regression": small(BertClassifier, num_classes=1),  # STS-B style
        # windows of 32 - 3 - question pieces, a new one every 10 (run_squad's rule)
        "span_labeler": BertSpanLabeler.from_preset(
            PRESET, load_weights=False, preprocessor=SpanLabelerPreprocessor.from_preset(
                PRESET, sequence_length=SEQUENCE_LENGTH, doc_stride=10)),
        "token_classifier": small(BertTokenClassifier, num_classes=len(NER_TAGS),
                                  label_names=NER_TAGS),
        "multiple_choice": small(BertMultipleChoice, num_choices=4),
        "encoder": BertEncoder.from_preset(PRESET, load_weights=False),
    }


def as_strings(values):
    return np.array([v if isinstance(v, bytes) else v.encode("utf-8") for v in values], object)


def run_on_serving_host(requests, tmp_dir):
    """Runs requests (see serving_host.py) in a TF-only process, started outside the
    repository on the first call and kept for the next until it grows large (see
    HOST_MEMORY_KEPT; TensorFlow's import costs a process 10-15 CPU seconds); returns
    (results, leaked module names)."""
    requests_path = os.path.join(tmp_dir, "requests.pkl")
    results_path = os.path.join(tmp_dir, "results.pkl")
    with open(requests_path, "wb") as f:
        pickle.dump(requests, f)
    host = _serving_host(tmp_dir)
    host.stdin.write(f"{requests_path}\t{results_path}\n")
    host.stdin.flush()
    for line in host.stdout:  # TensorFlow may print too: wait for the host's own line
        if line == f"answered {results_path}\n":
            break
    else:
        _SERVING_HOSTS.pop().wait()
        with open(host.stderr_path, encoding="utf-8", errors="replace") as f:
            raise AssertionError(f"the serving host ended: {f.read()[-3000:]}")
    with open(results_path, "rb") as f:
        answer = pickle.load(f)
    return answer["results"], answer["leaked_modules"]


_SERVING_HOSTS = []  # the one running serving host, once started


def _serving_host(tmp_dir):
    if not _SERVING_HOSTS:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KERAS_BACKEND")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        stderr_path = os.path.join(tmp_dir, "serving_host.stderr")
        with open(stderr_path, "w") as stderr:  # a file: a full pipe would stop the host
            host = subprocess.Popen([sys.executable, SERVING_HOST], cwd=tmp_dir, env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=stderr, text=True)
        host.stderr_path = stderr_path
        _SERVING_HOSTS.append(host)
        atexit.register(_stop_serving_host, host)
    return _SERVING_HOSTS[0]


def _stop_serving_host(host):
    host.stdin.close()  # the host's loop ends with its input
    host.wait()


# A host keeps the memory of every SavedModel it loaded (TensorFlow does not hand it back):
# three hosts kept to the end of `make test` held 3.4 GiB, and the five test processes were
# left none. One that has grown past this is stopped when its test module ends (tests/
# conftest.py); a small one serves the next module too.
HOST_MEMORY_KEPT = 768 << 20


def stop_large_serving_host():
    if _SERVING_HOSTS and _resident_bytes(_SERVING_HOSTS[0].pid) > HOST_MEMORY_KEPT:
        _stop_serving_host(_SERVING_HOSTS.pop())


def _resident_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # ended, or no /proc: nothing to free
        pass
    return 0
