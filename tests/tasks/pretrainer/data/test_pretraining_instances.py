import numpy as np
import pytest

from keras_bert_suite.tasks.pretrainer.data.instances import create_pretraining_instances


def _key(ids):
    return "," + ",".join(map(str, ids)) + ","


@pytest.fixture(scope="module")
def unmasked(sotu_documents, uncased_tokenizer):
    return create_pretraining_instances(sotu_documents, uncased_tokenizer, dupe_factor=2,
                                        static_masking=False, seed=3)


@pytest.fixture(scope="module")
def masked(sotu_documents, uncased_tokenizer):
    return create_pretraining_instances(sotu_documents, uncased_tokenizer, dupe_factor=2, seed=4)


def _segments(instance):
    ids, seg = np.array(instance.token_ids), np.array(instance.segment_ids)
    return ids[1:(seg == 0).sum() - 1].tolist(), ids[(seg == 0).sum():-1].tolist()


@pytest.mark.real
def test_instances_shape_and_nsp_balance(unmasked, uncased_tokenizer):
    assert len(unmasked) > 500
    cls, sep = uncased_tokenizer.cls_token_id, uncased_tokenizer.sep_token_id
    for inst in unmasked:
        assert len(inst.token_ids) <= 128 and len(inst.token_ids) == len(inst.segment_ids)
        assert inst.token_ids[0] == cls and inst.token_ids[-1] == sep
        assert inst.token_ids.count(sep) == 2 and inst.masked_lm_positions == []
        a, b = _segments(inst)
        assert a and b
    full = np.mean([len(i.token_ids) == 128 for i in unmasked])
    assert full > 0.6  # most instances fill sequence_length; ~10% are short on purpose
    random_next = np.mean([i.is_random_next for i in unmasked])
    # Above 0.5 as in the original: a chunk of one sentence always gets a random next.
    assert 0.45 < random_next < 0.65, random_next


@pytest.mark.real
def test_random_next_comes_from_another_document(unmasked, sotu_documents, uncased_tokenizer):
    from keras_bert_suite.tasks.pretrainer.data.instances import tokenize_documents

    documents = [_key([t for s in d for t in s])
                 for d in tokenize_documents(sotu_documents, uncased_tokenizer)]
    checked = {True: 0, False: 0}
    for inst in unmasked[:300]:
        a, b = _segments(inst)
        in_a = {i for i, d in enumerate(documents) if _key(a) in d}
        in_b = {i for i, d in enumerate(documents) if _key(b) in d}
        assert in_a and in_b
        if inst.is_random_next:
            assert any(i != j for i in in_a for j in in_b)
            if len(in_a) == 1 and len(in_b) == 1:
                assert in_a != in_b
        else:
            assert in_a & in_b  # same document (trimming may cut between A and B)
        checked[inst.is_random_next] += 1
    assert min(checked.values()) > 100


@pytest.mark.real
def test_static_masking_statistics(masked, uncased_tokenizer):
    mask_id = uncased_tokenizer.mask_token_id
    specials = {uncased_tokenizer.cls_token_id, uncased_tokenizer.sep_token_id}
    outcomes = {"mask": 0, "random": 0, "same": 0}
    chosen = eligible = 0
    for inst in masked:
        positions, labels = inst.masked_lm_positions, inst.masked_lm_ids
        assert positions == sorted(set(positions))
        assert len(positions) == min(20, max(1, round(len(inst.token_ids) * 0.15)))
        original = list(inst.token_ids)
        for p, label in zip(positions, labels):
            original[p] = label
        assert not specials & {original[p] for p in positions}  # [CLS]/[SEP] never masked
        for p, label in zip(positions, labels):
            new = inst.token_ids[p]
            outcomes["mask" if new == mask_id else "same" if new == label else "random"] += 1
        chosen += len(positions)
        eligible += len(inst.token_ids) - 3
    total = sum(outcomes.values())
    assert abs(chosen / eligible - 0.15) < 0.01, chosen / eligible
    assert abs(outcomes["mask"] / total - 0.8) < 0.02, outcomes
    assert abs(outcomes["random"] / total - 0.1) < 0.015, outcomes
    assert abs(outcomes["same"] / total - 0.1) < 0.015, outcomes


@pytest.mark.real
def test_whole_word_masking_never_splits_a_word(sotu_documents, uncased_tokenizer):
    
    is_cont = ~uncased_tokenizer.word_start_flags()
    specials = {uncased_tokenizer.cls_token_id, uncased_tokenizer.sep_token_id}
    instances = create_pretraining_instances(sotu_documents[:3], uncased_tokenizer,
                                             dupe_factor=2, whole_word_masking=True, seed=5)
    multi_piece_words = 0
    for inst in instances:
        original = list(inst.token_ids)
        for p, label in zip(inst.masked_lm_positions, inst.masked_lm_ids):
            original[p] = label
        chosen = set(inst.masked_lm_positions)
        for p in chosen:
            start = p
            while is_cont[original[start]] and original[start - 1] not in specials:
                start -= 1
            end = p + 1
            while end < len(original) and is_cont[original[end]]:  # [SEP] ends a word
                end += 1
            assert set(range(start, end)) <= chosen, (inst, p)
            multi_piece_words += end - start > 1
        assert 0 < len(chosen) <= 20
    assert multi_piece_words > 50


@pytest.mark.real
def test_seed_reproduces_instances(sotu_documents, uncased_tokenizer):
    docs = sotu_documents[:2]
    first = create_pretraining_instances(docs, uncased_tokenizer, dupe_factor=1, seed=9)
    again = create_pretraining_instances(docs, uncased_tokenizer, dupe_factor=1, seed=9)
    other = create_pretraining_instances(docs, uncased_tokenizer, dupe_factor=1, seed=10)
    assert first == again
    assert first != other


@pytest.mark.real
def test_mlm_only_packs_contiguous_full_segments(sotu_documents, uncased_tokenizer):
    instances = create_pretraining_instances(
        sotu_documents[:2], uncased_tokenizer, dupe_factor=1, short_seq_prob=0.0,
        instance_format="contiguous", static_masking=False, seed=1)
    sep = uncased_tokenizer.sep_token_id
    lengths = [len(i.token_ids) for i in instances]
    assert sum(n == 128 for n in lengths) >= len(lengths) - 2  # only document tails are short
    for inst in instances:
        assert set(inst.segment_ids) == {0} and not inst.is_random_next
        assert inst.token_ids.count(sep) == 1 and inst.token_ids[-1] == sep
