"""``python -m townsquare.cli``: the ``townsquare`` command."""

from townsquare.cli import main

main()
