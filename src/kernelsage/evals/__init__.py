"""Evaluation: the task model, loaders for task suites, and the built-in suite."""
