"""The decisions: which commit to boot next, what the boots say, and the answer.

Pure and deterministic, with no Temporal import: the workflows ask for each decision
through a local activity (so a job's history records it) and never run this code on
replay. Layered below the workflows (tests/test_layers.py).
"""
