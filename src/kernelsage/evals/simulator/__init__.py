"""A memory-learning simulator: a seeded synthetic world of operators and lessons of known true value, a
stochastic stand-in for the generator (no language model), and the real memory backend (store, policies,
episode commit, consolidation) underneath. See docs/simulator.md for the model and its assumptions.

- world.py: operators, lessons, their true values, synthetic embeddings, stream orders
- standin.py: the stand-in generator (use, declared adoption, round outcomes, new lessons)
- episode.py: one episode through the real memory; run.py: one stream in its own namespace
- measures.py: ER, Fast1.0, S_self (evals.metrics), credit accuracy, hot precision, demotion, intervals
- study.py: policies x orders x seeds, and sweeps; plots.py, report.py: the report
"""
