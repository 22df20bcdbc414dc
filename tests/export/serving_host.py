"""Runs SavedModels the way a serving host does: only tensorflow and tensorflow_text.

Run as `python serving_host.py` from a directory outside the repo: it answers one
`requests.pkl<TAB>results.pkl` line of its standard input after another (printing
`answered results.pkl` after each) until that input closes. keras_bert_suite (and jax,
torch, transformers) are made unimportable, so an export that still needs our Python code
fails here. One process answers the requests of a test module and of the next ones while it
stays small (TensorFlow takes seconds to import; tests/export/conftest.py starts and stops
it). Requests: a list of dicts {"export", "signature", "inputs": {name: numpy array}} or
{"export", "show": True} (saved_model_cli show --all).
Results: the same list with {output name: numpy array}, or {"show": text}, or {"error": ...}.
"""

import contextlib
import importlib.abc
import io
import pickle
import sys

BLOCKED = ("keras_bert_suite", "tests", "jax", "jaxlib", "torch", "transformers", "keras_hub")
# keras is not blocked: `import tensorflow` itself imports it when it is installed (TF's
# lazy tf.keras probing). Our code never needs it here: keras_bert_suite cannot be imported.
MUST_NOT_IMPORT = BLOCKED


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not installed on this serving host")
        return None


def answer(requests_path, results_path):
    import tensorflow as tf
    from tensorflow.python.tools import saved_model_cli

    with open(requests_path, "rb") as f:
        requests = pickle.load(f)
    loaded, results = {}, []
    for request in requests:
        try:
            if request.get("show"):
                out = io.StringIO()
                sys.argv = ["saved_model_cli", "show", "--dir", request["export"], "--all"]
                with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
                    saved_model_cli.main()  # ends with sys.exit
                results.append({"show": out.getvalue()})
                continue
            if request["export"] not in loaded:
                loaded[request["export"]] = tf.saved_model.load(request["export"])
            function = loaded[request["export"]].signatures[request["signature"]]
            outputs = function(**{k: tf.constant(v) for k, v in request["inputs"].items()})
            results.append({k: v.numpy() for k, v in outputs.items()})
        except Exception as error:  # reported to the test, which fails with the message
            results.append({"error": f"{type(error).__name__}: {error}"})
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in MUST_NOT_IMPORT)
    with open(results_path, "wb") as f:
        pickle.dump({"results": results, "leaked_modules": leaked}, f)


def main():
    sys.meta_path.insert(0, Blocker())
    import tensorflow  # noqa: F401
    import tensorflow_text  # noqa: F401  registers the tokenizer ops, as TF Serving links them

    for line in sys.stdin:
        requests_path, results_path = line.rstrip("\n").split("\t")
        answer(requests_path, results_path)
        print("answered", results_path, flush=True)


if __name__ == "__main__":
    main()
