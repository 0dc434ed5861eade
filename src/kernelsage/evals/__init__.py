"""Evaluation on top of the agent: task streams, experiments, episode records, metrics and reports."""
