"""townsquare: simulate the users of social media and recommender platforms with LLM persona agents.

Importing this package is cheap: nothing heavy and no plugin loads at import time.
"""

from .markers import hookimpl, hookspec

__version__ = "0.1.0"

__all__ = ["hookimpl", "hookspec", "__version__"]
