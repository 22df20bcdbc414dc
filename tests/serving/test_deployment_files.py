"""serving/ (TF Serving deployment files) is well-formed, and `kbs serve` serves saved_models/."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from keras_bert_suite.serving import GrpcClient, RestClient
from keras_bert_suite.serving.model_store import read_model_server_config


SERVING = os.path.join(os.path.dirname(__file__), "..", "..", "serving")
BATCHING_FIELDS = {"max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                   "num_batch_threads", "thread_pool_name", "allowed_batch_sizes",
                   "pad_variable_length_inputs"}


def serving_file(name):
    return os.path.join(SERVING, name)


def test_models_config_is_a_model_server_config_with_policy_and_labels():
    (config,) = read_model_server_config(serving_file("models.config"))
    assert (config.name, config.policy) == ("sentiment", ("latest", 2))
    assert config.labels == {"stable": 1, "canary": 2}


def test_models_config_maps_onto_local_saved_models(tmp_path):
    # /models/sentiment (the container path) is looked up as <model_base_path>/sentiment.
    (tmp_path / "sentiment").mkdir()
    (config,) = read_model_server_config(serving_file("models.config"), str(tmp_path))
    assert config.base_path == str(tmp_path / "sentiment")
    assert config.select([3, 1, 2]) == [2, 3]  # latest { num_versions: 2 }


def test_batching_parameters_follow_tf_serving_rules():
    values = {}
    for number, line in enumerate(open(serving_file("batching_parameters.txt")), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"(\w+)(?:\s*\{\s*value:\s*(\d+)\s*\}|:\s*(\w+))", line)
        assert match and match.group(1) in BATCHING_FIELDS, f"line {number}: {line}"
        values.setdefault(match.group(1), []).append(match.group(2) or match.group(3))
    sizes = [int(s) for s in values["allowed_batch_sizes"]]
    # TF Serving refuses a config whose largest allowed size differs from max_batch_size.
    assert sizes == sorted(sizes) and sizes[-1] == int(values["max_batch_size"][0])


def test_compose_mounts_saved_models_and_the_configs():
    compose = yaml.safe_load(open(serving_file("compose.yaml")))
    (service,) = compose["services"].values()
    assert service["image"].startswith("tensorflow/serving:")
    version = tuple(int(x) for x in service["image"].split(":")[1].split(".")[:2])
    assert version >= (2, 12)  # FastBertNormalize
    mounts = dict(volume.split(":")[:2] for volume in service["volumes"])
    assert mounts["../saved_models"] == "/models"
    for host_path, container_path in mounts.items():
        assert os.path.exists(os.path.join(SERVING, host_path)), host_path
    flags = dict(arg.lstrip("-").split("=", 1) for arg in service["command"])
    for flag in ("model_config_file", "batching_parameters_file", "monitoring_config_file"):
        assert flags[flag] in mounts.values(), flag
    for config in read_model_server_config(serving_file("models.config")):
        assert config.base_path.startswith("/models/")
    assert "prometheus_config" in open(serving_file("monitoring.config")).read()


@pytest.mark.slow
@pytest.mark.needs_tf_serving
def test_kbs_serve_command(model_base_path):
    """`kbs serve` in a subprocess: every model directory, TF Serving's newest-version policy."""
    process = subprocess.Popen(  # both ports chosen by the OS, read back from the output
        [sys.executable, "-m", "keras_bert_suite.cli", "serve", "--model_base_path",
         str(model_base_path), "--port", "0", "--grpc_port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=os.path.join(os.path.dirname(__file__), "..", ".."))
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("gRPC at "):
                break
        output = "".join(lines)
        assert "development server" in output and "text_model (versions 2)" in output, output
        url = re.search(r"REST at (http://127\.0\.0\.1:\d+)/", output).group(1)
        client = RestClient(url)
        assert [r["version"] for r in client.status("text_model")["model_version_status"]] == ["2"]
        assert client.predict("text_model", instances=["the lazy dog"]) == [
            {"num_tokens": 3, "score": 6.5, "first_token": "the", "text_bytes": b"the lazy dog"}]
        grpc_address = re.search(r"gRPC at (127\.0\.0\.1:\d+)", output).group(1)
        with GrpcClient(grpc_address) as grpc_client:
            assert grpc_client.status("text_model") == [(2, "AVAILABLE")]
    finally:
        process.terminate()
        process.wait(timeout=30)
