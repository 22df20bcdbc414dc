"""Every code example in the docs runs, and shows what it really prints.

(a) The `>>>` examples in the docstrings of every module of `keras_bert_suite`: one test per
    docstring, its examples run in order in one namespace (the module's globals, as `doctest`
    does), in a fresh working directory, with ELLIPSIS and NORMALIZE_WHITESPACE. An expected
    output must match what the example prints.
(b) Every ```python block of README.md, docs/*.md and serving/README.md: one test per file, its
    blocks run in order in one namespace (as a reader runs them in one session), in a fresh
    working directory. A line `expression  # literal` (e.g. `x.shape   # (2, 64, 384)`) is
    checked: the expression must equal the literal. Shell blocks are not run, except that a
    ```sh block running `kbs serve` starts the development server (in this process, on free
    ports) before the next python block, as the reader would start it.

What the tests give the examples that the docs leave to the reader (`SETUP_NAMES`):
* `train_texts`, `train_labels`: the first 16 real Rotten Tomatoes sentences and labels
  (`fetch_rotten_tomatoes`), so README's fine-tuning runs on real data in seconds (one batch
  of 16: one length bucket, so `fit` compiles one step function, not one per bucket);
* `questions`, `contexts`: 8 real Quoref questions and their passages (`fetch_quoref`).
The servers run on free ports: a `RestClient()` / `GrpcClient()` built with its default address,
or an example that names `localhost:8501` / `localhost:8500`, reaches the test server
instead (the port in the example's text is replaced; nothing else is).

Examples that write SavedModels or serve them are TensorFlow-only (`needs_savedmodel`,
`needs_tf_serving`): a model trained on JAX or PyTorch is exported by a TensorFlow process.
"""

import ast
import contextlib
import doctest
import importlib
import os
import pathlib
import pkgutil
import re
import shutil

import keras
import pytest

import keras_bert_suite

REPO = pathlib.Path(__file__).resolve().parents[1]

SKIPPED_MODULES = ()
# keras.distribution does not exist on PyTorch (Keras 3.15).
NEEDS_KERAS_DISTRIBUTION = {"keras_bert_suite.models.encoder.BertEncoder.get_layout_map"}

# Docstrings whose examples write a SavedModel or talk to a served one.
NEEDS_SAVEDMODEL = {
    "keras_bert_suite.export.saved_model.export_saved_model",
    "keras_bert_suite.export.op_check",
}
READS_SAVED_MODELS = {"keras_bert_suite.export.op_check"}  # the served_models fixture
NEEDS_TF_SERVING = {
    "keras_bert_suite.serving.client",
    "keras_bert_suite.serving.errors.ServingError",
    "keras_bert_suite.serving.grpc_server",
    "keras_bert_suite.serving.model_store",
    "keras_bert_suite.serving.server",
}
# Docstrings about reading data, its baseline and tf.data pipelines (text layers are
# TensorFlow graphs on every backend): run once, in KBS_TF_GRAPH_BACKEND's process.
TF_GRAPH_ONLY = {
    "keras_bert_suite.tasks.classifier.data",
    "keras_bert_suite.tasks.classifier.data.make_classification_dataset",
    "keras_bert_suite.tasks.classifier.rotten_tomatoes",
    "keras_bert_suite.tasks.multiple_choice.swag",
    "keras_bert_suite.tasks.span_labeler.squad",
}
DOC_FILES_NEEDING_SERVING = {"README.md", "docs/export.md", "serving/README.md"}

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
IS_TENSORFLOW = keras.backend.backend() == "tensorflow"


def _tensorflow_only(marker_name):
    """tests/conftest.py skips these outside the TensorFlow process."""
    return [getattr(pytest.mark, marker_name)]


def _public_modules():
    names = [keras_bert_suite.__name__]
    for info in pkgutil.walk_packages(keras_bert_suite.__path__, "keras_bert_suite."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        if any(info.name == skip or info.name.startswith(skip + ".")
               for skip in SKIPPED_MODULES):
            continue
        names.append(info.name)
    return names


def _find_docstring_tests():
    finder = doctest.DocTestFinder()
    tests = {}
    for name in _public_modules():
        module = importlib.import_module(name)
        for test in finder.find(module):
            if test.examples and test.name.startswith(name):
                tests[test.name] = test
    return tests


DOCSTRING_TESTS = _find_docstring_tests()


def _docstring_params():
    params = []
    for name in sorted(DOCSTRING_TESTS):
        marks = []
        if name in NEEDS_SAVEDMODEL:
            marks = _tensorflow_only("needs_savedmodel")
        elif name in NEEDS_TF_SERVING:
            marks = _tensorflow_only("needs_tf_serving")
        elif name in TF_GRAPH_ONLY:
            marks = [pytest.mark.needs_tf_graph]
        elif name in NEEDS_KERAS_DISTRIBUTION:
            marks = [pytest.mark.skipif(keras.backend.backend() == "torch",
                                        reason="keras.distribution is absent on PyTorch")]
        params.append(pytest.param(name, marks=marks, id=name.removeprefix("keras_bert_suite.")))
    return params


# ---------------------------------------------------------------------------------------------
# What the examples need: real data for the names the docs leave to the reader, a small real
# export and servers on free ports.

@pytest.fixture(scope="session")
def setup_names():
    """SETUP_NAMES (see the module docstring), from the real cached corpora."""
    from keras_bert_suite.data import corpora
    from keras_bert_suite.tasks.classifier.rotten_tomatoes import load_rotten_tomatoes
    from keras_bert_suite.tasks.span_labeler.quoref import read_quoref_task

    texts, labels = load_rotten_tomatoes()
    quoref = read_quoref_task(corpora.fetch_quoref())[:8]  # (passage, question, answers)
    questions = [question for _, question, _ in quoref]
    contexts = [passage for passage, _, _ in quoref]
    return {"train_texts": list(texts[:16]), "train_labels": list(labels[:16]),
            "questions": questions, "contexts": contexts}


@pytest.fixture(scope="session")
def served_models(tmp_path_factory):
    """saved_models/ with a small real classifier export: bert_classifier/1, sentiment/{1,2}."""
    if not IS_TENSORFLOW:
        pytest.skip("exports are written by the TensorFlow backend")
    from keras_bert_suite import BertClassifier
    from keras_bert_suite.export import export_saved_model

    root = tmp_path_factory.mktemp("docs_saved_models") / "saved_models"
    classifier = BertClassifier.from_preset(
        "bert_uncased_L-2_H-128_A-2", load_weights=False, num_classes=2, sequence_length=16,
        label_names=["rotten", "fresh"])
    export_saved_model(classifier, str(root), name="bert_classifier")
    for version in ("1", "2"):
        shutil.copytree(root / "bert_classifier" / "1", root / "sentiment" / version)
    return root


@contextlib.contextmanager
def _servers(store):
    """REST and gRPC servers on free ports; the clients' default addresses point at them."""
    from keras_bert_suite.serving import client
    from keras_bert_suite.serving.grpc_server import start_grpc_server
    from keras_bert_suite.serving.server import RestServer

    rest = RestServer(store, port=0).start()
    grpc_server, grpc_port = start_grpc_server(store, port=0)
    rest_defaults = client.RestClient.__init__.__defaults__
    grpc_defaults = client.GrpcClient.__init__.__defaults__
    client.RestClient.__init__.__defaults__ = (rest.url,) + rest_defaults[1:]
    client.GrpcClient.__init__.__defaults__ = (f"127.0.0.1:{grpc_port}",) + grpc_defaults[1:]
    try:
        yield {"8501": str(rest.port), "8500": str(grpc_port)}
    finally:
        client.RestClient.__init__.__defaults__ = rest_defaults
        client.GrpcClient.__init__.__defaults__ = grpc_defaults
        rest.stop()
        grpc_server.stop(grace=None)


@pytest.fixture
def in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    environ = dict(os.environ)
    yield tmp_path
    os.environ.clear()  # an example may set KERAS_BACKEND for its reader; not for later tests
    os.environ.update(environ)


# ---------------------------------------------------------------------------------------------
# (a) docstrings

@pytest.mark.parametrize("name", _docstring_params())
def test_docstring_examples(name, in_tmp_dir, request):
    test = DOCSTRING_TESTS[name]
    test.globs = dict(test.globs)
    with contextlib.ExitStack() as stack:
        if name in NEEDS_TF_SERVING or name in READS_SAVED_MODELS:
            shutil.copytree(request.getfixturevalue("served_models"), "saved_models")
        if name in NEEDS_TF_SERVING:
            from keras_bert_suite.serving.model_store import ModelStore

            store = ModelStore(model_base_path="saved_models", poll_seconds=0.2)
            stack.callback(store.stop)
            stack.enter_context(_servers(store.start_polling()))
        report = []
        runner = doctest.DocTestRunner(optionflags=OPTIONS)
        result = runner.run(test, out=report.append, clear_globs=True)
    assert result.failed == 0, "".join(report)


def test_docstring_examples_are_collected():
    """The collector sees the docstrings (a broken finder must not pass silently)."""
    assert len(DOCSTRING_TESTS) >= 30
    assert "keras_bert_suite.text.tokenizer.BertTokenizer" in DOCSTRING_TESTS


# ---------------------------------------------------------------------------------------------
# (b) README.md, docs/*.md, serving/README.md

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
DOC_FILES = sorted(["README.md", "serving/README.md"]
                   + [str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")])


def code_blocks(path):
    """[(language, code, first line number)] of a markdown file's fenced blocks."""
    text = (REPO / path).read_text()
    return [(match.group(1), match.group(2), text[:match.start()].count("\n") + 2)
            for match in FENCE.finditer(text)]


def _checked_lines(code):
    """Line numbers of `expression  # literal` statements, with the literal."""
    checks = {}
    for node in ast.parse(code).body:
        if not isinstance(node, ast.Expr):
            continue
        line = code.splitlines()[node.end_lineno - 1]
        _, _, comment = line.partition("  #")
        try:
            checks[node.end_lineno] = ast.literal_eval(comment.strip())
        except (ValueError, SyntaxError):
            continue
    return checks


def run_python_block(code, namespace, filename):
    """Run a block statement by statement; check `expression  # literal` lines."""
    checks = _checked_lines(code)
    for node in ast.parse(code, filename).body:
        if isinstance(node, ast.Expr):
            value = eval(compile(ast.Expression(node.value), filename, "eval"), namespace)
            if node.end_lineno in checks:
                expected = checks[node.end_lineno]
                assert value == expected, (
                    f"{filename} line {node.end_lineno}: {ast.unparse(node)} is {value!r}, "
                    f"the doc says {expected!r}")
        else:
            exec(compile(ast.Module([node], []), filename, "exec"), namespace)


def _doc_params():
    params = []
    for path in DOC_FILES:
        if not any(language == "python" for language, _, _ in code_blocks(path)):
            continue
        marks = _tensorflow_only("needs_tf_serving") if path in DOC_FILES_NEEDING_SERVING else []
        params.append(pytest.param(path, marks=marks, id=path))
    return params


@pytest.mark.parametrize("path", _doc_params())
def test_markdown_code_blocks(path, in_tmp_dir, setup_names, request):
    from keras_bert_suite.serving.model_store import ModelStore

    namespace = {"__name__": "__main__", **setup_names}
    with contextlib.ExitStack() as stack:
        ports = None
        for language, code, line in code_blocks(path):
            filename = f"{path}:{line}"
            if language in ("sh", "bash") and re.search(r"^(kbs serve|docker compose)\b", code, re.M):
                if ports is None:  # the reader starts `kbs serve` here; so do we
                    if path == "serving/README.md":  # its models: the page's own config
                        shutil.copytree(request.getfixturevalue("served_models"), "saved_models")
                        store = ModelStore(model_base_path="saved_models",
                                           config_file=str(REPO / "serving/models.config"),
                                           poll_seconds=0.2)
                    else:
                        os.makedirs("saved_models", exist_ok=True)
                        store = ModelStore(model_base_path="saved_models", poll_seconds=0.2)
                    stack.callback(store.stop)
                    ports = stack.enter_context(_servers(store.start_polling()))
            elif language == "python":
                if ports:
                    for port, free in ports.items():
                        code = code.replace(f"localhost:{port}", f"localhost:{free}")
                run_python_block(code, namespace, filename)


def test_every_doc_file_is_checked():
    """A new markdown file with python blocks is picked up (and README's are among them)."""
    assert "README.md" in [param.values[0] for param in _doc_params()]
