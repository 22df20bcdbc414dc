"""Reading text files into documents (lists of sentences) for pretraining instance creation.

Three layouts:

* ``"sentence_per_line"`` — google-research/bert's input format: one sentence per line, a
  blank line between documents.
* ``"paragraph_per_line"`` — plain prose, one paragraph per line (e.g. the State of the Union
  files): every line is split into sentences (sentences.py); blank lines still separate
  documents.
* ``"jsonl"`` — JSON Lines, one document per line: the string in field `text_field` (default
  "text"), split into paragraphs at newlines and each paragraph into sentences.

In every layout a new file also starts a new document. (The original script let a document run
on from the end of one file into the next file when there was no blank line between them; with
a file per text that glued unrelated texts together.) Lines are stripped; empty documents are
dropped. Files are read through `tf.io.gfile`, so `gs://` (and any file system TensorFlow has)
works, in chunks: a file with no newline for gigabytes never sits in memory whole.

Nothing is lost silently: when a `statistics` Counter is given, every document read is counted
under "documents_read" and every skip under "skipped_<reason>" (see SKIP_REASONS):

* a file with a NUL byte in its first 8 KiB is binary and skipped whole ("skipped_binary_files",
  a count of files: its documents are unknown); an empty file counts as "empty_files";
* invalid UTF-8 is replaced by U+FFFD, which the tokenizer drops; the document is kept and
  counted under "documents_with_invalid_utf8";
* a document with a line longer than `max_line_bytes` is skipped ("skipped_line_too_long");
* a JSON Lines line that is not a JSON object with a string `text_field` is skipped
  ("skipped_invalid_json", "skipped_no_text_field").
"""

import json

from keras_bert_suite.tasks.pretrainer.data.sentences import split_sentences

LAYOUTS = ("sentence_per_line", "paragraph_per_line", "jsonl")
# A line longer than this is not prose (a minified blob, a table dump): its document is skipped.
DEFAULT_MAX_LINE_BYTES = 1 << 22  # 4 MiB
SKIP_REASONS = ("empty", "line_too_long", "invalid_json", "no_text_field")
_CHUNK_BYTES = 1 << 20
_BINARY_PROBE_BYTES = 8192


def check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")


def read_documents(files, layout="sentence_per_line", text_field="text",
                   max_line_bytes=DEFAULT_MAX_LINE_BYTES, statistics=None):
    """Yields each document as a list of sentence strings.

    Args:
        files: a path or a list of paths (local or any `tf.io.gfile` scheme) of UTF-8 text.
        layout: "sentence_per_line" (original BERT format), "paragraph_per_line" or "jsonl".
        text_field: the JSON Lines field holding a document's text.
        max_line_bytes: a document with a longer line is skipped (and counted).
        statistics: an optional `collections.Counter` that receives the counts above.
    """
    check_layout(layout)
    if isinstance(files, str):
        files = [files]
    for path in files:
        for document, _ in read_file_documents(path, layout, text_field, max_line_bytes,
                                               statistics):
            yield document


def read_file_documents(path, layout, text_field="text", max_line_bytes=DEFAULT_MAX_LINE_BYTES,
                        statistics=None):
    """Yields (sentences, text bytes) for each non-empty document of one file."""
    import collections

    counts = statistics if statistics is not None else collections.Counter()
    counts["files_read"] += 1
    lines = _lines(path, max_line_bytes, counts)
    if lines is None:
        return
    document, size, invalid, too_long = [], 0, False, False

    def finish():
        if too_long:
            counts["documents_read"] += 1
            counts["skipped_line_too_long"] += 1
        elif document:
            counts["documents_read"] += 1
            counts["documents_with_invalid_utf8"] += invalid
            return True
        return False

    for line in lines:
        if layout == "jsonl":  # a document per line
            if line is _TOO_LONG:
                counts["documents_read"] += 1
                counts["skipped_line_too_long"] += 1
                continue
            text, bad = _decode(line)
            if text:
                counts["documents_read"] += 1
                sentences = _json_document(text, text_field, counts)
                if sentences:
                    counts["documents_with_invalid_utf8"] += bad
                    yield sentences, len(line)
            continue
        if line is _TOO_LONG:
            too_long = True
            continue
        text, bad = _decode(line)
        if not text:
            if finish():
                yield document, size
            document, size, invalid, too_long = [], 0, False, False
            continue
        size += len(line)
        invalid = invalid or bad
        if layout == "sentence_per_line":
            document.append(text)
        else:
            document.extend(split_sentences(text))
    if finish():
        yield document, size


def _json_document(text, text_field, counts):
    """One JSON Lines record -> its sentences (empty list when skipped and counted)."""
    try:
        record = json.loads(text)
    except ValueError:
        counts["skipped_invalid_json"] += 1
        return []
    if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
        counts["skipped_no_text_field"] += 1
        return []
    sentences = [s for paragraph in record[text_field].split("\n")
                 for s in split_sentences(paragraph.strip()) if paragraph.strip()]
    if not sentences:
        counts["skipped_empty"] += 1
    return sentences


_TOO_LONG = object()


def _decode(line):
    """bytes -> (stripped str, had invalid UTF-8)."""
    try:
        return line.decode("utf-8").strip(), False
    except UnicodeDecodeError:
        return line.decode("utf-8", errors="replace").strip(), True


def _lines(path, max_line_bytes, counts):
    """A generator of a file's lines as bytes (`_TOO_LONG` for an over-long line, whose bytes
    are skipped without being held), or None for a binary or empty file (counted)."""
    import tensorflow as tf

    f = tf.io.gfile.GFile(path, "rb")
    head = f.read(_BINARY_PROBE_BYTES)
    if not head:
        f.close()
        counts["empty_files"] += 1
        return None
    if b"\0" in head:
        f.close()
        counts["skipped_binary_files"] += 1
        return None

    def generate(buffer):
        skipping = False
        with f:
            while True:
                chunk = f.read(_CHUNK_BYTES)
                buffer += chunk
                start = 0
                while True:
                    end = buffer.find(b"\n", start)
                    if end < 0:
                        break
                    if skipping:
                        skipping = False
                    elif end - start > max_line_bytes:
                        yield _TOO_LONG
                    else:
                        yield buffer[start:end]
                    start = end + 1
                buffer = buffer[start:]
                if len(buffer) > max_line_bytes and not skipping:
                    yield _TOO_LONG
                    skipping = True
                if skipping:
                    buffer = b""
                if not chunk:
                    break
        if buffer and not skipping:
            yield buffer

    return generate(head)
