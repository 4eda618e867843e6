"""Runs and datasets as traces (:class:`townsquare.lib.validation.Trace`)."""
