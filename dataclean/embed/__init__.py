"""Text embeddings: local model folders (:mod:`dataclean.embed.models`) and the Arrow column that holds
them (:mod:`dataclean.embed.vectors`)."""
