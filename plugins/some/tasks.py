"""SoMe's eight task types (Xue et al., "Social Media Tasks" and appendix "Task Definitions"),
their label sets, and task queries read from the benchmark's ``ground_truth.json`` files.

The benchmark's folders name the tasks (``user_comment_silmulation`` is spelt as in SoMe); the
abbreviations (RED, SES, MID, UBP, UEA, UCS, MCR, SMQ) work too. Choice tasks are scored by
accuracy on an extracted label, the others by an LLM judge (0–5 per criterion, normalised to
0–100). SoMe's Chinese labels map to the English ones our prompts use (:data:`SOME_LABELS`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from townsquare.api import UsageError
from townsquare.lib.prompt_files import fill_prompt

from .corpus import Corpus, read_json


@dataclass(frozen=True)
class TaskType:
    name: str  # SoMe's folder name
    short: str
    kind: str  # "choice" (accuracy) or "score" (LLM judge)
    labels: tuple[str, ...] = ()
    criteria: tuple[str, ...] = ()
    #: the tools the agent is offered for this task (the released test_<task>.py's function_list)
    tools: tuple[str, ...] = ()
    needs_knowledge: bool = False


YES_NO = ("yes", "no")
EMOTIONS = ("positive", "angry", "sad", "fear", "surprise", "emotionless")
VERDICTS = ("pants-fire", "false", "barely-true", "half-true", "mostly-true", "true")

#: the released code's tool subsets (SearchUser = user_search, DataFolder = data_folder,
#: SearchPosts = post_search, TopicClustering = topic_clustering, TopicSummarization =
#: topic_summarization, SearchTopic = topic_search, RetrievePosts = post_retrieve)
USER_TOOLS = ("user_search", "data_folder")

TASKS: dict[str, TaskType] = {t.name: t for t in (
    TaskType("realtime_event_detection", "RED", "score", criteria=("accuracy", "completeness", "relevance"),
             tools=("post_search", "data_folder", "topic_clustering", "topic_summarization")),
    TaskType("streaming_event_summary", "SES", "score", criteria=("accuracy", "completeness"), tools=("data_folder", "topic_search")),
    TaskType("misinformation_detection", "MID", "choice", VERDICTS, tools=("knowledge_retrieve",), needs_knowledge=True),
    TaskType("user_behavior_prediction", "UBP", "choice", YES_NO, tools=USER_TOOLS),
    TaskType("user_emotion_analysis", "UEA", "choice", EMOTIONS, tools=USER_TOOLS),
    TaskType("user_comment_silmulation", "UCS", "choice", YES_NO, tools=USER_TOOLS),
    TaskType("media_content_recommend", "MCR", "choice", YES_NO, tools=USER_TOOLS),
    TaskType("social_media_question_answering", "SMQ", "score", criteria=("accuracy",),
             tools=("user_search", "data_folder", "topic_search", "post_retrieve")),
)}

#: SoMe's labels in its ground-truth files -> ours
SOME_LABELS = {"是": "yes", "否": "no", "积极": "positive", "愤怒": "angry", "悲伤": "sad", "恐惧": "fear", "惊奇": "surprise",
               "无情绪": "emotionless"}
#: ours -> SoMe's, for the ground truth written from a run
TO_SOME = {v: k for k, v in SOME_LABELS.items()}

#: MID's ground truth has three classes (RAWFC's true / half / false) while the agent answers with
#: LIAR's six; a verdict counts as right when it falls in the label's class (our mapping: the
#: paper does not say how the two scales meet)
VERDICT_CLASS = {"pants-fire": "false", "false": "false", "barely-true": "half", "half-true": "half", "mostly-true": "true",
                 "true": "true"}

#: RED locations that mean "no place in particular" (a run's posts have none)
ANYWHERE = ("", "anywhere", "everywhere", "*")

#: the interaction of a UBP query: SoMe's key -> the verb our prompts use
BEHAVIORS = {"like": "like", "comment": "comment on", "repost": "repost"}


def task_type(name: str) -> TaskType:
    """A task by folder name or abbreviation (any case); a UsageError lists the valid ones."""
    key = name.strip().lower().replace("-", "_")
    key = {"user_comment_simulation": "user_comment_silmulation"}.get(key, key)
    for task in TASKS.values():
        if key in (task.name, task.short.lower()):
            return task
    raise UsageError(f"--tasks: unknown task {name!r}; the tasks are: "
                     + ", ".join(f"{t.short} ({t.name})" for t in TASKS.values()))


@dataclass
class Query:
    task: str
    id: str
    text: str  # what the agent is asked
    label: str  # a label of the task (choice) or the reference answer (score)
    #: UBP's interaction (like / comment / repost), which the system prompt names
    behavior: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def is_correct(task: TaskType, predicted: str, label: str) -> bool:
    """Eq. 1's indicator: the extracted answer equals the label (MID: within its class)."""
    if task.short == "MID" and label in ("true", "half", "false"):
        return VERDICT_CLASS.get(predicted) == label
    return predicted == label


def label_of(value: Any, where: str) -> str:
    text = str(value).strip()
    label = SOME_LABELS.get(text, text.lower())
    return label


# --------------------------------------------------------------------------- SoMe's ground-truth files


def read_ground_truth(folder: Path, task: TaskType) -> Any:
    path = folder / task.name / "ground_truth.json"
    if not path.is_file():
        raise UsageError(f"{path}: no such file (--some-data names SoMe's datasets folder, one subfolder per task)")
    return read_json(path)


def some_queries(task: TaskType, data: Any, corpus: Corpus | None, prompts: dict[str, str], where: str,
                 keep_missing_posts: bool = False) -> tuple[list[Query], int]:
    """The task's queries from its ground truth; the second value counts those whose post is
    not in the corpus (SoMe's posts are downloaded separately): skipped, or with
    ``keep_missing_posts`` (answers produced elsewhere, graded without the agent) asked about
    the post by its id."""
    queries: list[Query] = []
    skipped = 0
    posts = corpus.by_id if corpus is not None else {}

    def post_text(pid: Any) -> str | None:
        nonlocal skipped
        post = posts.get(str(pid))
        if post is None and keep_missing_posts:
            skipped += 1
            return f"(post {pid}; its text is not in {corpus.source if corpus is not None else 'the corpus'})"
        return None if post is None else post.text

    def need(obj: Any, key: str, context: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise UsageError(f"{where}: {context}: missing field {key!r}")
        return obj[key]

    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected a JSON object (SoMe's ground_truth.json)")
    if task.short == "MID":
        for key, entry in data.items():
            queries.append(Query(task.name, key, fill_prompt(prompts["query_mid"], claim=need(entry, "claim", key)),
                                 label_of(need(entry, "label", key), where)))
    elif task.short == "SMQ":
        queries = [Query(task.name, f"q{i}", str(q), str(a)) for i, (q, a) in enumerate(data.items())]
    elif task.short == "SES":
        queries = [Query(task.name, topic, fill_prompt(prompts["query_ses"], topic=topic), str(summary)) for topic, summary in data.items()]
    elif task.short == "RED":
        for key, events in data.items():
            parts = key.split("_")
            if len(parts) != 3:
                raise UsageError(f"{where}: key {key!r}: expected <start>_<end>_<location>")
            start, end, location = parts
            template = prompts["query_red_anywhere" if location.strip().lower() in ANYWHERE else "query_red"]
            queries.append(Query(task.name, key, fill_prompt(template, location=location, start=start, end=end),
                                 events_text(events)))
    else:
        groups = data.items() if task.short != "UBP" else [
            (f"{behavior}:{uid}", entries) for behavior, users in data.items() for uid, entries in (users or {}).items()]
        for key, entries in groups:
            behavior, uid = key.split(":", 1) if task.short == "UBP" else ("", key)
            if task.short == "UBP" and behavior not in BEHAVIORS:
                raise UsageError(f"{where}: unknown interaction {behavior!r} (like, comment, repost)")
            if not isinstance(entries, list):
                raise UsageError(f"{where}: {key}: expected a list of posts")
            for i, entry in enumerate(entries):
                text = post_text(need(entry, "weibo_id", f"{key}[{i}]"))
                if text is None:
                    skipped += 1
                    continue
                label = label_of(need(entry, "emotion" if task.short == "UEA" else "label", f"{key}[{i}]"), where)
                queries.append(user_query(task, prompts, f"{key}:{i}", uid, text, label, behavior, entry.get("comment", "")))
    return queries, skipped


def user_query(task: TaskType, prompts: dict[str, str], qid: str, uid: str, post: str, label: str, behavior: str = "",
               comment: str = "") -> Query:
    """A user-centred query (UBP, UEA, UCS, MCR) in our words of SoMe's templates."""
    template = prompts[f"query_{task.short.lower()}"]
    text = fill_prompt(template, uid=uid, post=post, behavior=BEHAVIORS.get(behavior, behavior), comment=comment)
    return Query(task.name, qid, text, label, behavior=behavior)


def events_text(events: Any) -> str:
    """RED's reference events (SoMe: ``[{标题, 摘要, 时间, 地点}]``) as text for the judge."""
    if isinstance(events, str):
        return events
    lines = []
    for event in events or []:
        if isinstance(event, dict):
            fields = [event.get(k) or event.get(e) for k, e in (("标题", "title"), ("摘要", "summary"), ("时间", "time"), ("地点", "location"))]
            lines.append(" | ".join(str(f) for f in fields if f))
        else:
            lines.append(str(event))
    return "\n".join(f"- {line}" for line in lines) or json.dumps(events, ensure_ascii=False)
