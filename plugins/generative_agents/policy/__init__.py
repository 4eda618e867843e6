"""A generative agent acting on a social platform (slot ``policy``)."""
