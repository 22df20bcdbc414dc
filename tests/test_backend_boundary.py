"""Modelling code names no backend: tensorflow, jax and torch are imported (at module level or
inside a function) only by keras_bert_suite/backend_kernels.py, which holds every
backend-specific fast path with its reason and measurement."""

import ast
import pathlib


PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_suite"
BACKENDS = {"tensorflow", "jax", "jaxlib", "torch"}
# Modelling code: layers and block kinds (not the serving forms, layers/serving/: TensorFlow
# graph code for SavedModels by design), the encoder, the task models and their base classes, the
# training package (losses, metrics, optimizers, schedules, callbacks), distillation's
# model and losses, pruning, the model transforms, and the family records.
MODELLING = ("layers/*.py", "layers/blocks/**/*.py", "models/**/*.py", "transforms/**/*.py", "training/**/*.py",
             "tasks/task.py", "tasks/model_base.py", "tasks/*/model.py",
             "distillation/distiller.py", "distillation/losses.py",
             "distillation/internals.py", "distillation/student_init.py", "pruning/**/*.py",
             "families/**/*.py")
# Not modelling code, legitimately tied to TensorFlow (file -> why). The tf.distribute /
# keras.distribution set-up lives in keras_bert_suite/distribution/, outside these globs.
EXEMPT = {
    "training/optimizers.py": "folds TF's tf.IndexedSlices gradients and sums them over "
                              "tf.distribute replicas before clipping (TF-only plumbing)",
}


def _backend_imports(path):
    """(line, module) of every import of a backend anywhere in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in BACKENDS]
    return found


def _modelling_files():
    files = {path for pattern in MODELLING for path in PACKAGE.glob(pattern)}
    return sorted(path for path in files if path.relative_to(PACKAGE).as_posix() not in EXEMPT)


def test_modelling_code_imports_no_backend():
    files = _modelling_files()
    assert any(path.name == "dropout.py" for path in files)  # the globs found the code
    offenders = [f"{path.relative_to(PACKAGE)}:{line} imports {name}"
                 for path in files for line, name in _backend_imports(path)]
    assert not offenders, (
        "modelling code must use keras.ops only; move the backend-specific path into "
        "keras_bert_suite/backend_kernels.py (with its reason and measurement):\n"
        + "\n".join(offenders))


def test_exempt_files_exist():
    # A renamed or deleted file must leave the exemption list too.
    missing = [name for name in EXEMPT if not (PACKAGE / name).exists()]
    assert not missing, f"EXEMPT names files that do not exist: {missing}; update the list"


def test_backend_kernels_loads_backends_only_inside_functions():
    tree = ast.parse((PACKAGE / "backend_kernels.py").read_text())
    top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = {alias.name if isinstance(node, ast.Import) else node.module
             for node in top_level for alias in node.names}
    assert not {name.split(".")[0] for name in names} & BACKENDS, names
