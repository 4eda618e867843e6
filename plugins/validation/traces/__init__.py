"""Runs and datasets as :class:`townsquare.api.validation.Trace`\ s."""
