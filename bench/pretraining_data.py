"""Pretraining data creation: `kbs create-pretraining-data` (Apache Beam, DirectRunner) vs Model
Garden's `create_pretraining_data.py`, and our peak memory as the corpus grows 10x.

    python bench/pretraining_data.py [--dupe_factor 5] [--rounds 1] [--copies 10]

Input: the 233 State of the Union addresses (10.8 MB) written once in the original input format
(one sentence per line, a blank line after each document, sentences split by our splitter), and a
corpus `--copies` times larger made of rotated copies (copy k of an address starts k*7
sentences later), both cached under ~/.cache/keras_bert_suite/. Same vocabulary (the uncased
30,522-token one), same settings (max_seq_length 128, 20 predictions, masked_lm_prob 0.15,
`--dupe_factor`, seed 12345), static masks in both. Each contestant runs as its own process
tree, A B A B when `--rounds` > 1; wall time includes start-up (Python, TensorFlow, Beam
workers). Peak memory is the largest sum of the resident set sizes of the process and all its
children, sampled every 0.1 s. Instances are counted in the files written.
"""

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _workers import results_header, write_results  # noqa: E402

CACHE = os.path.expanduser("~/.cache/keras_bert_suite")


def sentence_corpus(copies):
    """The SOTU addresses in sentence-per-line format, `copies` rotated copies of each."""
    directory = os.path.join(CACHE, f"bench_sotu_documents_x{copies}")
    if len(glob.glob(os.path.join(directory, "*.txt"))) == 233 * copies:
        return directory
    from keras_bert_suite.data import corpora
    from keras_bert_suite.tasks.pretrainer.data.documents import read_documents

    os.makedirs(directory, exist_ok=True)
    for path in corpora.sotu_files():
        sentences = next(read_documents(path, "paragraph_per_line"))
        for k in range(copies):
            shift = (k * 7) % len(sentences)
            rotated = sentences[shift:] + sentences[:shift]
            with open(os.path.join(directory, f"{k:02d}_{os.path.basename(path)}"), "w") as f:
                # The blank line ends the document for Model Garden's reader, which (as the
                # original) lets a document run on into the next file otherwise.
                f.write("\n".join(rotated) + "\n\n")
    return directory


def run_measured(command):
    """Runs a command; returns (seconds, peak RSS of its process tree in MiB)."""
    start = time.perf_counter()
    process = psutil.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, done = 0, threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            try:
                tree = [process, *process.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = process.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if process.returncode:
        raise RuntimeError(f"{command[:3]} failed:\n{err.decode()[-3000:]}")
    return seconds, peak / 2**20


def count_records(pattern):
    import tensorflow as tf

    return sum(1 for path in glob.glob(pattern) for _ in tf.data.TFRecordDataset(path))


def ours(corpus, output, args):
    return [os.path.join(os.path.dirname(sys.executable), "kbs"), "create-pretraining-data",
            "--input", f"{corpus}/*.txt", "--output_dir", output, "--dupe_factor",
            str(args.dupe_factor)]


def model_garden(corpus, output, args, vocab):
    files = ",".join(sorted(glob.glob(f"{corpus}/*.txt")))
    return [sys.executable, "-m", "official.nlp.data.create_pretraining_data",
            f"--input_file={files}", f"--output_file={output}/mg.tfrecord",
            f"--vocab_file={vocab}", "--do_lower_case=True", "--max_seq_length=128",
            "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--random_seed=12345",
            f"--dupe_factor={args.dupe_factor}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()
    from keras_bert_suite.text import BertTokenizer

    small, large = sentence_corpus(1), sentence_corpus(args.copies)
    work = tempfile.mkdtemp(prefix="bench_pretraining_data_")
    vocab = os.path.join(work, "vocab.txt")
    with open(vocab, "w") as f:
        f.write("\n".join(BertTokenizer.from_preset("minilm_l6_h384_uncased").get_vocabulary())
                + "\n")
    runs = {"ours_x1": [], "model_garden_x1": [], f"ours_x{args.copies}": []}
    for _ in range(args.rounds):
        for name in runs:
            output = os.path.join(work, name)
            shutil.rmtree(output, ignore_errors=True)
            os.makedirs(output)
            corpus = large if name.endswith(f"x{args.copies}") else small
            command = (model_garden(corpus, output, args, vocab) if name.startswith("model")
                       else ours(corpus, output, args))
            seconds, rss = run_measured(command)
            instances = count_records(f"{output}/*.tfrecord")
            runs[name].append({"seconds": seconds, "peak_rss_mib": rss, "instances": instances})
            print(f"{name}: {instances} instances in {seconds:.1f} s "
                  f"({instances / seconds:.0f}/s), peak RSS {rss:.0f} MiB", flush=True)
            shutil.rmtree(output)
    median = {name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
              for name, rows in runs.items()}
    speed = {name: m["instances"] / m["seconds"] for name, m in median.items()}
    ratio = speed["ours_x1"] / speed["model_garden_x1"]
    growth = median[f"ours_x{args.copies}"]["peak_rss_mib"] / median["ours_x1"]["peak_rss_mib"]
    print(f"\ninstances/s, same input (1x, 10.8 MB): ours / Model Garden = {ratio:.2f}x")
    print(f"our peak RSS: {median['ours_x1']['peak_rss_mib']:.0f} MiB at 1x, "
          f"{median[f'ours_x{args.copies}']['peak_rss_mib']:.0f} MiB at {args.copies}x "
          f"({growth:.2f}x); Model Garden at 1x: "
          f"{median['model_garden_x1']['peak_rss_mib']:.0f} MiB")
    write_results("pretraining_data", {
        **results_header(os.cpu_count(), dupe_factor=args.dupe_factor, copies=args.copies),
        "runs": runs, "median": median, "instances_per_second": speed,
        "ours_over_model_garden": ratio, "our_rss_growth": growth})
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
