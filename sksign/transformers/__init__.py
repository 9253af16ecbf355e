"""sksign.transformers."""
