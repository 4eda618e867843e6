"""The judges behind Zhou et al.'s consistency and text-quality numbers (§4.2), pluggable.

**C.score** (Madotto et al., 2019, as Zhou et al. §4.2 use it): an NLI model reads the persona
as premise and a post as hypothesis; entailment scores 1, neutral 0, contradiction -1, and
C.score is the mean over the pairs (:func:`c_score`). Zhou et al. used RoBERTa fine-tuned on
DialogueNLI. Here the judge is pluggable (:class:`NLIJudge`):

* :class:`LLMNLIJudge` (default): the run's LLM client answers with one of the three labels
  (prompt ``nli`` in ``prompts/zhou_judges.toml``), so the run's cache, budget and retries
  apply; an answer that is no label gets one repair request (``LLMClient.choose``), then the
  pair counts as unjudged (left out of the mean, counted in ``failures``);
* :class:`TransformersNLIJudge`: any Hugging Face sequence-classification NLI model (e.g. a
  RoBERTa-MNLI), when ``transformers`` is installed; its labels are read by name.

**Info / Cons / Hum** (§4.2): an LLM judge gives each text informativeness, consistency with
the persona and humanness on 1 (poor), 2 (moderate), 3 (good) (prompt ``quality``).
:data:`QUALITY_ANSWER` declares the answer (a JSON object of three grades in 1..3); it is asked
through ``LLMClient.ask``, so a backend that constrains decoding (llama.cpp's grammar, a strict
JSON schema) writes it in that shape, and elsewhere :func:`grades_of` checks it; an answer that
does not fit gets the LLM layer's one repair request and then counts as unjudged.
:func:`parse_quality` reads grades out of free text (a JSON object, or "name: n" lines).

Persona text for both (§4.2: "only personality, hobbies, and social media content
preferences of the persona are used"): :func:`evaluation_persona`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from townsquare.api import AnswerFormat, Persona, UsageError
from townsquare.lib.prompt_files import fill_prompt, load_prompts

PROMPTS = Path(__file__).resolve().parent / "prompts"
REQUIRED = {"nli": frozenset({"persona", "text"}), "quality": frozenset({"persona", "text", "kind", "context"})}

LABELS = ("entailment", "neutral", "contradiction")
#: C.score per NLI label (Madotto et al., 2019)
LABEL_SCORE = {"entailment": 1, "neutral": 0, "contradiction": -1}
QUALITY = ("informativeness", "consistency", "humanness")
_ALIASES = {"info": "informativeness", "informativeness": "informativeness", "cons": "consistency",
            "consistency": "consistency", "hum": "humanness", "humanness": "humanness"}
#: the answer's shape, sent with the request: a provider that constrains output (the local
#: model's grammar, an endpoint's JSON mode) then cannot write anything else
QUALITY_SCHEMA = {"type": "object", "properties": {key: {"type": "integer", "enum": [1, 2, 3]} for key in QUALITY},
                  "required": list(QUALITY)}
#: the ``quality`` prompt's answer (unjudged, None, when none fits)
QUALITY_ANSWER = AnswerFormat("zhou.quality", schema=QUALITY_SCHEMA, default=None)
#: the persona attributes the paper evaluates against (§4.2)
EVALUATED_FIELDS = ("personality", "hobbies", "preferences for social media content")


def judge_prompts(override_file: str | None = None) -> dict[str, str]:
    return load_prompts(PROMPTS, "zhou_judges", override_file, required=REQUIRED)


def evaluation_persona(persona: Persona) -> str:
    """The persona as the judges see it: personality, hobbies and social-media content
    preferences (§4.2); a persona with none of the three is shown whole."""
    parts = [f"{key.capitalize()}: {persona.fields[key]}" for key in EVALUATED_FIELDS if persona.fields.get(key) not in (None, "", [])]
    return f"Name: {persona.name}. " + " ".join(parts) if parts else persona.text


def c_score(labels: Sequence[str | None]) -> float | None:
    """Mean of +1 / 0 / -1 over the judged labels (None: unjudged, left out); None if none."""
    scores = [LABEL_SCORE[label] for label in labels if label is not None]
    return sum(scores) / len(scores) if scores else None


class NLIJudge(Protocol):
    """Labels (premise, hypothesis) pairs with entailment / neutral / contradiction, or None
    when it could not decide."""

    name: str

    async def labels(self, pairs: Sequence[tuple[str, str]]) -> list[str | None]: ...


class LLMNLIJudge:
    """NLI through an LLM client (the run's, with its middleware)."""

    def __init__(self, llm: Any, prompts: dict[str, str], batch: int = 64):
        self.llm = llm
        self.prompts = prompts
        self.batch = batch
        self.name = f"LLM NLI judge ({getattr(llm, 'model', '?')})"
        self.failures = 0

    async def _one(self, premise: str, hypothesis: str) -> str | None:
        prompt = fill_prompt(self.prompts["nli"], persona=premise, text=hypothesis)
        label = await self.llm.choose(prompt, LABELS, purpose="zhou.nli", default="")
        if label not in LABEL_SCORE:
            self.failures += 1
            return None
        return label

    async def labels(self, pairs: Sequence[tuple[str, str]]) -> list[str | None]:
        out: list[str | None] = []
        for start in range(0, len(pairs), self.batch):
            out += await asyncio.gather(*(self._one(p, h) for p, h in pairs[start:start + self.batch]))
        return out


class TransformersNLIJudge:
    """NLI with a Hugging Face sequence-classification model (``transformers`` installed;
    the model must be available locally or downloadable). Its label names decide: one
    containing "entail", "neutral" or "contra"."""

    def __init__(self, model: str, batch: int = 16, pipeline: Any = None):
        if pipeline is None:
            try:
                from transformers import pipeline as make_pipeline
            except ImportError:
                raise UsageError(f"--nli transformers:{model} needs transformers: pip install transformers torch") from None
            pipeline = make_pipeline("text-classification", model=model)
        self.pipeline = pipeline
        self.batch = batch
        self.name = f"NLI model {model}"
        self.failures = 0

    @staticmethod
    def label_of(raw: str) -> str | None:
        raw = raw.lower()
        for key, label in (("entail", "entailment"), ("neutral", "neutral"), ("contra", "contradiction")):
            if key in raw:
                return label
        return None

    async def labels(self, pairs: Sequence[tuple[str, str]]) -> list[str | None]:
        inputs = [{"text": premise, "text_pair": hypothesis} for premise, hypothesis in pairs]
        found = await asyncio.to_thread(self.pipeline, inputs, batch_size=self.batch, truncation=True)
        out = [self.label_of(r["label"]) for r in found]
        self.failures += sum(1 for label in out if label is None)
        return out


# --------------------------------------------------------------------------- Info / Cons / Hum


class QualityParseError(ValueError):
    pass


def parse_quality(text: str) -> dict[str, int]:
    """The three 1-3 grades in a judge's answer: a JSON object (keys case-insensitive; "info",
    "cons", "hum" accepted; whole numbers, possibly as strings), else "name: n" lines. Raises
    :class:`QualityParseError` saying what is wrong."""
    found: dict[str, Any] = {}
    match = re.search(r"\{.*?\}", text or "", re.S)
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
        found = _named_grades(data)
    if len(found) < 3:
        for name, value in re.findall(r"\b(informativeness|consistency|humanness|info|cons|hum)\b\W{0,3}(\d+(?:\.\d+)?)", text or "", re.I):
            found.setdefault(_ALIASES[name.lower()], value)
    return _checked(found)


def grades_of(value: Any) -> dict[str, int]:
    """The three 1-3 grades of a parsed JSON answer (keys as :func:`parse_quality` takes them);
    raises :class:`QualityParseError` saying what is wrong."""
    return _checked(_named_grades(value))


def _named_grades(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        return {}
    return {_ALIASES[k.strip().lower()]: v for k, v in data.items() if isinstance(k, str) and k.strip().lower() in _ALIASES}


def _checked(found: dict[str, Any]) -> dict[str, int]:
    missing = [q for q in QUALITY if q not in found]
    if missing:
        raise QualityParseError(f"no {missing[0]} grade")
    grades = {}
    for key in QUALITY:
        try:
            value = float(found[key])
        except (TypeError, ValueError):
            raise QualityParseError(f"{key} is {found[key]!r}, not a number") from None
        if value != int(value) or not 1 <= value <= 3:
            raise QualityParseError(f"{key} is {found[key]!r}, not 1, 2 or 3")
        grades[key] = int(value)
    return grades


class QualityJudge:
    """Info / Cons / Hum through an LLM client, with one repair request."""

    def __init__(self, llm: Any, prompts: dict[str, str], batch: int = 32):
        self.llm = llm
        self.prompts = prompts
        self.batch = batch
        self.name = f"LLM judge ({getattr(llm, 'model', '?')})"
        self.failures = 0

    async def _one(self, kind: str, persona: str, text: str, context: str) -> dict[str, int] | None:
        prompt = fill_prompt(self.prompts["quality"], kind=kind, persona=persona, text=text,
                             context=f"\nIt replies to this post:\n{context}\n" if context else "")
        result = await self.llm.ask(prompt, QUALITY_ANSWER, validate=grades_of, max_tokens=60)
        if result.fallback:
            self.failures += 1
        return result.value

    async def grades(self, items: Sequence[tuple[str, str, str, str]]) -> list[dict[str, int] | None]:
        """One result per (kind, persona, text, context)."""
        out: list[dict[str, int] | None] = []
        for start in range(0, len(items), self.batch):
            out += await asyncio.gather(*(self._one(*item) for item in items[start:start + self.batch]))
        return out


def mean_grades(grades: Sequence[dict[str, int] | None]) -> dict[str, float | None]:
    """Per scale, the mean over the judged texts (None where nothing was judged)."""
    judged = [g for g in grades if g is not None]
    return {key: (sum(g[key] for g in judged) / len(judged) if judged else None) for key in QUALITY}
