"""The built-in validation dimensions, one plugin per module (``-p no:NAME`` leaves a module's
dimensions out of ``townsquare validate``)."""
