"""Text utilities shared by every rule: the one word tokenizer, line splitting."""
from dataclean.text.tokenize import WORDS_COLUMN, batch_words, lines_batch, split_words, words_batch

__all__ = ["split_words", "words_batch", "lines_batch", "batch_words", "WORDS_COLUMN"]
