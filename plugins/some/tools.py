"""SoMe's eight agent tools (Xue et al., "Agent Tools", table 2, and the appendix "Tool
Implementations") over a :class:`~.corpus.Corpus`.

Tools that find data store it in a named data folder and answer with the folder's name and
size; :meth:`Toolbox.data_folder` shows a slice of a folder, each item through its display
function. The tools are called by their names in SoMe's code (``post_search`` is the paper's
SearchPost, ``topic_clustering`` its PostClustering...; :data:`PAPER_NAMES`).

Where the paper gives a value it is used; where it does not, the value is a setting
(:class:`ToolSettings`):

* RetrievePost, RetrieveKnowledge, PostClustering embed with Qwen3-Embedding-4B in the paper;
  here with the run's embedder (the scenario's ``[embedder]``), cosine similarity.
* PostClustering groups posts "with a semantical similarity threshold of 0.5": a post joins the
  most similar cluster when its cosine similarity to that cluster's mean vector is at least
  0.5, else it starts a cluster (single pass in time order; the paper does not say which
  clustering algorithm, so this leader clustering is our choice). Clusters are listed largest first.
* PostSummarization feeds each cluster's posts (at most ``summary_posts``, most engaged first)
  to the agent's own LLM with an event-summary prompt; the paper summarises every cluster, we
  summarise the ``summary_clusters`` largest (a setting) to bound the calls.
* SearchPost keeps posts whose region or text names the location (an empty location: all),
  published in [start, end); SearchTopic keeps posts that contain every keyword of the topic
  name (case-insensitive; a ``#`` is ignored).

Every tool answers in text; a wrong argument is answered with an ``Error: ...`` line the agent
can read, as in the benchmark, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .corpus import Corpus, Document, Post, parse_time, words
from .tasks import ANYWHERE

#: the tools by SoMe's function name, with the paper's name (table 2)
PAPER_NAMES = {
    "data_folder": "DataFolder", "post_search": "SearchPost", "topic_search": "SearchTopic", "user_search": "SearchUser",
    "post_retrieve": "RetrievePost", "knowledge_retrieve": "RetrieveKnowledge", "topic_clustering": "PostClustering",
    "topic_summarization": "PostSummarization",
}


class ToolSettings(BaseModel):
    """``[plugins.some]`` settings of the tools."""

    model_config = ConfigDict(extra="forbid")

    #: PostClustering's cosine threshold (Xue et al., appendix: 0.5)
    cluster_threshold: float = Field(0.5, ge=-1, le=1)
    #: clusters PostSummarization summarises (largest first; the paper: all)
    summary_clusters: int = Field(8, gt=0)
    #: posts of a cluster shown to the summarising LLM (most engaged first)
    summary_posts: int = Field(8, gt=0)
    #: the longest tool answer, in characters (longer ones are cut and say so): the prompt
    #: stays under the model's context however large a folder is
    max_answer_chars: int = Field(6000, gt=200)
    #: the longest post text shown, in characters
    max_post_chars: int = Field(400, gt=20)


Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]
Summarize = Callable[[str], Awaitable[str]]


@dataclass
class Folder:
    items: list[Any]  # Post, Document, a cluster (list[Post]) or a summary (str)
    kind: str


class Toolbox:
    """The tools of one task query: its data folders live as long as the query."""

    def __init__(self, corpus: Corpus, embed: Embed | None, summarize: Summarize | None, settings: ToolSettings | None = None,
                 offered: Sequence[str] = tuple(PAPER_NAMES)):
        self.corpus = corpus
        self.embed = embed
        self.summarize = summarize
        self.settings = settings or ToolSettings()
        #: the tools this query's agent was given (a task's subset, as in the released code)
        self.offered = tuple(offered)
        self.folders: dict[str, Folder] = {}
        self.calls: list[tuple[str, bool]] = []  # (tool, succeeded)

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run tool ``name``; a wrong name (or a tool not offered) or argument is answered with
        an ``Error:`` text."""
        method = getattr(self, name, None) if name in PAPER_NAMES and name in self.offered else None
        if method is None:
            self.calls.append((name, False))
            return f"Error: there is no tool {name!r}; the tools are: {', '.join(self.offered)}"
        try:
            answer = await method(**_arguments(name, arguments))
        except (TypeError, ValueError) as exc:
            self.calls.append((name, False))
            return f"Error: {name}: {exc}"
        self.calls.append((name, not answer.startswith("Error:")))
        return self._cut(answer)

    # ------------------------------------------------------------------ the eight tools

    async def data_folder(self, folder_name: str, start_idx: int, end_idx: int) -> str:
        folder = self.folders.get(folder_name)
        if folder is None:
            known = ", ".join(repr(n) for n in self.folders) or "none yet"
            return f"Error: no data folder {folder_name!r} (folders: {known})"
        start, end = max(0, int(start_idx)), min(len(folder.items), int(end_idx))
        if start >= end:
            return f"Error: folder {folder_name!r} holds items 0 to {len(folder.items) - 1}; [{start_idx}, {end_idx}) is empty"
        shown = [f"#{i} {self._show(folder.items[i], folder.kind)}" for i in range(start, end)]
        return f"Items {start} to {end - 1} of {len(folder.items)} in {folder_name!r}:\n" + "\n\n".join(shown)

    async def post_search(self, location: str, start_time: str, end_time: str) -> str:
        start, end = parse_time(start_time, "start_time"), parse_time(end_time, "end_time")
        if end <= start:
            return f"Error: end_time {end_time!r} is not after start_time {start_time!r}"
        place = str(location).strip().lower()
        place = "" if place in ANYWHERE else place
        found = [p for p in self.corpus.posts if p.created and start <= parse_time(p.created, "created") < end
                 and (not place or place in p.region.lower() or place in p.text.lower())]
        return self._store(f"{location}_{start_time}_{end_time}", found, "post", "posts published in that place and period")

    async def topic_search(self, topic_name: str) -> str:
        keys = [k.lower().strip("#") for k in str(topic_name).split() if k.strip("#")]
        if not keys:
            return "Error: topic_name is empty"
        found = [p for p in self.corpus.posts if all(k in p.text.lower() for k in keys)]
        return self._store(str(topic_name), found, "post", "posts about that topic")

    async def user_search(self, uid: str) -> str:
        uid = str(uid).strip()
        user = self.corpus.users.get(uid)
        if user is None:
            by_name = [u for u in self.corpus.users.values() if u.name.lower() == uid.lower()]
            if len(by_name) != 1:
                return f"Error: no user with ID {uid!r}"
            user = by_name[0]
        posts = sorted(self.corpus.posts_of(user.id), key=lambda p: p.created, reverse=True)
        stored = self._store(f"{user.id}_posts", posts, "post", "posts the user published, newest first")
        return f"Profile: {user.show()}\n{stored}"

    async def post_retrieve(self, query: str, folder_name: str, topk: int) -> str:
        folder = self.folders.get(folder_name)
        if folder is None or folder.kind != "post":
            return f"Error: no folder of posts {folder_name!r}"
        ranked = await self._rank(str(query), folder.items, [p.text for p in folder.items], int(topk))
        if ranked is None:
            return "Error: post_retrieve needs an embedder"
        return f"The {len(ranked)} posts of {folder_name!r} closest to {query!r}:\n" + "\n\n".join(self._show(p, "post") for p in ranked)

    async def knowledge_retrieve(self, query: str, topk: int) -> str:
        documents = self.corpus.knowledge
        if not documents:
            return "Error: this evaluation has no knowledge base"
        ranked = await self._rank(str(query), documents, [f"{d.title} {d.text}" for d in documents], int(topk))
        if ranked is None:
            return "Error: knowledge_retrieve needs an embedder"
        return f"The {len(ranked)} documents closest to {query!r}:\n" + "\n\n".join(self._show(d, "document") for d in ranked)

    async def topic_clustering(self, folder_name: str) -> str:
        folder = self.folders.get(folder_name)
        if folder is None or folder.kind != "post":
            return f"Error: no folder of posts {folder_name!r}"
        if self.embed is None:
            return "Error: topic_clustering needs an embedder"
        clusters = cluster_posts(folder.items, await self.embed([p.text for p in folder.items]) if folder.items else np.zeros((0, 1)),
                                 self.settings.cluster_threshold)
        return self._store(f"{folder_name}_clusters", clusters, "cluster", "clusters of similar posts, largest first")

    async def topic_summarization(self, folder_name: str) -> str:
        folder = self.folders.get(folder_name)
        if folder is None or folder.kind != "cluster":
            return f"Error: no folder of clusters {folder_name!r} (make one with topic_clustering)"
        if self.summarize is None:
            return "Error: topic_summarization needs an LLM"
        summaries = []
        for cluster in folder.items[: self.settings.summary_clusters]:
            shown = sorted(cluster, key=engagement, reverse=True)[: self.settings.summary_posts]
            text = (await self.summarize("\n\n".join(self._show(p, "post") for p in shown))).strip()
            if text:
                summaries.append(text)
        return self._store(f"{folder_name}_summaries", summaries, "summary", "event summaries (one per cluster)")

    # ------------------------------------------------------------------ helpers

    def _store(self, name: str, items: list[Any], kind: str, what: str) -> str:
        self.folders[name] = Folder(items, kind)
        return (f"{len(items)} {what} are stored in the data folder {name!r}; "
                f"read them with data_folder (indexes 0 to {max(0, len(items) - 1)}).")

    async def _rank(self, query: str, items: list[Any], texts: list[str], k: int) -> list[Any] | None:
        if self.embed is None:
            return None
        if not items or k <= 0:
            return []
        vectors = await self.embed([query, *texts])
        return [items[i] for i in top_k(vectors[0], vectors[1:], k)]

    def _show(self, item: Any, kind: str) -> str:
        limit = self.settings.max_post_chars
        if kind == "post":
            text = item.show()
            return text if len(item.text) <= limit else text[: len(text) - len(item.text) + limit] + " [...]"
        if kind == "cluster":
            head = sorted(item, key=engagement, reverse=True)[:3]
            return f"cluster of {len(item)} posts; the most engaged:\n" + "\n".join(self._show(p, "post") for p in head)
        if kind == "document":
            return item.show()[: limit * 3]
        return str(item)

    def _cut(self, answer: str) -> str:
        limit = self.settings.max_answer_chars
        return answer if len(answer) <= limit else answer[:limit] + "\n[... cut: ask data_folder for fewer items at a time]"


def engagement(post: Post) -> int:
    return post.likes + post.reposts + post.comments


def top_k(query: np.ndarray, matrix: np.ndarray, k: int) -> list[int]:
    """Indexes of the ``k`` rows most cosine-similar to ``query``, best first (ties: earlier row)."""
    scores = _unit(matrix) @ _unit(query[None, :])[0]
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def cluster_posts(posts: list[Post], vectors: np.ndarray, threshold: float) -> list[list[Post]]:
    """Leader clustering at a cosine threshold (see the module docstring), largest cluster first."""
    units = _unit(np.asarray(vectors, dtype=np.float64))
    sums: list[np.ndarray] = []
    members: list[list[int]] = []
    for i, vector in enumerate(units):
        best, best_sim = -1, threshold
        for c, total in enumerate(sums):
            centre = total / (np.linalg.norm(total) or 1.0)
            sim = float(centre @ vector)
            if sim >= best_sim:
                best, best_sim = c, sim
        if best < 0:
            sums.append(vector.copy())
            members.append([i])
        else:
            sums[best] += vector
            members[best].append(i)
    order = sorted(range(len(members)), key=lambda c: (-len(members[c]), members[c][0]))
    return [[posts[i] for i in members[c]] for c in order]


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


#: each tool's parameters: (name, JSON type, description, required)
PARAMETERS: dict[str, list[tuple[str, str, str]]] = {
    "data_folder": [("folder_name", "string", "name of the data folder"),
                    ("start_idx", "integer", "first item to show (included)"),
                    ("end_idx", "integer", "item to stop at (excluded)")],
    "post_search": [("location", "string", "place the posts are about ('anywhere': no place in particular)"),
                    ("start_time", "string", "start of the period, %Y-%m-%d %H:%M:%S"),
                    ("end_time", "string", "end of the period, %Y-%m-%d %H:%M:%S")],
    "topic_search": [("topic_name", "string", "topic keywords, separated by spaces")],
    "user_search": [("uid", "string", "the user's ID")],
    "post_retrieve": [("query", "string", "what to look for"), ("folder_name", "string", "data folder of posts to search"),
                      ("topk", "integer", "how many posts to return")],
    "knowledge_retrieve": [("query", "string", "what to look for"), ("topk", "integer", "how many documents to return")],
    "topic_clustering": [("folder_name", "string", "data folder of posts to cluster")],
    "topic_summarization": [("folder_name", "string", "data folder of clusters (from topic_clustering)")],
}

DESCRIPTIONS = {
    "data_folder": "Show the items of a data folder from start_idx to end_idx. Keep slices small enough for your context.",
    "post_search": "Find the posts about a location published between start_time and end_time; stores them in a data folder.",
    "topic_search": "Find the posts about a topic; stores them in a data folder named after the topic.",
    "user_search": "Show a user's profile and store the posts they published in a data folder.",
    "post_retrieve": "Return the topk posts of a data folder most similar in meaning to the query.",
    "knowledge_retrieve": "Return the topk knowledge-base documents most similar in meaning to the query.",
    "topic_clustering": "Group the posts of a data folder into clusters of similar posts; stores the clusters in a new folder.",
    "topic_summarization": "Summarise each cluster of a cluster folder as an event; stores the summaries in a new folder.",
}


def openai_tools(names: Sequence[str] = tuple(PAPER_NAMES)) -> list[dict[str, Any]]:
    """The tools as OpenAI function-calling schemas (``tools=[...]`` of a chat completion)."""
    return [{"type": "function", "function": {
        "name": name, "description": DESCRIPTIONS[name],
        "parameters": {"type": "object", "properties": {p: {"type": t, "description": d} for p, t, d in PARAMETERS[name]},
                       "required": [p for p, _, _ in PARAMETERS[name]]}}} for name in names]


def _arguments(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments checked against the tool's parameters: names, and integers where wanted."""
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be an object")
    expected = {p: t for p, t, _ in PARAMETERS[name]}
    unknown = sorted(set(arguments) - set(expected))
    missing = sorted(set(expected) - set(arguments))
    if unknown or missing:
        raise ValueError("; ".join(filter(None, [unknown and f"unknown argument(s) {', '.join(unknown)}",
                                                  missing and f"missing argument(s) {', '.join(missing)}"]))
                         + f" (takes {', '.join(expected)})")
    checked = {}
    for key, value in arguments.items():
        if expected[key] == "integer":
            try:
                checked[key] = int(value)
            except (TypeError, ValueError):
                raise ValueError(f"{key} must be a whole number, got {value!r}") from None
        else:
            checked[key] = "" if value is None else str(value)
    return checked


__all__ = ["Document", "PAPER_NAMES", "ToolSettings", "Toolbox", "cluster_posts", "openai_tools", "top_k", "words"]
