"""Re-export in a KERAS_BACKEND=tensorflow subprocess (models trained on JAX or PyTorch).

JAX exports carry XlaCallModule, which stock TF Serving refuses, and PyTorch cannot export a
SavedModel in Keras 3.15; a `.keras` file reloaded under TensorFlow gives the same numbers
(~1e-9) and a plain TF graph. Run as `python -m keras_bert_suite.export.reexport spec.json`.
"""

import json
import os
import subprocess
import sys
import tempfile


def reexport_in_tensorflow(model, directory, options, model_name, write_warmup=True,
                           precision="float32", calibration_texts=None):
    """Saves `model` (.keras, its preprocessor and label names inside), then writes the
    SavedModel to `directory` from a TensorFlow-backend Python process."""
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
        env = dict(os.environ, KERAS_BACKEND="tensorflow")
        result = subprocess.run([sys.executable, "-m", "keras_bert_suite.export.reexport",
                                 spec_path], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"Re-exporting from a TensorFlow-backend process failed "
                           f"(exit {result.returncode}):\n{result.stderr[-3000:]}")


def main(spec_path):
    import keras

    import keras_bert_suite.text  # noqa: F401  registers the serializable text classes
    from keras_bert_suite.tasks import load_model
    from keras_bert_suite.export.tf_writer import write_saved_model

    with open(spec_path) as f:
        spec = json.load(f)
    model = load_model(spec["model"], compile=False)
    model.preprocessor = keras.saving.deserialize_keras_object(spec["preprocessor"])
    if spec["label_names"] is not None:
        model.label_names = spec["label_names"]
    write_saved_model(model, spec["directory"], spec["options"], spec["model_name"],
                      spec["write_warmup"], spec["precision"], spec["calibration_texts"])


if __name__ == "__main__":
    main(sys.argv[1])
