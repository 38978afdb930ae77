"""Evaluation of infilling models: HumanEval infilling, a held-out FIM set, decoding ablations."""
