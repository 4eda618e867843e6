"""Starting, resuming and replaying runs: the glue between a scenario, the plugins and a run
directory that the command line (:mod:`townsquare.commands`) and the notebook API
(:mod:`townsquare.notebook`) share, outside the kernel.

- :mod:`townsquare.launch.runner`: ``start_run``, ``resume_run``, ``rerun``, ``load_run``;
- :mod:`townsquare.launch.settings_kinds`: which settings a resume may change;
- :mod:`townsquare.launch.input_fingerprints`: the input files a run recorded, checked on resume.
"""
