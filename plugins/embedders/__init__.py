"""Embedders: hash (the offline default), minilm, openai_embedder; text_vector_cache, their shared cache."""
