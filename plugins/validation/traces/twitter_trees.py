"""Twitter15 and Twitter16 (Ma, Gao and Wong, ACL 2017, "Detect Rumors in Microblog Posts Using
Propagation Structure via Kernel Learning"; the folders ``twitter15/`` and ``twitter16/`` of
``rumdetect2017.zip``) as a trace of cascades.

The layout: ``label.txt`` (``LABEL:TWEET_ID`` per line), ``source_tweets.txt`` (``TWEET_ID<TAB>
text``) and ``tree/TWEET_ID.txt``, one propagation tree per source tweet, one edge per line::

    ['ROOT', 'ROOT', '0.0']->['972651', '80080680482123777', '0.0']
    ['972651', '80080680482123777', '0.0']->['189397006', '80080680482123777', '1.8']

each side ``[user id, tweet id, minutes after the source tweet]``. A node is its whole triple
(a retweet carries the source's tweet id); an edge whose parent is no earlier node hangs from
the root, and a node listed twice is kept once. The trees mix retweets and replies without
telling them apart: every node but the root is a ``repost`` here. The times are minutes after
each source tweet, not a clock, so dimensions of the time of day do not apply.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from townsquare.api import UsageError
from townsquare.lib.files import read_user_text
from townsquare.lib.validation import Cascade, Trace

ROOT = ("ROOT", "ROOT", "0.0")


def looks_like_twitter_trees(folder: Path) -> bool:
    return (folder / "tree").is_dir() and (folder / "label.txt").is_file()


def read_tree(path: Path) -> Cascade:
    nodes: dict[tuple[str, str, str], int] = {}
    users: list[str] = []
    minutes: list[float] = []
    parent: list[int] = []
    for n, line in _lines(path, "propagation tree"):
        up, down = _edge(path, n, line)
        if not nodes and up != ROOT:  # a tree without its ROOT line: the first parent is the source
            nodes[up] = 0
            users.append(up[0])
            minutes.append(_minutes(path, n, up[2]))
            parent.append(-1)
        if down in nodes:
            continue
        up_node = (-1 if not users else 0) if up == ROOT else nodes.get(up, 0)  # unknown parent: the source
        nodes[down] = len(users)
        users.append(down[0])
        minutes.append(_minutes(path, n, down[2]))
        parent.append(up_node)
    if not users:
        raise UsageError(f"{path}: an empty propagation tree")
    times = np.asarray(minutes, dtype=np.float64) * 60.0
    return Cascade(id=path.stem, users=users, times=times - times[0], parent=np.asarray(parent, dtype=np.int64))


def _lines(path: Path, what: str) -> list[tuple[int, str]]:
    """The non-blank lines of ``path``, numbered from 1."""
    return [(n, line) for n, line in enumerate(read_user_text(path, what).splitlines(), start=1) if line.strip()]


def _edge(path: Path, n: int, line: str) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    left, arrow, right = line.partition("->")
    try:
        sides = [tuple(str(v) for v in ast.literal_eval(side.strip())) for side in (left, right)] if arrow else []
    except (ValueError, SyntaxError):
        sides = []
    if len(sides) != 2 or any(len(side) != 3 for side in sides):
        raise UsageError(f"{path}: line {n}: expected ['user', 'tweet', 'minutes']->['user', 'tweet', 'minutes']")
    return sides[0], sides[1]  # type: ignore[return-value]


def _minutes(path: Path, n: int, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"{path}: line {n}: delay {value!r} is not a number of minutes") from None


def twitter_trace(folder: Path, name: str) -> Trace:
    """Every tree of ``folder/tree/`` whose source tweet ``label.txt`` lists."""
    labelled = _labels(folder / "label.txt")
    cascades = [read_tree(folder / "tree" / f"{tweet}.txt") for tweet in labelled if (folder / "tree" / f"{tweet}.txt").is_file()]
    if not cascades:
        raise UsageError(f"{folder}/tree: none of the {len(labelled)} trees label.txt lists is there")
    events, interactions = [], []
    for cascade in cascades:
        for node, (user, time) in enumerate(zip(cascade.users, cascade.times)):
            events.append((user, float(time), "post" if node == 0 else "repost", "", np.nan))
            up = cascade.parent[node]
            if up >= 0 and cascade.users[up] != user:
                interactions.append((user, cascade.users[up]))
    return Trace.from_events(name, events, interactions=interactions, cascades=cascades, absolute_times=False, source=str(folder))


def _labels(path: Path) -> list[str]:
    tweets = []
    for n, line in _lines(path, "label file"):
        label, sep, tweet = line.strip().rpartition(":")
        if not sep or not label or not tweet.isdigit():
            raise UsageError(f"{path}: line {n}: expected LABEL:TWEET_ID, found {line.strip()[:60]!r}")
        tweets.append(tweet)
    return tweets
