"""Pretraining data: documents and sentences from text, BERT's instances, static and dynamic
masking, TFRecords in google-research/bert's schema, the Apache Beam pipeline of
`kbs create-pretraining-data` (pipeline.py, beam_transforms.py, corpus_buckets.py; the
command is command.py) and the datasets a pretraining recipe streams (recipe_data.py)."""
