"""A run's output directory on any filesystem tf.io.gfile reaches: local paths exactly as
before (os, open), `scheme://` paths (gs://, hdfs://, s3:// with tensorflow-io, ram:// in
tests) through tf.io.gfile, which every backend's process can import.

Keras writes and reads `.keras` and `.weights.h5` files at such paths itself (it treats every
`scheme://` path as remote and goes through a local temporary file, Keras'
`file_utils.is_remote_path`); what Keras does not write (history.json, a
preset directory) goes through these functions.

    storage.makedirs("gs://bucket/runs/smoke")
    with storage.open_file("gs://bucket/runs/smoke/notes.txt", "w") as f:
        f.write("hello")
    with storage.local_directory("gs://bucket/runs/smoke/preset") as local:
        write_files_into(local)  # uploaded once the block completes
"""

import contextlib
import json
import os
import shutil
import tempfile


def is_remote(path):
    """A `scheme://` path (gs://bucket/dir, ram://dir): handled by tf.io.gfile."""
    return "://" in os.fspath(path)


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def makedirs(path):
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def exists(path):
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path):
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def listdir(path):
    """Names in `path` (a remote listing's sub-directories lose their trailing '/')."""
    if is_remote(path):
        return [name.rstrip("/") for name in _gfile().listdir(path)]
    return os.listdir(path)


def remove(path):
    if is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(path)


def rmtree(path):
    """Deletes the directory tree at `path`; nothing there is not an error."""
    if not is_remote(path):
        shutil.rmtree(path, ignore_errors=True)
    elif _gfile().exists(path):
        _gfile().rmtree(path)


def replace(source, destination):
    """Renames `source` over `destination`: atomic on a local disk (os.replace); on an object
    store a copy then a delete, whose destination object appears whole or not at all."""
    if is_remote(source) or is_remote(destination):
        _gfile().rename(source, destination, overwrite=True)
    else:
        os.replace(source, destination)


def open_file(path, mode="r"):
    """`open(path, mode)` (UTF-8 for text), or tf.io.gfile.GFile for a remote path."""
    if is_remote(path):
        return _gfile().GFile(path, mode)
    return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def copy_tree(source, destination):
    """Copies the local directory `source` into `destination` (any path), file by file,
    overwriting what is there."""
    for root, _, files in os.walk(source):
        relative = os.path.relpath(root, source)
        target = destination if relative == "." else os.path.join(destination, relative)
        makedirs(target)
        for name in files:
            if is_remote(target):
                _gfile().copy(os.path.join(root, name), os.path.join(target, name),
                              overwrite=True)
            else:
                shutil.copyfile(os.path.join(root, name), os.path.join(target, name))


@contextlib.contextmanager
def local_directory(path):
    """For code that writes a directory with local file APIs: yields `path` itself when it
    is local; for a remote path, a local temporary directory whose files are uploaded to
    `path` (over files of the same names; nothing else there is deleted) once the block
    completes without an error."""
    if not is_remote(path):
        yield path
        return
    staging = tempfile.mkdtemp(prefix="kbs-upload-")
    try:
        local = os.path.join(staging, os.path.basename(path.rstrip("/")) or "directory")
        os.makedirs(local)
        yield local
        copy_tree(local, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_json(path, value):
    """Writes `value` to `path` atomically (a reader never sees half a file); `path` may be
    any path tf.io.gfile reaches (gs://bucket/run/history.json)."""
    tmp = path + ".tmp"
    with open_file(tmp, "w") as f:
        f.write(json.dumps(value, indent=1))
    replace(tmp, path)
