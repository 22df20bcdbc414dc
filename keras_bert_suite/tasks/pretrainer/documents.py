"""Reading text files into documents (lists of sentences) for pretraining instance creation.

Two layouts:

* ``"sentence_per_line"`` — google-research/bert's input format: one sentence per line, a
  blank line between documents.
* ``"paragraph_per_line"`` — plain prose, one paragraph per line (e.g. the State of the Union
  files): every line is split into sentences (sentences.py); blank lines still separate
  documents.

In both layouts a new file also starts a new document. (The original script let a document run
on from the end of one file into the next file when there was no blank line between them; with
a file per text that glued unrelated texts together.) Lines are stripped; empty documents are
dropped. Documents are yielded one at a time, so reading itself never holds a whole corpus.
"""

from keras_bert_suite.tasks.pretrainer.sentences import split_sentences

LAYOUTS = ("sentence_per_line", "paragraph_per_line")


def read_documents(files, layout="sentence_per_line"):
    """Yields each document as a list of sentence strings.

    Args:
        files: a path or a list of paths of UTF-8 text files.
        layout: "sentence_per_line" (original BERT format) or "paragraph_per_line".
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    if isinstance(files, str):
        files = [files]
    for path in files:
        document = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line:
                    if document:
                        yield document
                    document = []
                elif layout == "sentence_per_line":
                    document.append(line)
                else:
                    document.extend(split_sentences(line))
        if document:
            yield document
