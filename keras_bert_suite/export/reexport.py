"""Re-export in a KERAS_BACKEND=tensorflow subprocess (models trained on JAX or PyTorch).

JAX exports carry XlaCallModule, which stock TF Serving refuses, and PyTorch cannot export a
SavedModel in Keras 3.15; a `.keras` file reloaded under TensorFlow gives the same numbers
(~1e-9) and a plain TF graph.

One worker process serves every re-export of a Python process: starting TensorFlow and the
library costs seconds, which a script exporting several models (tasks, precisions) would
otherwise pay per model. The worker reads one spec path per line on stdin and answers on
stdout with a line `done <spec path>`; its result (ok or the traceback) is a file beside the
spec. Run alone as `python -m keras_bert_suite.export.reexport spec.json`.
"""

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback

DONE = "done "


def reexport_in_tensorflow(model, directory, options, model_name, write_warmup=True,
                           precision="float32", calibration_texts=None):
    """Saves `model` (.keras, its preprocessor and label names inside), then writes the
    SavedModel to `directory` from the TensorFlow-backend worker process."""
    import keras

    with tempfile.TemporaryDirectory() as work:
        model_path = os.path.join(work, "model.keras")
        model.save(model_path)
        # The preprocessor travels on its own too: a bare encoder's config has none, and an
        # export may override a task's (export_saved_model(..., preprocessor=...)).
        spec = {"model": model_path, "directory": directory, "options": options,
                "model_name": model_name, "write_warmup": write_warmup,
                "precision": precision, "calibration_texts": calibration_texts,
                "preprocessor": keras.saving.serialize_keras_object(model.preprocessor),
                "label_names": getattr(model, "label_names", None)}
        spec_path = os.path.join(work, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        error = _WORKER.run(spec_path)
    if error:
        raise RuntimeError(f"Re-exporting from a TensorFlow-backend process failed:\n"
                           f"{error[-3000:]}")


class _Worker:
    """The TensorFlow-backend process, started on first use and restarted if it died."""

    def __init__(self):
        self.process = None
        self.log = None
        self.lock = threading.Lock()
        atexit.register(self.close)

    def run(self, spec_path):
        """Runs one spec; returns None or the error text."""
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._start()
            try:
                self.process.stdin.write(spec_path + "\n")
                self.process.stdin.flush()
                for line in self.process.stdout:  # TensorFlow may print lines of its own
                    if line.rstrip("\n") == DONE + spec_path:
                        break
            except BrokenPipeError:
                pass
            result_path = spec_path + ".result"
            if not os.path.exists(result_path):  # the worker died during this export
                self.process.wait()
                return (f"the worker exited with code {self.process.returncode}:\n"
                        f"{self._log_tail()}")
            with open(result_path, encoding="utf-8") as f:
                result = f.read()
            return None if result == "ok" else result

    def _start(self):
        if self.log is None:
            self.log = tempfile.TemporaryFile(mode="w+")  # stderr: unread pipes can block
        env = dict(os.environ, KERAS_BACKEND="tensorflow")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "keras_bert_suite.export.reexport", "--serve"], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)

    def _log_tail(self):
        self.log.seek(0)
        return self.log.read()[-3000:]

    def close(self):
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()


_WORKER = _Worker()


def export_from_spec(spec_path):
    import keras

    import keras_bert_suite
    import keras_bert_suite.text  # noqa: F401  registers the serializable text classes
    from keras_bert_suite.export.tf_writer import write_saved_model

    with open(spec_path) as f:
        spec = json.load(f)
    model = keras_bert_suite.load_model(spec["model"], compile=False)  # any of our models
    model.preprocessor = keras.saving.deserialize_keras_object(spec["preprocessor"])
    if spec["label_names"] is not None:
        model.label_names = spec["label_names"]
    write_saved_model(model, spec["directory"], spec["options"], spec["model_name"],
                      spec["write_warmup"], spec["precision"], spec["calibration_texts"])


def serve():
    """The worker's loop: a spec path per stdin line until stdin closes."""
    import keras

    for line in sys.stdin:
        spec_path = line.rstrip("\n")
        try:
            export_from_spec(spec_path)
            result = "ok"
        except Exception:
            result = traceback.format_exc()
        finally:
            keras.backend.clear_session()  # names and graphs of the last model
        with open(spec_path + ".result", "w", encoding="utf-8") as f:
            f.write(result)
        print(DONE + spec_path, flush=True)


if __name__ == "__main__":
    serve() if sys.argv[1:] == ["--serve"] else export_from_spec(sys.argv[1])
