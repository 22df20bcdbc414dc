"""Rows of a CSV, TSV or JSON Lines file, each with the line it starts on (for error messages).

One reader for every task file format, so every task reports bad input the same way:
"<file>, line <n>: <what is wrong>. <how to fix it>".

Example:
>>> with open("train.tsv", "w") as f:
...     _ = f.write("sentence\\tlabel\\na gripping drama\\t1\\na \\"dull\\" mess\\t0\\n")
>>> for line, row in read_rows("train.tsv", quoting=csv.QUOTE_NONE):
...     print(line, row["sentence"])
2 a gripping drama
3 a "dull" mess
"""

import bz2
import codecs
import csv
import gzip
import json
import os

FORMATS = ("csv", "tsv", "jsonl")
_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_COMPRESSIONS = {".bz2": bz2.open, ".gz": gzip.open}


def file_error(path, line, message):
    """A ValueError that names the file and line, as every data reader reports bad input."""
    where = f"{path}, line {line}" if line is not None else str(path)
    return ValueError(f"{where}: {message}")


def detect_format(path, format=None):
    """"csv", "tsv" or "jsonl": `format` if given, else from the extension (.bz2/.gz allowed)."""
    if format is not None:
        if format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {format!r}.")
        return format
    stem, extension = os.path.splitext(str(path).lower())
    if extension in _COMPRESSIONS:
        extension = os.path.splitext(stem)[1]
    if extension not in _EXTENSIONS:
        raise ValueError(
            f"Cannot tell the format of {path} from its extension; known extensions are "
            f"{sorted(_EXTENSIONS)} (optionally + .bz2/.gz). Pass format= one of {FORMATS}.")
    return _EXTENSIONS[extension]


def read_rows(path, format=None, header=True, delimiter=None, quoting=csv.QUOTE_MINIMAL,
              encoding="utf-8-sig"):
    """Yields (line_number, row) for every record of the file.

    Args:
        path: a .csv / .tsv / .jsonl file, optionally compressed (.bz2, .gz).
        format: "csv", "tsv" or "jsonl"; default from the extension.
        header: CSV/TSV only. True: the first row names the columns and rows are dicts;
            False: rows are lists (columns by 0-based index).
        delimiter: CSV/TSV only; default "," for csv and "\\t" for tsv.
        quoting: CSV/TSV only, as the csv module takes it. GLUE's TSVs are not quoted
            (a stray `"` is text): use csv.QUOTE_NONE for them.
        encoding: text encoding; the default also drops a UTF-8 byte-order mark.

    Rows of a CSV/TSV must have as many fields as the header (or as the first row); JSON Lines
    records must be objects. Blank lines are skipped. An empty file is an error.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such data file: {path}")
    format = detect_format(path, format)
    rows = _jsonl_rows(path, encoding) if format == "jsonl" else _delimited_rows(
        path, delimiter or ("," if format == "csv" else "\t"), header, quoting, encoding)
    count = 0
    for count, item in enumerate(rows, 1):
        yield item
    if count == 0:
        what = "no data rows after the header" if header and format != "jsonl" else "no data rows"
        raise file_error(path, None, f"the file is empty ({what}).")


def _lines(path, encoding):
    """Decoded lines, line ends kept; undecodable bytes are an error naming their line.

    Decoding line by line (rather than a text-mode file, which decodes in blocks) is what lets
    the error name the line. `encoding` must keep "\\n" a single byte (UTF-8, Latin-1, ...).
    """
    opener = _COMPRESSIONS.get(os.path.splitext(str(path).lower())[1], open)
    decoder = codecs.getincrementaldecoder(encoding)()  # drops a BOM at the start only
    with opener(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                yield decoder.decode(raw)
            except UnicodeDecodeError as error:
                raise file_error(path, number, f"not valid {encoding} text ({error.reason} at "
                                 f"byte {error.start + 1} of the line). Save the file as "
                                 f"{encoding} or pass its encoding.") from None


def _delimited_rows(path, delimiter, header, quoting, encoding):
    reader = csv.reader(_lines(path, encoding), delimiter=delimiter, quoting=quoting,
                        strict=True)
    columns = None
    line = 1  # the line the next record starts on
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise file_error(path, line, f"malformed {delimiter!r}-separated row ({error}). "
                             "If the file is not quoted, pass quoting=csv.QUOTE_NONE.") from None
        start, line = line, reader.line_num + 1
        if not fields:  # a blank line
            continue
        if columns is None:
            columns = fields
            if header:
                _check_header(path, start, columns)
                continue
        if len(fields) != len(columns):
            what = "the header" if header else "the first row"
            raise file_error(
                path, start, f"{len(fields)} fields, but {what} has {len(columns)} "
                f"(delimiter {delimiter!r}). Check for a missing or extra delimiter"
                + (" or an unbalanced quote." if quoting != csv.QUOTE_NONE else "."))
        yield start, dict(zip(columns, fields)) if header else fields


def _check_header(path, line, columns):
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise file_error(path, line, f"the header repeats column name(s) {duplicates}; "
                         "column names must be unique.")


def _jsonl_rows(path, encoding):
    for line, text in enumerate(_lines(path, encoding), 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise file_error(path, line, f"not valid JSON ({error.msg} at column {error.colno}). "
                             "JSON Lines files hold one object per line.") from None
        if not isinstance(record, dict):
            raise file_error(path, line, f"expected a JSON object, got {type(record).__name__}. "
                             "JSON Lines files hold one object per line.")
        yield line, record
