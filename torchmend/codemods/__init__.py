"""Source rewrites keyed by rule code (see torchmend/rules.py). Pure: no printing, no file writes."""
