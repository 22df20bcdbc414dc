"""The package's dependency arrows, as docs/design.md draws them: every import (module level or
inside a function) from one top-level part of keras_bert_suite to another must be an arrow
below. A new arrow fails this test: draw it in docs/design.md and add it here, or import the
other way round."""

import ast
import collections
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_suite"
# part -> the parts it may import (a part: a subpackage, or a top-level module).
ARROWS = {
    # The package's root takes its public task names from the task registry (plain strings).
    "__init__": {"task_registry"},
    "cli": {"recipe_runner", "tasks", "export", "serving", "models", "presets", "text",
            "names", "demo", "list_presets", "BertEncoder", "BertPreprocessor",
            "BertPretrainer"},
    "demo": {"recipe_runner", "tasks", "export", "serving", "presets", "data",
             "BertEncoder", "BertPreprocessor"},
    "recipe_runner": {"distillation", "tasks", "distribution", "models", "text", "training",
                      "storage", "task_registry"},
    "distillation": {"transforms", "tasks", "models", "text", "training", "names"},
    "pruning": {"transforms", "models", "text", "names"},
    # transforms: above models and tasks (neither imports it), yet it
    # imports neither: it reaches encoders and tasks through what they define
    # (is_bert_encoder, encoder, configs, weight_map), so no circle can close through it.
    "transforms": set(),
    "tasks": {"export", "models", "layers", "presets", "checkpoints", "text", "data",
              "training", "storage", "names", "task_registry"},
    "export": {"transforms", "models", "layers", "text", "names", "cpu_flags"},
    "distribution": {"models"},
    # keras_compat: the one module that touches Keras' private attributes (a leaf).
    "models": {"presets", "checkpoints", "families", "layers", "encoder_config",
               "keras_compat", "checkpoint_errors"},
    # text -> presets -> checkpoints -> families: a tokenizer's from_preset resolves the name
    # (presets) and reads its own files from the checkpoint's directory; a checkpoint writer
    # asks the tokenizer object it is handed to write its files, so checkpoints never imports
    # text; the readers look a family up by model_type, and a family record (its config keys,
    # module tree and presets) imports no checkpoint reader.
    "text": {"presets", "checkpoints", "names"},
    "presets": {"checkpoints", "families", "checkpoint_errors"},
    # checkpoints -> layers: the weight table's transformer-layer rows are the block kinds'
    # (layers/blocks/).
    "checkpoints": {"families", "layers", "checkpoint_errors"},
    "families": {"encoder_config", "checkpoint_errors"},
    "checkpoint_errors": set(),
    # encoder_config: the encoder's arguments, which the encoder and the checkpoint maps read.
    "encoder_config": set(),
    "training": {"storage", "backend_kernels", "keras_compat", "cpu_flags"},
    # cpu_flags: /proc/cpuinfo's flags, read once for the int8_vnni check and bf16 (a leaf).
    "cpu_flags": set(),
    "layers": {"backend_kernels", "keras_compat"},
    "serving": {"names"},
}
# Old import paths forwarded to the part that now holds the code, file by file, until nothing
# imports them there (none left).
FORWARDERS = {}


def _part(path):
    parts = path.relative_to(PACKAGE).parts
    return parts[0].removesuffix(".py")


def _imported_parts(path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "keras_bert_suite":
                yield from (alias.name for alias in node.names)
            elif node.module.startswith("keras_bert_suite."):
                yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            yield from (alias.name.split(".")[1] for alias in node.names
                        if alias.name.startswith("keras_bert_suite."))


def test_every_import_is_a_drawn_arrow():
    found = collections.defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        source = _part(path)
        allowed = ARROWS.get(source, set()) | FORWARDERS.get(
            path.relative_to(PACKAGE).as_posix(), set())
        for target in _imported_parts(path):
            if target != source and target not in allowed:
                found[(source, target)].add(str(path.relative_to(PACKAGE)))
    assert not found, "imports that are no arrow of docs/design.md:\n" + "\n".join(
        f"  {source} -> {target}: {sorted(files)}" for (source, target), files in found.items())


def test_the_arrows_form_no_circle():
    """Parts form a tree of floors: no part reaches itself through the arrows."""

    def reaches(start, part, seen):
        for target in ARROWS.get(part, ()):
            if target == start or (target not in seen and reaches(start, target, seen | {target})):
                return True
        return False

    assert not [part for part in ARROWS if reaches(part, part, {part})]


# Files that import the package's own modules inside functions, and why (start-up time: what
# `kbs --help` and the TF-free parts import; or a cycle at import time). Any other file
# imports them at its top.
LAZY_IMPORTS = {
    "cli.py": "`kbs --help` loads no Keras/TF: each command imports its part when it runs",
    "demo.py": "the demo's TF, export and serving parts load only for the step that needs them",
    "distribution/keras_distribution.py": "the encoder's layout only when model parallelism is asked for",
    "export/reexport.py": "the re-export subprocess imports the package once TF is its backend",
    "export/saved_model.py": "tf_writer (TF) on the TF path only; reexport on other backends",
    "export/serving_graph.py": "text (tensorflow_text) for int8 calibration",
    "families/__init__.py": "the family modules import this registry: a cycle at import time",
    "models/encoder.py": "from_checkpoint and checkpoints build encoders: a cycle at import time",
    "pruning/calibration.py": "text inputs pull TF, only when calibrating on raw text",
    "recipe_runner/distilling.py": "recipe_runner stays TF-free; tasks and distillation load TF at run time",
    "recipe_runner/pretraining.py": "recipe_runner stays TF-free; the pretrainer loads TF at run time",
    "serving/server.py": "TF (model store) and gRPC load only when serving starts",
    "tasks/feature_extractor/embed.py": "`kbs embed` loads Keras/TF only when it runs",
    "tasks/pretrainer/data/command.py": "`kbs --help` imports it; Beam/TF only when it runs",
    "tasks/pretrainer/data/corpus_buckets.py": "`kbs --help` imports it; TF only in the workers",
    "tasks/pretrainer/data/pipeline.py": "TF and Beam only when the pipeline runs",
    "tasks/pretrainer/data/recipe_data.py": "recipe checks stay TF/Beam-free; data loads them at run time",
    "tasks/recipe_contract.py": "recipe loading stays TF-free; length buckets pull tensorflow_text",
}


def _has_function_level_package_import(tree):
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return any(
        (isinstance(n, ast.ImportFrom) and (n.module or "").startswith("keras_bert_suite"))
        or (isinstance(n, ast.Import) and any(a.name.startswith("keras_bert_suite") for a in n.names))
        for function in functions for n in ast.walk(function))


def test_function_level_imports_are_listed():
    lazy = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
            if _has_function_level_package_import(ast.parse(path.read_text()))}
    assert lazy == set(LAZY_IMPORTS), (f"not in LAZY_IMPORTS: {sorted(lazy - set(LAZY_IMPORTS))}; "
                                       f"listed, none left: {sorted(set(LAZY_IMPORTS) - lazy)}")
