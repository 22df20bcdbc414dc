"""Plain-Python answers the exported signatures must reproduce, computed from the Keras model
on the current backend (an independent implementation of windowing, span search and word
tags: Python loops over `encode_batch_with_offsets`, not the exported TF graph)."""

import numpy as np

from tests.conftest import to_numpy


def pack_rows(tokenizer, length, first, second=None):
    """[CLS] first [SEP] (second [SEP]) -> encoder inputs for one row, no truncation."""
    ids = [tokenizer.cls_token_id] + list(first) + [tokenizer.sep_token_id]
    segments = [0] * len(ids)
    if second is not None:
        ids += list(second) + [tokenizer.sep_token_id]
        segments += [1] * (len(second) + 1)
    assert len(ids) <= length
    pad = length - len(ids)
    return ids + [tokenizer.pad_token_id] * pad, segments + [0] * pad, [1] * len(ids) + [0] * pad


def run_rows(model, rows):
    token_ids, segment_ids, padding_mask = (np.array(x, np.int32) for x in zip(*rows))
    return model({"token_ids": token_ids, "segment_ids": segment_ids,
                  "padding_mask": padding_mask}, training=False)


def span_answers(model, tokenizer, length, questions, contexts, max_question, window, stride,
                 max_answer):
    answers = []
    for question, context in zip(questions, contexts):
        question_ids = tokenizer.encode_batch([question])[0][:max_question]
        ids, offsets = tokenizer.encode_batch_with_offsets([context])
        ids, offsets = ids[0], offsets[0]
        count = 1 + -(-max(len(ids) - window, 0) // stride)
        bounds = [(j * stride, min(j * stride + window, len(ids))) for j in range(count)]
        outputs = run_rows(model, [pack_rows(tokenizer, length, question_ids, ids[a:b])
                                   for a, b in bounds])
        starts, ends = to_numpy(outputs["start_logits"]), to_numpy(outputs["end_logits"])
        best = None  # (score, window, start, end); first best wins, as in the graph
        begin = len(question_ids) + 2
        for w, (a, b) in enumerate(bounds):
            for s in range(b - a):
                for e in range(s, min(s + max_answer, b - a)):
                    score = np.float32(starts[w, begin + s]) + np.float32(ends[w, begin + e])
                    if best is None or score > best[0]:
                        best = (score, w, s, e)
        if best is None:
            answers.append(("", 0, 0, None))
            continue
        score, w, s, e = best
        start, end = offsets[bounds[w][0] + s][0], offsets[bounds[w][0] + e][1]
        answers.append((context[start:end], start, end, score))
    return answers


def word_tags(model, tokenizer, length, labels, texts):
    chunk = length - 2
    results = []
    for text in texts:
        ids, offsets = tokenizer.encode_batch_with_offsets([text])
        ids, offsets = ids[0], offsets[0]
        chunks = [ids[i:i + chunk] for i in range(0, max(len(ids), 1), chunk)]
        logits = to_numpy(run_rows(model, [pack_rows(tokenizer, length, c) for c in chunks]))
        words = []
        for j, token_id in enumerate(ids):
            if j > 0 and tokenizer.id_to_token(token_id).startswith("##"):
                words[-1][1] = offsets[j][1]  # a continuation extends the word
                continue
            row = logits[j // chunk, 1 + j % chunk]
            probabilities = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
            words.append([offsets[j][0], offsets[j][1], labels[int(np.argmax(row))],
                          float(probabilities.max())])
        results.append([(text[a:b], tag, score) for a, b, tag, score in words])
    return results
