"""No module chooses what to do by a class's name: a task declares its checkpoint form, a
tokenizer its `kind`, and code asks them. Names may still appear in messages."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_suite"


def _is_name_of_a_class(node):
    return isinstance(node, ast.Attribute) and node.attr == "__name__" and not (
        isinstance(node.value, ast.Name) and node.value.id == "__name__")


def _dispatches_on_class_names(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                _is_name_of_a_class(side) for side in [node.left, *node.comparators]):
            yield node.lineno


def test_no_module_compares_class_names():
    found = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             for line in _dispatches_on_class_names(ast.parse(path.read_text()))]
    assert not found, f"dispatch on a class name (ask the object instead): {found}"


def test_the_check_finds_a_dispatch_on_a_class_name():
    source = "if type(tokenizer).__name__ == 'BertTokenizer':\n    pass\n"
    assert list(_dispatches_on_class_names(ast.parse(source))) == [1]
    assert not list(_dispatches_on_class_names(ast.parse("if __name__ == '__main__': pass")))
