"""The finished, tested code of the course "Transformers from scratch"; the notebooks import it."""

__version__ = "0.1.0"
