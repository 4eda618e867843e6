"""Helpers for testing townsquare and its plugins (registered as a pytest plugin)."""
