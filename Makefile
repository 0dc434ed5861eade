# Two commands for a newcomer: `make demo` (set up, then run the demo) and `make test` (set up, then lint and
# run the tests, as CI does). The set-up alone is `bash scripts/install.sh`; it runs again when pyproject.toml
# or the script changed since the last one.
VENV := .venv

.PHONY: setup demo test

$(VENV)/.installed: pyproject.toml scripts/install.sh scripts/pgvector_for_this_cpu.sh
	bash scripts/install.sh
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(VENV)/bin/kernelsage demo

test: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/lint-imports
	$(VENV)/bin/python -m pytest -q -n 2 --dist loadfile
