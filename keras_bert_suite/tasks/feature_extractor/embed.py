"""`kbs embed`: sentence or token vectors for every line of a text file.

    kbs embed sentences.txt --output vectors.npy                 # [N, D] float32
    kbs embed sentences.txt --output vectors.jsonl --tokens      # per line: tokens + vectors

Input: one text per line (UTF-8), or JSON Lines with a "text" field (.jsonl). Output by
extension: .npy (sentence vectors only, row i = line i) or .jsonl (one object per line:
{"text", "embedding"} or, with --tokens, {"text", "tokens", "token_embeddings"} for the real
WordPieces, [CLS]/[SEP] included). Lines longer than the sequence length are refused with the
line number unless --truncate is given (no silent truncation).
"""

import json
import os

import numpy as np

OUTPUT_FORMATS = (".npy", ".jsonl")


def read_texts(path):
    """Texts of a .txt (one per line) or .jsonl ({"text": ...} per line) file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist.")
    texts = []
    with open(path, encoding="utf-8", errors="strict") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if path.endswith(".jsonl"):
                try:
                    text = json.loads(line)["text"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise ValueError(f"{path}:{number}: expected a JSON object with a "
                                     "\"text\" field.") from None
                line = text
            texts.append(line)
    if not texts:
        raise ValueError(f"{path} has no lines to embed.")
    return texts


def _check_lengths(texts, tokenizer, sequence_length, path):
    for number, ids in enumerate(tokenizer.encode_batch(texts), 1):
        if len(ids) + 2 > sequence_length:
            raise ValueError(
                f"{path}:{number}: {len(ids)} WordPieces do not fit sequence length "
                f"{sequence_length} with [CLS] and [SEP]; raise --sequence_length (the preset "
                "allows up to its max_sequence_length) or pass --truncate.")


def embed_file(path, output, preset="minilm_l6_h384_uncased", layers="last_hidden",
               pooling="mean", normalize=True, tokens=False, sequence_length=128,
               batch_size=64, truncate=False):
    """Writes the vectors of every line of `path` to `output`; returns their count."""
    from keras_bert_suite.tasks.feature_extractor.model import BertFeatureExtractor

    extension = os.path.splitext(output)[1]
    if extension not in OUTPUT_FORMATS:
        raise ValueError(f"--output must end in {' or '.join(OUTPUT_FORMATS)}, got {output!r}.")
    if tokens and extension != ".jsonl":
        raise ValueError("Token vectors differ in number per line: write them to a .jsonl file.")
    texts = read_texts(path)
    model = BertFeatureExtractor.from_preset(
        preset, layers=layers, pooling=pooling, normalize=normalize,
        sequence_length=sequence_length)
    if not truncate:
        _check_lengths(texts, model.preprocessor.tokenizer, sequence_length, path)
    outputs = model.predict(texts, batch_size=batch_size, verbose="auto")
    if extension == ".npy":
        np.save(output, np.asarray(outputs["sentence_embedding"], np.float32))
        return len(texts)
    inputs = model.preprocessor(texts)
    tokenizer = model.preprocessor.tokenizer
    with open(output, "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            row = {"text": text}
            if tokens:
                length = int(inputs["padding_mask"][i].sum())
                row["tokens"] = [tokenizer.id_to_token(int(t))
                                 for t in inputs["token_ids"][i, :length]]
                row["token_embeddings"] = np.asarray(
                    outputs["token_embeddings"][i, :length], np.float32).round(6).tolist()
            else:
                row["embedding"] = np.asarray(
                    outputs["sentence_embedding"][i], np.float32).round(6).tolist()
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(texts)
