"""Tests of the probes (`make probes-test`), apart from the course suite."""
