"""Files the judge copies into the runner's sandbox (standalone: they never import kernelsage)."""
