"""Tasks: the task model, input generators, loaders for our suite and the external suites, the built-in suite."""
