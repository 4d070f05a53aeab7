"""Source rewrites keyed by rule code (see torchmend/rules/). Pure: no printing, no file writes."""
