"""Provides many configurations weighed, each search asked once (`Request`):
compare's rows (compare.py), the ordered search under a budget (suggest.py),
the diff of two (diff.py), and the notes and verdicts that say why a row
changed nothing (notes.py, name_verdicts.py). The top stage of the core.
"""
