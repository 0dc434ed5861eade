"""The built-in suite (our own format): one module per level, each defining TASKS."""
