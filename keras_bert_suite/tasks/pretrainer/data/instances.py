"""Pretraining instances from documents, as google-research/bert's create_pretraining_data.py.

    documents = read_documents(files, layout="paragraph_per_line")
    instances = create_pretraining_instances(documents, tokenizer, seed=12345)
    write_pretraining_tfrecords(instances, ["out-0.tfrecord", "out-1.tfrecord"])

With next-sentence prediction (the default), per document and per dupe:

* a target length is drawn once per document: `sequence_length - 3`, or with probability
  `short_seq_prob` a random length in [2, sequence_length - 3];
* sentences are gathered into a chunk until it reaches the target (or the document ends);
  a random prefix of the chunk's sentences becomes segment A;
* with probability 0.5 — and always when the chunk holds one sentence — segment B is text from
  a random start in ANOTHER document (`is_random_next`, NSP label 1), and the chunk's unused
  sentences are put back; otherwise B is the rest of the chunk (label 0);
* the pair is trimmed to `sequence_length - 3`, one token at a time from the longer segment,
  from its front or back at random; then masked (masking.py) unless `static_masking=False`.

Documented handling of awkward input (what the original does, unless said otherwise):

* A document of one sentence gives only random-next pairs (its single sentence is A).
* A sentence (line) longer than `sequence_length` is not dropped: it forms a chunk on its own
  and is trimmed from both ends at random to fit; B still gets at least one token.
* The random document is drawn among the OTHER documents, so it is never the same one (the
  original retried 10 times and could, in theory, fall back to the same document). NSP needs
  at least two non-empty documents; fewer raises a ValueError.
* Sentences that tokenize to nothing are dropped; empty documents are dropped; no documents at
  all raises a ValueError. A vocabulary without [CLS], [SEP] or [MASK] raises a ValueError.

`instance_format` picks the objective's instances (INSTANCE_FORMATS):

* "nsp" (BERT, the default): the pairs above.
* "sop" (ALBERT's sentence-order prediction): A and B are always CONSECUTIVE text of the same
  document (A a random prefix of the chunk's sentences, B the rest) and are swapped with
  probability 0.5; the label (`is_random_next`, written as `next_sentence_labels`) is 1 when
  swapped. ALBERT's own script draws B from another document for a one-sentence chunk; here
  that sentence is split at a random token instead, so every pair stays consecutive (a chunk
  of a single one-token sentence cannot be split and makes no instance).
* "doc_sentences" (RoBERTa's DOC-SENTENCES): `[CLS] x [SEP]` of whole sentences read in order
  until the next would not fit; never crossing a document (its last instance may be short).
  A sentence longer than `sequence_length - 2` is cut into full-length pieces (nothing lost).
* "full_sentences" (RoBERTa's FULL-SENTENCES): the same, but an instance carries on into the
  next document, with an extra [SEP] between the two documents.
* "contiguous": each document's tokens cut into pieces of the target length, a sentence
  running on into the next instance (the original script's MLM-only option).
Without a sentence pair, segment ids are all 0 and `is_random_next` is False (label 0).
RoBERTa's formats ignore `short_seq_prob` (the paper packs to the full length).

`create_pretraining_instances` holds the tokenized corpus in memory, as the original does
(random-next segments may come from any document). A corpus of any size goes through
pipeline.py instead (`kbs create-pretraining-data`), which runs
`instances_from_token_documents` on one bucket of documents at a time. Instances are shuffled
with the seeded `random.Random`, so a seed gives the same instances, the same masks and the
same order.
"""

import dataclasses
import random

from keras_bert_suite.tasks.pretrainer.data import static_masking as masking

# Sentences are tokenized this many at a time (one traced tf.function call per batch).
_TOKENIZE_BATCH = 2048
INSTANCE_FORMATS = ("nsp", "sop", "doc_sentences", "full_sentences", "contiguous")


def has_sentence_pair(instance_format):
    """Whether instances are `[CLS] a [SEP] b [SEP]` pairs with a label (NSP, SOP)."""
    return instance_format in ("nsp", "sop")


@dataclasses.dataclass(frozen=True)
class PretrainingInstance:
    """One unpadded example: `[CLS] a [SEP] b [SEP]` (or `[CLS] x [SEP]` without NSP)."""

    token_ids: list  # after masking
    segment_ids: list
    is_random_next: bool
    masked_lm_positions: list  # sorted; empty when static_masking=False
    masked_lm_ids: list  # original ids at those positions


def create_pretraining_instances(
        documents, tokenizer, sequence_length=128, dupe_factor=10, short_seq_prob=0.1,
        masked_lm_prob=0.15, max_predictions_per_seq=20, instance_format="nsp",
        whole_word_masking=False, mask_token_rate=0.8, random_token_rate=0.1,
        static_masking=True, seed=12345, max_ngram=1):
    """Documents (iterables of sentence strings) -> a shuffled list of PretrainingInstance.

    Args:
        documents: iterable of documents, each a list of sentences (see read_documents).
        tokenizer: a BertTokenizer (its vocabulary needs [CLS], [SEP] and [MASK]).
        sequence_length: length of a packed instance, special tokens included (BERT: 128, then
            512 in phase 2).
        dupe_factor: how many times each document is used, with different pairs and masks.
        short_seq_prob: probability of a shorter target length for a document.
        masked_lm_prob, max_predictions_per_seq, mask_token_rate, random_token_rate,
            whole_word_masking, max_ngram: masked-LM settings (static_masking.py).
        instance_format: one of INSTANCE_FORMATS (see the module doc).
        static_masking: False leaves instances unmasked, for dynamic masking in tf.data.
        seed: seed of the `random.Random` driving every choice.
    """
    check_instance_settings(sequence_length, dupe_factor, short_seq_prob, instance_format)
    config = masking_config(tokenizer, masked_lm_prob, max_predictions_per_seq, mask_token_rate,
                            random_token_rate, whole_word_masking, max_ngram)
    all_documents = tokenize_documents(documents, tokenizer)
    if not all_documents:
        raise ValueError("The corpus is empty: no document has a sentence with a token. Check "
                         "the input files and the layout (sentence_per_line, "
                         "paragraph_per_line or jsonl).")
    if instance_format == "nsp" and len(all_documents) < 2:
        raise ValueError(
            "Next-sentence prediction needs at least 2 documents (random-next segments come from "
            "another document); the corpus has 1. Separate documents with blank lines, give "
            "more files, or use another instance_format (e.g. 'doc_sentences', MLM only).")
    rng = random.Random(seed)
    instances = list(instances_from_token_documents(
        all_documents, rng, config, sequence_length, dupe_factor, short_seq_prob,
        instance_format, static_masking))
    rng.shuffle(instances)
    return instances


def check_instance_settings(sequence_length, dupe_factor, short_seq_prob, instance_format="nsp"):
    """ValueError for settings no instance can be made with."""
    if instance_format not in INSTANCE_FORMATS:
        raise ValueError(f"instance_format must be one of {', '.join(INSTANCE_FORMATS)}, got "
                         f"{instance_format!r}.")
    pair = has_sentence_pair(instance_format)
    min_length = 5 if pair else 3
    if not isinstance(sequence_length, int) or sequence_length < min_length:
        layout = "[CLS] a [SEP] b [SEP]" if pair else "[CLS] x [SEP]"
        raise ValueError(
            f"sequence_length={sequence_length!r} is too small: {layout} with one token per "
            f"segment needs at least {min_length}.")
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError(f"dupe_factor must be an int >= 1, got {dupe_factor!r}.")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob!r}.")


def masking_config(tokenizer, masked_lm_prob=0.15, max_predictions_per_seq=20,
                   mask_token_rate=0.8, random_token_rate=0.1, whole_word_masking=False,
                   max_ngram=1):
    """The MaskingConfig of a tokenizer's vocabulary (ValueError without [CLS]/[SEP]/[MASK])."""
    vocabulary = tokenizer.get_vocabulary()
    return masking.MaskingConfig(
        mask_token_id=tokenizer.mask_token_id, cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id, vocabulary_size=len(vocabulary),
        masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq,
        mask_token_rate=mask_token_rate, random_token_rate=random_token_rate,
        whole_word_masking=whole_word_masking, max_ngram=max_ngram,
        is_continuation=(~tokenizer.word_start_flags()
                         if masking.masks_whole_words(whole_word_masking, max_ngram) else None))


def instances_from_token_documents(all_documents, rng, config, sequence_length=128,
                                   dupe_factor=10, short_seq_prob=0.1,
                                   instance_format="nsp", static_masking=True):
    """Yields the PretrainingInstances of tokenized documents, in creation order.

    `all_documents` (lists of non-empty id lists) is shuffled in place first; random-next
    segments come from these documents only (FULL-SENTENCES instances cross from one to the
    next in that order). The caller shuffles the instances.
    """
    rng.shuffle(all_documents)
    make = _MAKERS[instance_format]
    cls_sep = (config.cls_token_id, config.sep_token_id)
    # FULL-SENTENCES reads the corpus as one stream of documents; the others one at a time.
    indices = [None] if instance_format == "full_sentences" else range(len(all_documents))
    for _ in range(dupe_factor):
        for index in indices:
            for token_ids, segment_ids, is_random_next in make(
                    all_documents, index, sequence_length, short_seq_prob, rng, cls_sep):
                positions, labels = [], []
                if static_masking:
                    token_ids, positions, labels = masking.mask_instance(token_ids, config, rng)
                yield PretrainingInstance(token_ids, segment_ids, is_random_next, positions,
                                          labels)


def tokenize_documents(documents, tokenizer):
    """Documents of sentence strings -> list of documents, each a list of id lists (non-empty).

    Sentences are tokenized `_TOKENIZE_BATCH` at a time across documents (one graph call per
    batch, whatever the document sizes); a document with no token left is dropped.
    """
    documents = [[s for s in document if s and s.strip()] for document in documents]
    sentences = [s for document in documents for s in document]
    ids = []
    for start in range(0, len(sentences), _TOKENIZE_BATCH):
        ids.extend(tokenizer.encode_batch(sentences[start:start + _TOKENIZE_BATCH]))
    out, start = [], 0
    for document in documents:
        tokens = [sentence for sentence in ids[start:start + len(document)] if sentence]
        start += len(document)
        if tokens:
            out.append(tokens)
    return out


def _target_length(max_num_tokens, short_seq_prob, rng):
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def _instances_with_nsp(all_documents, document_index, sequence_length, short_seq_prob, rng,
                        cls_sep):
    """Yields (token_ids, segment_ids, is_random_next) for one document (unmasked)."""
    document = all_documents[document_index]
    max_num_tokens = sequence_length - 3  # [CLS], [SEP], [SEP]
    target_seq_length = _target_length(max_num_tokens, short_seq_prob, rng)
    chunk, chunk_length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            tokens_b = []
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
            if is_random_next:
                target_b_length = target_seq_length - len(tokens_a)
                other = rng.randint(0, len(all_documents) - 2)
                other += other >= document_index  # any document but this one
                random_document = all_documents[other]
                for sentence in random_document[rng.randint(0, len(random_document) - 1):]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target_b_length:
                        break
                i -= len(chunk) - a_end  # put the unused sentences back
            else:
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
            _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            cls, sep = cls_sep
            yield ([cls, *tokens_a, sep, *tokens_b, sep],
                   [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1), is_random_next)
            chunk, chunk_length = [], 0
        i += 1


def _instances_with_sop(all_documents, document_index, sequence_length, short_seq_prob, rng,
                        cls_sep):
    """Yields (token_ids, segment_ids, swapped) for one document: consecutive A and B,
    swapped with probability 0.5 (ALBERT's sentence order)."""
    document = all_documents[document_index]
    max_num_tokens = sequence_length - 3
    target_seq_length = _target_length(max_num_tokens, short_seq_prob, rng)
    chunk, chunk_length = [], 0
    for i, sentence in enumerate(document):
        chunk.append(sentence)
        chunk_length += len(sentence)
        if i == len(document) - 1 or chunk_length >= target_seq_length:
            if len(chunk) >= 2:
                a_end = rng.randint(1, len(chunk) - 1)
                tokens_a = [t for s in chunk[:a_end] for t in s]
                tokens_b = [t for s in chunk[a_end:] for t in s]
            elif len(chunk[0]) >= 2:  # one sentence: split it at a random token
                cut = rng.randint(1, len(chunk[0]) - 1)
                tokens_a, tokens_b = list(chunk[0][:cut]), list(chunk[0][cut:])
            else:
                chunk, chunk_length = [], 0
                continue
            _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            swapped = rng.random() < 0.5
            if swapped:
                tokens_a, tokens_b = tokens_b, tokens_a
            cls, sep = cls_sep
            yield ([cls, *tokens_a, sep, *tokens_b, sep],
                   [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1), swapped)
            chunk, chunk_length = [], 0


def _sentence_instances(documents, max_num_tokens, cls_sep, cross_documents):
    """Yields the token lists of [CLS] x [SEP] instances of whole sentences (RoBERTa's DOC- /
    FULL-SENTENCES); a sentence longer than an instance is cut into full pieces. Crossing
    into the next document puts a [SEP] between the two (only inside an instance)."""
    sep = cls_sep[1]
    buffer, separate = [], False
    for document in documents:
        for sentence in document:
            for start in range(0, len(sentence), max_num_tokens):
                piece = list(sentence[start:start + max_num_tokens])
                joint = [sep] if separate and buffer else []
                if buffer and len(buffer) + len(joint) + len(piece) > max_num_tokens:
                    yield buffer
                    buffer, joint = [], []
                buffer += joint + piece
                separate = False
        if cross_documents:
            separate = True
        elif buffer:
            yield buffer
            buffer = []
    if buffer:
        yield buffer


def _instances_doc_sentences(all_documents, document_index, sequence_length, short_seq_prob,
                             rng, cls_sep):
    cls, sep = cls_sep
    for tokens in _sentence_instances([all_documents[document_index]], sequence_length - 2,
                                      cls_sep, cross_documents=False):
        yield [cls, *tokens, sep], [0] * (len(tokens) + 2), False


def _instances_full_sentences(all_documents, document_index, sequence_length, short_seq_prob,
                              rng, cls_sep):
    cls, sep = cls_sep
    for tokens in _sentence_instances(all_documents, sequence_length - 2, cls_sep,
                                      cross_documents=True):
        yield [cls, *tokens, sep], [0] * (len(tokens) + 2), False


def _instances_without_nsp(all_documents, document_index, sequence_length, short_seq_prob, rng,
                           cls_sep):
    """Yields ([CLS] x [SEP], zeros, False): the document's text cut into contiguous pieces."""
    max_num_tokens = sequence_length - 2  # [CLS], [SEP]
    target = _target_length(max_num_tokens, short_seq_prob, rng)
    tokens = [t for sentence in all_documents[document_index] for t in sentence]
    cls, sep = cls_sep
    for start in range(0, len(tokens), target):
        piece = tokens[start:start + target]
        yield [cls, *piece, sep], [0] * (len(piece) + 2), False


_MAKERS = {"nsp": _instances_with_nsp, "sop": _instances_with_sop,
           "doc_sentences": _instances_doc_sentences,
           "full_sentences": _instances_full_sentences, "contiguous": _instances_without_nsp}


def _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Trims the longer segment (A on ties) from its front or back until the pair fits."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) >= len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()
