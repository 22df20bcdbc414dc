"""GLUE task definitions and reading the official TSV layouts (rows copied in the GLUE files'
own formats: CoLA without a header, unquoted text with stray quotes, MNLI's parse columns)."""

import numpy as np
import pytest

from keras_bert_suite.tasks.classifier.glue import GLUE_TASKS
from keras_bert_suite.tasks.classifier.glue import get_glue_task
from keras_bert_suite.tasks.classifier.glue import glue_file
from keras_bert_suite.tasks.classifier.glue import read_glue
from keras_bert_suite.tasks.classifier.metric import glue_metrics


MNLI_PARSES = "( ( A ) ( B ) )\t( ( C ) ( D ) )\t(ROOT (S (NP A) (VP B)))\t(ROOT (S (NP C) (VP D)))"

FILES = {
    "CoLA/train.tsv": [
        "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.",
        "gj04\t1\t\tThe more we study verbs, the crazier they get.",
        "gj04\t0\t*\tThey drank the pub.",
    ],
    "CoLA/dev.tsv": ["gj04\t0\t*\tThe more does Bill smoke, the more Susan hates him."],
    "CoLA/test.tsv": ["index\tsentence", "0\tBill whistled past the house."],
    "SST-2/train.tsv": [
        "sentence\tlabel",
        "hide new secretions from the parental units \t0",
        "that loves its characters and communicates something rather beautiful about human "
        "nature \t1",
    ],
    "SST-2/dev.tsv": ["sentence\tlabel", "it 's a charming and often affecting journey . \t1"],
    "MRPC/train.tsv": [
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
        "1\t702876\t702977\tAmrozi accused his brother , whom he called \" the witness \" , of "
        "deliberately distorting his evidence .\tReferring to him as only \" the witness \" , "
        "Amrozi accused his brother of deliberately distorting his evidence .",
        "0\t2108705\t2108831\tYucaipa owned Dominick 's before selling the chain to Safeway in "
        "1998 for $ 2.5 billion .\tYucaipa bought Dominick 's in 1995 for $ 693 million and sold "
        "it to Safeway for $ 1.8 billion in 1998 .",
    ],
    "STS-B/train.tsv": [
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
        "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane is taking off.\t"
        "An air plane is taking off.\t5.000",
        "1\tmain-captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man is playing a large flute.\t"
        "A man is playing a flute.\t3.800",
    ],
    "STS-B/test.tsv": [
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2",
        "0\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\tA girl is styling her hair.\t"
        "A girl is brushing her hair.",
    ],
    "QQP/train.tsv": [
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
        "402555\t536040\t536041\tHow do I control my horny emotions?\tHow do you control your "
        "horniness?\t1",
    ],
    "MNLI/train.tsv": [
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label",
        f"0\t31193\t31193n\tgovernment\t{MNLI_PARSES}\tConceptually cream skimming has two basic "
        "dimensions - product and geography.\tProduct and geography are what make cream "
        "skimming work. \tneutral\tneutral",
        f"1\t101457\t101457e\ttelephone\t{MNLI_PARSES}\t\"Yes, she said. you know during the "
        "season\tYou lose the things to the following level if the people recall.\t"
        "contradiction\tcontradiction",
    ],
    "MNLI/dev_mismatched.tsv": [
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
        "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\t"
        "label4\tlabel5\tgold_label",
        f"0\t75290\t75290c\tletters\t{MNLI_PARSES}\tYour contribution helped make it possible for "
        "us to provide our students with a quality education.\tYour contributions were of no "
        "help with our students' education.\tcontradiction\tcontradiction\tcontradiction\t"
        "contradiction\tcontradiction\tcontradiction",
    ],
    "QNLI/dev.tsv": [
        "index\tquestion\tsentence\tlabel",
        "0\tWhat came into force after the new constitution was herald?\tAs of that day, the new "
        "constitution heralding the Second Republic came into force.\tentailment",
    ],
    "RTE/train.tsv": [
        "index\tsentence1\tsentence2\tlabel",
        "0\tNo Weapons of Mass Destruction Found in Iraq Yet.\tWeapons of Mass Destruction Found "
        "in Iraq.\tnot_entailment",
    ],
    "WNLI/train.tsv": [
        "index\tsentence1\tsentence2\tlabel",
        "0\tI stuck a pin through a carrot. When I pulled the pin out, it had a hole.\tThe "
        "carrot had a hole.\t1",
    ],
    "diagnostic/diagnostic.tsv": [
        "index\tsentence1\tsentence2",
        "0\tThe cat sat on the mat.\tThe cat did not sit on the mat.",
    ],
}


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue")
    for name, lines in FILES.items():
        path = root / name
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(root)


def test_task_table():
    assert sorted(GLUE_TASKS) == ["ax", "cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2",
                                  "stsb", "wnli"]
    expected = {"cola": ("matthews_corrcoef",), "sst2": ("accuracy",), "mrpc": ("f1", "accuracy"),
                "stsb": ("pearson", "spearman"), "qqp": ("f1", "accuracy"),
                "mnli": ("accuracy",), "qnli": ("accuracy",), "rte": ("accuracy",),
                "wnli": ("accuracy",), "ax": ("matthews_corrcoef",)}
    assert {name: task.metrics for name, task in GLUE_TASKS.items()} == expected
    # Label ids as in tensorflow-datasets / Hugging Face datasets.
    assert GLUE_TASKS["mnli"].class_names == ("entailment", "neutral", "contradiction")
    assert GLUE_TASKS["qnli"].labels == ("entailment", "not_entailment")
    assert GLUE_TASKS["cola"].class_names == ("unacceptable", "acceptable")
    assert GLUE_TASKS["stsb"].num_classes == 1 and GLUE_TASKS["stsb"].is_regression
    assert GLUE_TASKS["mnli"].num_classes == 3 and GLUE_TASKS["mnli"].is_pair_task
    assert not GLUE_TASKS["sst2"].is_pair_task
    assert get_glue_task("SST-2") is GLUE_TASKS["sst2"] and get_glue_task("STS-B").name == "stsb"


def test_cola_without_header_and_its_test_file(glue_dir):
    train = read_glue("cola", glue_dir, "train")
    assert train.texts[0] == ("Our friends won't buy this analysis, let alone the next one we "
                              "propose.")
    np.testing.assert_array_equal(train.labels, [1, 1, 0])
    assert train.text_pairs is None and list(train.line_numbers) == [1, 2, 3]
    test = read_glue("cola", glue_dir, "test")
    assert test.texts == ["Bill whistled past the house."] and test.labels is None


def test_pair_tasks_keep_unquoted_text(glue_dir):
    mrpc = read_glue("mrpc", glue_dir, "train")
    assert mrpc.texts[0].startswith('Amrozi accused his brother , whom he called " the witness "')
    assert mrpc.text_pairs[1].endswith("$ 1.8 billion in 1998 .")
    np.testing.assert_array_equal(mrpc.labels, [1, 0])

    mnli = read_glue("mnli", glue_dir, "train")
    assert mnli.texts[1] == '"Yes, she said. you know during the season'  # unclosed quote
    np.testing.assert_array_equal(mnli.labels, [1, 2])  # neutral, contradiction
    dev = read_glue("mnli", glue_dir, "validation_mismatched")
    assert dev.text_pairs[0].startswith("Your contributions were of no help")
    np.testing.assert_array_equal(dev.labels, [2])

    assert read_glue("qnli", glue_dir, "validation").labels.tolist() == [0]
    assert read_glue("rte", glue_dir, "train").labels.tolist() == [1]
    assert read_glue("wnli", glue_dir, "train").labels.tolist() == [1]
    qqp = read_glue("qqp", glue_dir, "train")
    assert qqp.text_pairs == ["How do you control your horniness?"] and qqp.labels.tolist() == [1]
    ax = read_glue("ax", glue_dir, "test")
    assert ax.text_pairs == ["The cat did not sit on the mat."] and ax.labels is None


def test_stsb_scores_and_metrics(glue_dir):
    train = read_glue("stsb", glue_dir, "train")
    np.testing.assert_allclose(train.labels, [5.0, 3.8])
    assert train.label_names is None
    assert read_glue("stsb", glue_dir, "test").text_pairs == ["A girl is brushing her hair."]
    assert glue_metrics("stsb", [4.1, 3.0], train.labels) == {"pearson": pytest.approx(1.0),
                                                              "spearman": pytest.approx(1.0)}


def test_sst2_from_the_task_directory(glue_dir):
    dev = read_glue("sst2", f"{glue_dir}/SST-2", "validation")  # the task's own folder works too
    assert dev.texts == ["it 's a charming and often affecting journey . "]
    assert glue_metrics("sst2", [[0.2, 0.8]], dev.labels) == {"accuracy": 1.0}


def test_errors(glue_dir, tmp_path):
    with pytest.raises(ValueError, match=r"Unknown GLUE task 'mnli-mm'.*'ax', 'cola'"):
        read_glue("mnli-mm", glue_dir, "train")
    with pytest.raises(ValueError, match=r"no split 'validation'.*validation_matched"):
        read_glue("mnli", glue_dir, "validation")
    with pytest.raises(FileNotFoundError, match=r"QQP/dev\.tsv and .*/dev\.tsv"):
        glue_file("qqp", glue_dir, "validation")
    bad = tmp_path / "RTE"
    bad.mkdir()
    (bad / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n"
                                 "0\tA man is sleeping.\tA man sleeps.\tentailment\n"
                                 "1\tA dog barks.\tA cat meows.\tcontradiction\n")
    with pytest.raises(ValueError, match=r"RTE/dev\.tsv, line 3: unknown label 'contradiction'; "
                                         r"known labels are \['entailment', 'not_entailment'\]"):
        read_glue("rte", str(tmp_path), "validation")
