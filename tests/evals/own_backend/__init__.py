"""The prompt contract of the test's own backend (tests/evals/test_own_backend.py): data files only."""
