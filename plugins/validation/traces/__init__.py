"""Runs and datasets as traces (:class:`townsquare.api.validation.Trace`)."""
