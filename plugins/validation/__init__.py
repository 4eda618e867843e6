"""Runs held against people: ``townsquare validate`` scores runs against a trace of real people
dimension by dimension (:mod:`.validate`), and ``townsquare calibrate`` fits when agents act to
a trace (:mod:`.calibrate`). Dimensions are plugins of ``townsquare_register_validation_dimensions``
(:mod:`.dimensions`); traces are read from runs and from datasets (:mod:`.traces`)."""
