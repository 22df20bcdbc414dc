"""Finds, loads and re-polls SavedModels laid out as TF Serving expects them.

Layout: `<base_path>/<integer version>/saved_model.pb` (+ `variables/`, `assets/`). A version
directory counts once its `saved_model.pb` exists, so an exporter that writes into a temporary
name and renames it (as `kbs export` does) is never caught half-written. Directories whose name
is not an integer (".tmp-3", "3.partial") are ignored, as TF Serving ignores them.

Three ways to say what to serve, mirroring TF Serving's flags:
* `ModelStore(model_base_path="saved_models")` — every sub-directory is a model (our default;
  new model directories are picked up too), each with TF Serving's default version policy
  (the newest version only);
* `ModelStore(model_base_path="saved_models/clf", model_name="clf")` — one model;
* `ModelStore(config_file="serving/models.config")` — a text `ModelServerConfig` with version
  policies and labels. A `base_path` that does not exist here but names a container path
  (`/models/<name>` in serving/compose.yaml) is looked up as `<model_base_path>/<name>`.

Only tensorflow and tensorflow_text are needed (as on a serving host), never Keras models.

Example (a `saved_models/bert_classifier/` written by `export_saved_model`):
>>> store = ModelStore(model_base_path="saved_models", poll_seconds=1.0)
>>> served = store.resolve("bert_classifier")          # newest version
>>> served.version
1
>>> outputs = served.run("serving_default", {"text": np.array([b"great movie"], object)})
>>> outputs["label_names"]
array([[b'rotten', b'fresh']], dtype=object)
"""

import dataclasses
import logging
import os
import threading

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the tf-text ops the SavedModels use
from google.protobuf import json_format
from google.protobuf import text_format
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert_suite.names import DEFAULT_SIGNATURE
from keras_bert_suite.serving.errors import NotFoundError
from keras_bert_suite.serving.errors import RequestError
from keras_bert_suite.serving.signature_check import check_input_names, check_shape

log = logging.getLogger(__name__)

# One model call at a time per process. A restored signature runs its body as a nested
# function call on TF's inter-op thread pool (one thread per core) and waits for it; many
# concurrent callers fill the pool with waiters and deadlock (seen with 32 REST clients on 2
# cores). The ops inside a call still use every core; HTTP parsing and JSON stay concurrent.
# TF Serving avoids this with its own session thread pools and request batching.
_MODEL_CALL_LOCK = threading.Lock()


@dataclasses.dataclass
class ModelConfig:
    """What to serve of one model: TF Serving's `ModelConfig`, reduced to what we use.

    `policy` is ("latest", n), ("all",) or ("specific", frozenset of versions).
    """

    name: str
    base_path: str
    policy: tuple = ("latest", 1)
    labels: dict = dataclasses.field(default_factory=dict)

    def select(self, versions):
        versions = sorted(versions)
        if self.policy[0] == "all":
            return versions
        if self.policy[0] == "specific":
            return [v for v in versions if v in self.policy[1]]
        return versions[-self.policy[1]:] if self.policy[1] > 0 else []


def read_model_server_config(path, model_base_path=None):
    """Parse a text-format `ModelServerConfig` (needs tensorflow-serving-api) into ModelConfigs."""
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    with open(path, encoding="utf-8") as f:
        try:
            text_format.Parse(f.read(), config)
        except text_format.ParseError as error:
            raise ValueError(f"{path}: not a text ModelServerConfig: {error}") from None
    models = []
    for entry in config.model_config_list.config:
        if entry.model_platform not in ("", "tensorflow"):
            raise ValueError(f"{path}: model '{entry.name}' has model_platform "
                             f"'{entry.model_platform}'; only 'tensorflow' is served.")
        base_path = entry.base_path
        if not os.path.isabs(base_path):
            base_path = os.path.join(os.path.dirname(os.path.abspath(path)), base_path)
        if not os.path.isdir(base_path) and model_base_path:
            base_path = os.path.join(model_base_path, os.path.basename(base_path.rstrip("/")))
        which = entry.model_version_policy.WhichOneof("policy_choice")
        if which == "all":
            policy = ("all",)
        elif which == "specific":
            policy = ("specific", frozenset(entry.model_version_policy.specific.versions))
        elif which == "latest":
            policy = ("latest", entry.model_version_policy.latest.num_versions or 1)
        else:
            policy = ("latest", 1)
        models.append(ModelConfig(entry.name, base_path, policy, dict(entry.version_labels)))
    if not models:
        raise ValueError(f"{path}: model_config_list lists no models.")
    return models


def _version_dirs(base_path):
    """{version: directory} of the complete version directories under a model's base path."""
    try:
        names = os.listdir(base_path)
    except (FileNotFoundError, NotADirectoryError):  # e.g. saved_models/README.md
        return {}
    found = {}
    for name in names:
        path = os.path.join(base_path, name)
        if name.isdigit() and (os.path.isfile(os.path.join(path, "saved_model.pb"))
                               or os.path.isfile(os.path.join(path, "saved_model.pbtxt"))):
            found[int(name)] = path
    return found


def _read_signature_defs(path):
    """The serving MetaGraph's SignatureDefs, from saved_model.pb(txt)."""
    saved_model = saved_model_pb2.SavedModel()
    pb = os.path.join(path, "saved_model.pb")
    if os.path.isfile(pb):
        with open(pb, "rb") as f:
            saved_model.ParseFromString(f.read())
    else:
        with open(os.path.join(path, "saved_model.pbtxt"), encoding="utf-8") as f:
            text_format.Parse(f.read(), saved_model)
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return meta_graph.signature_def
    return saved_model.meta_graphs[0].signature_def


class ServedVersion:
    """One loaded version of a model: its signatures, ready to run on numpy inputs."""

    def __init__(self, name, version, path):
        self.name = name
        self.version = version
        self.path = path
        self._module = tf.saved_model.load(path, tags=["serve"])
        self.signatures = dict(self._module.signatures)
        self.signature_defs = _read_signature_defs(path)

    def signature(self, signature_name=None):
        signature_name = signature_name or DEFAULT_SIGNATURE
        if signature_name not in self.signatures:
            raise NotFoundError(
                f"Serving signature name: \"{signature_name}\" not found in signature def; "
                f"model {self.name} version {self.version} has: "
                f"{', '.join(sorted(self.signatures))}.")
        return self.signatures[signature_name]

    def input_specs(self, signature_name=None):
        return dict(self.signature(signature_name).structured_input_signature[1])

    def output_names(self, signature_name=None):
        return sorted(self.signature(signature_name).structured_outputs)

    def run(self, signature_name, inputs, output_filter=None):
        """{input name: array} -> {output name: np.ndarray}. Model errors -> RequestError."""
        signature_name = signature_name or DEFAULT_SIGNATURE
        function = self.signature(signature_name)
        specs = self.input_specs(signature_name)
        check_input_names(inputs, specs, signature_name)
        tensors = {}
        for name, value in inputs.items():
            try:
                tensors[name] = tf.constant(value, dtype=specs[name].dtype)
            except (TypeError, ValueError) as error:
                raise RequestError(f"Input '{name}': cannot make a {specs[name].dtype.name} "
                                   f"tensor: {error}") from None
            check_shape(tensors[name].shape.as_list(), specs[name], f"Input '{name}'")
        try:
            with _MODEL_CALL_LOCK:
                outputs = function(**tensors)
                outputs = {name: np.asarray(value.numpy()) for name, value in outputs.items()}
        except tf.errors.InvalidArgumentError as error:
            raise RequestError(error.message) from None
        except tf.errors.OpError as error:
            raise RequestError(f"{type(error).__name__}: {error.message}", 500) from None
        except (TypeError, ValueError) as error:  # shape/dtype refused by the signature
            raise RequestError(str(error).splitlines()[0]) from None
        if output_filter:
            unknown = sorted(set(output_filter) - set(outputs))
            if unknown:
                raise RequestError(f"output_filter names '{unknown[0]}', which is not an output; "
                                   f"outputs are: {', '.join(sorted(outputs))}.")
            outputs = {name: outputs[name] for name in output_filter}
        return outputs

    def signature_def_json(self):
        """The SignatureDefMap in TF Serving's metadata JSON shape."""
        return {"signature_def": {
            name: json_format.MessageToDict(signature_def, preserving_proto_field_name=True,
                                            always_print_fields_with_no_presence=True)
            for name, signature_def in self.signature_defs.items()}}


class ModelStore:
    """Serves the SavedModels under a directory; see the module docstring."""

    def __init__(self, model_base_path=None, model_name=None, config_file=None,
                 poll_seconds=1.0):
        if model_base_path is None and config_file is None:
            raise ValueError("Give model_base_path (a directory of models, or one model's "
                             "directory with model_name) or config_file.")
        if model_base_path is not None and not os.path.isdir(model_base_path) and not config_file:
            raise FileNotFoundError(
                f"model_base_path {model_base_path!r} is not a directory; export a model "
                f"first (kbs export ... ) or point --model_base_path at saved_models/.")
        self.model_base_path = model_base_path
        self.model_name = model_name
        self.config_file = config_file
        self.poll_seconds = poll_seconds
        self._fixed_configs = (read_model_server_config(config_file, model_base_path)
                               if config_file else None)
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._configs = {}
        self._loaded = {}    # {model name: {version: ServedVersion}}
        self._failed = {}    # {model name: {version: (error message, saved_model mtime)}}
        self._stop = threading.Event()
        self._poller = None
        self.refresh()

    def _current_configs(self):
        if self._fixed_configs is not None:
            return self._fixed_configs
        if self.model_name:
            return [ModelConfig(self.model_name, self.model_base_path)]
        return [ModelConfig(name, os.path.join(self.model_base_path, name))
                for name in sorted(os.listdir(self.model_base_path))
                if _version_dirs(os.path.join(self.model_base_path, name))]

    def refresh(self):
        """Load new versions and unload those the version policy no longer selects."""
        with self._refresh_lock:
            configs = {config.name: config for config in self._current_configs()}
            for name, config in configs.items():
                self._refresh_model(config)
            with self._lock:
                self._configs = configs
                for name in set(self._loaded) - set(configs):
                    del self._loaded[name]

    def _refresh_model(self, config):
        on_disk = _version_dirs(config.base_path)
        wanted = config.select(on_disk)
        loaded = dict(self._loaded.get(config.name, {}))
        failed = self._failed.setdefault(config.name, {})
        for version in wanted:
            if version in loaded:
                continue
            path = on_disk[version]
            mtime = max(os.path.getmtime(os.path.join(path, f)) for f in os.listdir(path))
            if version in failed and failed[version][1] == mtime:
                continue  # failed before and unchanged since: do not retry every poll
            try:
                loaded[version] = ServedVersion(config.name, version, path)
                failed.pop(version, None)
                log.info("Loaded %s version %d from %s", config.name, version, path)
            except Exception as error:  # a broken export must not stop the server
                failed[version] = (f"{type(error).__name__}: {error}", mtime)
                log.error("Could not load %s version %d from %s: %s",
                          config.name, version, path, error)
        for version in set(loaded) - set(wanted):
            del loaded[version]
            log.info("Unloaded %s version %d", config.name, version)
        with self._lock:
            self._loaded[config.name] = loaded

    # --- polling -------------------------------------------------------------------------
    def start_polling(self):
        """Re-scan the directories every `poll_seconds` in a daemon thread."""
        if self._poller is None and self.poll_seconds and self.poll_seconds > 0:
            self._poller = threading.Thread(target=self._poll, name="model-store-poller",
                                            daemon=True)
            self._poller.start()
        return self

    def _poll(self):
        while not self._stop.wait(self.poll_seconds):
            try:
                self.refresh()
            except Exception:  # keep polling whatever one scan hit
                log.exception("Model directory scan failed")

    def stop(self):
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=10)
            self._poller = None

    # --- lookups -------------------------------------------------------------------------
    def model_names(self):
        with self._lock:
            return sorted(self._configs)

    def resolve(self, name, version=None, label=None):
        """The ServedVersion for a request; NotFoundError with TF Serving's wording if none."""
        with self._lock:
            config = self._configs.get(name)
            loaded = dict(self._loaded.get(name, {}))
        if config is None:
            what = f"Specific({name}, {version})" if version is not None else f"Latest({name})"
            raise NotFoundError(f"Servable not found for request: {what}")
        if label is not None:
            if label not in config.labels:
                raise NotFoundError(f"Unrecognized servable version label: {label} "
                                    f"(model {name} has labels: "
                                    f"{', '.join(sorted(config.labels)) or 'none'})")
            version = config.labels[label]
        if version is None:
            if not loaded:
                raise NotFoundError(f"Servable not found for request: Latest({name})")
            return loaded[max(loaded)]
        if version not in loaded:
            raise NotFoundError(f"Servable not found for request: Specific({name}, {version})")
        return loaded[version]

    def status(self, name, version=None, label=None):
        """TF Serving's GetModelStatus JSON: {"model_version_status": [...]}."""
        if version is not None or label is not None:
            served = self.resolve(name, version, label)
            versions = {served.version: None}
        else:
            with self._lock:
                if name not in self._configs:
                    raise NotFoundError(f"Could not find any versions of model {name}")
                versions = {v: None for v in self._loaded.get(name, {})}
                versions.update({v: message for v, (message, _) in
                                 self._failed.get(name, {}).items() if v not in versions})
        rows = []
        for v in sorted(versions, reverse=True):
            message = versions[v]
            rows.append({"version": str(v), "state": "END" if message else "AVAILABLE",
                         "status": {"error_code": "UNKNOWN" if message else "OK",
                                    "error_message": message or ""}})
        return {"model_version_status": rows}
