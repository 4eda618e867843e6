"""``townsquare serve RUN``: a local web dashboard over a run directory, live while the run
writes (the command is registered by :mod:`townsquare.plugins.dashboard.serve_command`).

* :mod:`.run_reader`: read-only queries over ``events.sqlite``, the manifest and checkpoints;
* :mod:`.app`: the Starlette app, its routes and live updates;
* :mod:`.timeline_page`, :mod:`.agent_page`, :mod:`.run_pages`, :mod:`.platform_pages`: the pages;
* :mod:`.svg_chart`, :mod:`.follower_graph`: plots and the graph as server-side SVG;
* ``static/``: the page's own script and style sheet (nothing is loaded from the internet).
"""
