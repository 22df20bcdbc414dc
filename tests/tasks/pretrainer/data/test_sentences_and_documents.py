import pytest

from keras_bert_suite.tasks.pretrainer.data.documents import read_documents
from keras_bert_suite.tasks.pretrainer.data.sentences import split_sentences


def test_split_sentences_keeps_abbreviations_and_initials():
    text = ("Mr. Smith went to Washington, D.C. in 1801. He met J. Adams there! Was it "
            "worth it? \"Yes,\" he said. The U.S. Congress agreed.")
    assert split_sentences(text) == [
        "Mr. Smith went to Washington, D.C. in 1801.",
        "He met J. Adams there!",
        "Was it worth it?",
        "\"Yes,\" he said.",
        "The U.S. Congress agreed.",
    ]
    assert split_sentences("  ") == []
    assert split_sentences("no final period") == ["no final period"]


def test_read_documents_original_format(tmp_path):
    first = tmp_path / "a.txt"
    first.write_text("Sentence one.\nSentence two.\n\n\nOther doc.\n")
    second = tmp_path / "b.txt"
    second.write_text("New file, new document.\n  \nLast one.")
    assert list(read_documents([str(first), str(second)])) == [
        ["Sentence one.", "Sentence two."], ["Other doc."], ["New file, new document."],
        ["Last one."]]


def test_read_documents_paragraphs(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("One here. Two there.\nThree!\n\nFour.\n")
    assert list(read_documents(str(path), "paragraph_per_line")) == [
        ["One here.", "Two there.", "Three!"], ["Four."]]
    with pytest.raises(ValueError, match="layout"):
        list(read_documents(str(path), "xml"))


@pytest.mark.real
def test_sotu_documents_are_sentences(sotu_documents):
    assert len(sotu_documents) == 8
    sentences = [s for d in sotu_documents for s in d]
    assert len(sentences) > 1000
    ends = sum(s.endswith((".", "!", "?", ".\"", "?\"", ":", ";")) for s in sentences)
    assert ends / len(sentences) > 0.95
