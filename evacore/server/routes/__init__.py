"""One router per resource, all mounted under `/v1`."""
