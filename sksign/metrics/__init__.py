"""sksign.metrics."""
