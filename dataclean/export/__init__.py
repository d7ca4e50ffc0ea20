"""Training files from a run: tokenized export with provenance (:mod:`.writer`), Megatron index files
(:mod:`.megatron`) and tracing training positions back to documents (:mod:`.trace`)."""
