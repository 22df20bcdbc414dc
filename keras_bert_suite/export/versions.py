"""TF Serving's directory layout: <base>/<name>/<integer version>/, written atomically.

A version is written under a hidden temporary name beside its final place and renamed when
complete, so TF Serving (which polls the directory and only looks at integer names) never
sees a half-written export.
"""

import contextlib
import os
import shutil
import uuid


def existing_versions(model_dir):
    if not os.path.isdir(model_dir):
        return []
    return sorted(int(entry) for entry in os.listdir(model_dir)
                  if entry.isdigit() and os.path.isdir(os.path.join(model_dir, entry)))


def next_version(model_dir):
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


@contextlib.contextmanager
def atomic_version_dir(model_dir, version=None):
    """Yields (temporary directory to fill, version); renames it to model_dir/<version> on
    success and deletes it on failure."""
    if version is None:
        version = next_version(model_dir)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive int (TF Serving's version directories "
                         f"are integers), got {version!r}.")
    final = os.path.join(model_dir, str(version))
    if os.path.exists(final):
        raise FileExistsError(f"{final} already exists; versions are immutable once served. "
                              "Pass another version= or leave it out for the next one.")
    os.makedirs(model_dir, exist_ok=True)
    temporary = os.path.join(model_dir, f".tmp-{version}-{uuid.uuid4().hex[:8]}")
    try:
        yield temporary, version
        try:
            os.rename(temporary, final)  # atomic on one file system; fails if final exists
        except OSError as error:
            raise FileExistsError(f"{final} appeared while exporting (another export?); "
                                  "nothing was overwritten.") from error
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
