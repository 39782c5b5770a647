"""archfit's version, importable on its own (reading it loads nothing else of the package)."""

__version__ = "0.1.0"
