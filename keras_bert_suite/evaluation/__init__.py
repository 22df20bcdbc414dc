"""Task metrics: classification/GLUE, SQuAD exact match and F1, entity-level NER F1."""
