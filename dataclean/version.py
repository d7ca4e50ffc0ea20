"""dataclean's version, in a module of its own: a run's fingerprint and the export manifests read it without
importing the package's public names (which import the runner)."""
__version__ = "0.1.0"
