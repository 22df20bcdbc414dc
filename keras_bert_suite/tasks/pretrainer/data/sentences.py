"""Splitting a paragraph of English prose into sentences (for pretraining documents).

A rule-based splitter, good enough for next-sentence prediction on edited prose: a sentence
ends at `.`, `!` or `?` (plus closing quotes/brackets) followed by white space and a word that
starts with an upper-case letter, a digit or an opening quote/bracket, unless the word before
the period is a known abbreviation ("Mr.", "U.S.", "e.g.") or a single capital initial ("J.").
"""

import re

# Words that end with a period without ending a sentence (compared lower-cased, no period).
ABBREVIATIONS = frozenset("""
mr mrs ms dr st jr sr messrs prof gen gov sen rep hon col capt lt maj sgt adm cmdr rev fr
no nos vol art sec ch fig pp vs etc esq inc co corp ltd bros dept univ
jan feb mar apr jun jul aug sep sept oct nov dec
u.s u.k u.n e.g i.e a.m p.m
""".split())

_BOUNDARY = re.compile(r"""[.!?]+["')\]\u201d\u2019]*\s+(?=["'(\[\u201c\u2018]?[A-Z0-9])""")
_LAST_WORD = re.compile(r"(\S+)$")


def split_sentences(paragraph):
    """str -> list of sentence strings (stripped, none empty)."""
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(paragraph):
        end = match.end()
        head = paragraph[start:match.start() + 1]
        word = _LAST_WORD.search(head)
        if paragraph[match.start()] == "." and word is not None:
            token = word.group(1).rstrip(".").lstrip("\"'(\u201c\u2018").lower()
            if token in ABBREVIATIONS or re.fullmatch(r"[a-z]", token):
                continue
        sentence = paragraph[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    rest = paragraph[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences
