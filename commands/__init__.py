"""The built-in commands of ``townsquare``: each module is a plugin that adds its command through
``townsquare_register_commands`` (``-p no:NAME`` removes it), with the machinery it needs."""
