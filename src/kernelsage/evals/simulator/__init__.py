"""A memory-learning simulator: a seeded synthetic world of operators and lessons of known true value, a
stochastic stand-in for the generator (no language model), and the real memory backend (store, policies,
episode commit, consolidation) underneath. See docs/simulator.md for the model and its assumptions.

- world.py: operators, lessons, their true values, synthetic embeddings, stream orders
- draws.py: random streams by purpose (world, order, pack, stand-in, policy, mined): common random numbers
- mined.py: a warm start, mined lessons every policy's memory starts with
- standin.py: the stand-in generator (use, declared adoption, round outcomes, new lessons)
- truth.py: the ground truth of one memory (an item's contribution per episode) and what was observed
- episode.py: one episode through the real memory; run.py: one stream in its own namespace
- measures.py: ER, Fast1.0, S_self (evals.metrics), credit accuracy, hot precision, demotion, intervals
- dispatch.py: one stream as a picklable unit of work (`run_one`), run here or in worker processes
- study.py: policies x orders x seeds, and sweeps; claims.py: published signs judged on paired seeds
- plots.py, report.py: the report
"""
