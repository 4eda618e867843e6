"""What a model typically answers to RecAgent's agents: the estimate's priors
(``townsquare_register_answer_priors``; read by ``townsquare estimate`` only). Our choices (the
paper reports no shares of its agents' choices):

* ``recagent.activity``: three fifths of the free time go to the recommender system, a fifth to
  friends;
* ``recagent.page``: an agent who opened the system came to watch: a page leads to a watch half
  the time, to the next page three times in ten, to a search one, and the agent leaves otherwise;
* ``recagent.social``: three chats in ten, else a broadcast; a chat ends after four lines
  (the disposition scales it);
* ``recagent.rating``: 6 to 8 out of 10;
* ``recagent.sensory``: the observation in one sentence, scored by the prompt's own scale: an
  experience of an item (watched, felt, rated, chatted, posted) 8, a list of items shown 5,
  anything else 2.
"""

from __future__ import annotations

import re

from townsquare.api import hookimpl
from townsquare.lib.answer_priors import AnswerPrior

from .chat import END

_TRANSCRIPT = re.compile(r"^\[[^\]]+\]: ", re.M)
#: lines before a typical chat ends (our choice; the disposition scales it)
CHAT_LINES = 4


_OBSERVATION = re.compile(r"just experienced:\n\n(.*?)\n\nFirst", re.S)
_EXPERIENCE = re.compile(r"\b(?:watched|felt|rated|chatted|posted|said)\b", re.I)
_LISTED = re.compile(r"\b(?:is recommended|next page|searched|found)\b", re.I)


def typical_sensory(prompt: str, disposition: float) -> dict:
    """The observation as its sentence, with the importance the prompt's scale gives it."""
    found = _OBSERVATION.search(prompt)
    observation = " ".join((found.group(1) if found else prompt).split())
    importance = 8 if _EXPERIENCE.search(observation) else 5 if _LISTED.search(observation) else 2
    return {"sentence": " ".join(observation.split()[:40]), "importance": importance}


def typical_chat_turn(prompt: str, disposition: float) -> str:
    """One line of a chat; the line that makes :data:`CHAT_LINES` ends it."""
    said = len(_TRANSCRIPT.findall(prompt))
    line = "I watched a film last week that I think you would enjoy; what have you been watching?"
    return f"{line} {END}" if said + 1 >= max(1, round(CHAT_LINES * disposition)) else line


@hookimpl
def townsquare_register_answer_priors():
    choice = "our choice"
    return [
        AnswerPrior("recagent.activity", shares={"recommender": 0.6, "social": 0.2}, note=choice),
        AnswerPrior("recagent.page", shares={"watch *": 0.5, "next page": 0.3, "search": 0.1}, note=choice),
        AnswerPrior("recagent.social", shares={"chat": 0.3, "broadcast": 0.7}, note=choice),
        AnswerPrior("recagent.chat_turn", answer=typical_chat_turn, note=f"a chat of {CHAT_LINES} lines"),
        AnswerPrior("recagent.rating", shares={"6": 0.3, "7": 0.4, "8": 0.3}, note=choice),
        AnswerPrior("recagent.sensory", answer=typical_sensory, note="scored by the prompt's own scale"),
    ]
