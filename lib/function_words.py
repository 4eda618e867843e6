"""English function words: pronouns, articles, auxiliaries and the commonest verbs and adverbs.
Any two English texts share them, so they are evidence of neither copying nor a shared topic:
the copying measure of comments (``townsquare.plugins.report.comment_copying``) and the offline
model's ``avoid`` (a comment answers its post without repeating its words) leave them out."""

from __future__ import annotations

FUNCTION_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i i'm i've i'd i'll if in into is it it's its itself just let's me more most my myself no nor not of
off on once only or other our ours ourselves out over own same she should so some such than that that's the their
theirs them themselves then there there's these they they're this those through to too under until up very was we
we're were what when where which while who whom why will with would you you're your yours yourself yourselves also
get got really like just one can't don't isn't it's i'm so much many make made way well even still
""".split())
