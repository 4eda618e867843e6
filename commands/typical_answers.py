"""The estimate's stand-in for a model that acts: :class:`TypicalModel` answers every request as
the design that asks it declares a model typically does (:class:`townsquare.lib.answer_priors.AnswerPrior`,
``townsquare_register_answer_priors``), so ``townsquare estimate``'s dry run follows the calls an
acting model's answers lead to: the plans that make agents browse, the decisions that start a
conversation, the comments that are written.

It answers without chance (the same scenario, the same forecast):

* a decision with declared shares: each label at exactly its share of the purpose's decisions,
  in order (largest remainder: every decision adds each label's share to its account and the
  label with the largest account is given), the rest the label that takes no action;
* a decision without a prior: the label the prompt names (:func:`_named`: a place an activity
  names, else the place the agent is in), else the label that takes no action, else the first;
* an answer with openings (Zhou's comment: ``no comment`` or ``Comment content:``): the opening
  as a decision, and after one ending in ``:`` words of the prompt, as many as the completion
  expected;
* JSON: the prior's answer; else the schema's typical value (:func:`typical_value`: arrays as
  long as asked for, numbers mid-range, text of the expected length);
* free text: the prior's answer; else words of the prompt, as many as the completion expected
  (texts differ as the prompts do, so no run-health monitor mistakes them for a degenerate run).

:func:`estimate_scenario` plays a scenario on it: what ``townsquare estimate`` (three times, for
its range) and ``townsquare sweep --estimate`` price.

``disposition`` scales the declared shares of every decision that may take no action (their sum
capped at 1; a rating's shares are proportions and stay) and is handed to every prior's
``answer``: 1 is typical; the estimate's range plays 0.5 and 1.5.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from townsquare.llm import LLMRequest
from townsquare.lib.answer_priors import AnswerPrior

from .dry_run import StandInModel, prices_of, schema_example

#: the middleware plugins a dry run leaves out (no cache, no budget stop, no waits)
DRY_RUN_DISABLED = ("llm_cache", "llm_budget", "llm_retry", "llm_concurrency")

#: labels (and openings) that take no action, most specific first
NOTHING = ("no operation", "no comment", "do not follow", "do nothing", "nothing", "no", "skip", "leave", "none", "ignore",
           "wait", "false", "end")
_WORD = re.compile(r"[a-z0-9]+")


def nothing_label(labels: Iterable[str]) -> str | None:
    """The label among ``labels`` that takes no action, if any."""
    lowered = {label.strip().lower(): label for label in labels}
    return next((lowered[word] for word in NOTHING if word in lowered), None)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class TypicalModel(StandInModel):
    """Answers as the declared priors say and counts like :class:`StandInModel`."""

    model = "typical"

    def __init__(self, priors: Iterable[AnswerPrior] = (), disposition: float = 1.0, completion_tokens: dict[str, int] | None = None):
        super().__init__(completion_tokens)
        self.priors = {prior.purpose: prior for prior in priors}
        self.disposition = disposition
        self.accounts: dict[tuple[str, str], float] = defaultdict(float)
        #: purposes answered with a prior
        self.used: set[str] = set()

    def expected_completion(self, purpose: str, kind: str) -> int:
        """The user's ``--completion-tokens`` for the purpose, else its prior's length, else the kind's default."""
        if any(purpose == key or purpose.startswith(key + ".") for key in self.completion_tokens):
            return super().expected_completion(purpose, kind)
        prior = self.prior(purpose)
        if prior is not None and prior.completion_tokens is not None:
            return prior.completion_tokens
        return super().expected_completion(purpose, kind)

    def prior(self, purpose: str) -> AnswerPrior | None:
        """The prior for ``purpose``: its own, else the longest prefix that ends in ``.``; a
        repair asks as its purpose does."""
        purpose = purpose.removesuffix(".repair")
        if purpose in self.priors:
            return self.priors[purpose]
        prefixes = [key for key in self.priors if key.endswith(".") and purpose.startswith(key)]
        return self.priors[max(prefixes, key=len)] if prefixes else None

    def answer_text(self, request: LLMRequest, prompt: str, completion: int) -> str:
        prior = self.prior(request.purpose)
        if prior is not None:
            self.used.add(prior.purpose)
        options = request.labels or request.answer_prefixes
        if options:
            chosen = self.choose(request.purpose, list(options), prior, request.messages[-1].content if request.messages else prompt)
            if request.answer_prefixes and chosen.endswith(":"):
                return f"{chosen} {self.words(prompt, completion)}"
            return chosen
        if prior is not None and prior.answer is not None:
            value = prior.answer(prompt, self.disposition)
            return value if isinstance(value, str) else json.dumps(value)
        if request.json_schema is not None:
            return json.dumps(typical_value(request.json_schema, self.words(prompt, completion), _digest(prompt)))
        return self.words(prompt, completion)

    def choose(self, purpose: str, labels: list[str], prior: AnswerPrior | None, last: str) -> str:
        """A decision: with declared shares, each option at exactly its share over the purpose's
        decisions (largest remainder: every decision adds each option's share to its account,
        the option with the largest account is given and pays one); without, the label the
        prompt names, else the label that takes no action, else the first."""
        nothing = nothing_label(labels)
        acting = [label for label in labels if label != nothing]
        if prior is None or not prior.shares:
            return _named(acting, last) or nothing or labels[0]
        options = {key: share for key, share in prior.shares.items() if any(_matches(key, label) for label in acting)}
        if nothing is not None:  # a decision that may take no action: the disposition scales how often it acts
            options = {key: share * self.disposition for key, share in options.items()}
            total = sum(options.values())
            if total > 1.0:
                options = {key: share / total for key, share in options.items()}
            options[""] = 1.0 - sum(options.values())
        if not options:
            return nothing or labels[0]
        for key, share in options.items():
            self.accounts[(purpose, key)] += share
        key = max(options, key=lambda k: self.accounts[(purpose, k)])
        self.accounts[(purpose, key)] -= 1.0
        if key == "":
            return nothing  # type: ignore[return-value]
        matches = [label for label in acting if _matches(key, label)]
        return _named(matches, last) or matches[0]

    def words(self, prompt: str, completion: int) -> str:
        """``completion`` tokens' worth of text (about 4 characters a token): words of the
        prompt's end (where a request says what it is about) and words made from its digest, so
        two answers are as alike as their requests (a duplicate check does not reject a post
        because every dry-run post says the same)."""
        words = _words(prompt[-2000:]) or ["text"]
        digest = _digest(prompt)
        out, size = [], 0
        while size < completion * 4:
            i = len(out)
            word = words[(digest + 7 * i) % len(words)] if i % 2 else f"w{(digest >> (i % 48)) % 99991:x}"
            out.append(word)
            size += len(word) + 1
        return " ".join(out)


def _matches(key: str, label: str) -> bool:
    if key == "*":
        return True
    if key.endswith("*"):
        return label.lower().startswith(key[:-1].lower())
    return label.lower() == key.lower()


def _named(labels: list[str], text: str) -> str | None:
    """The label the request's text names last: reading its lines from the end, the first line
    that names some labels but not all of them (a listing of the options names all) gives the
    one it names last (None: no line names one). So a place an activity names wins over the
    place the agent is in, which wins over the list of places."""
    if not labels:
        return None
    patterns = [(label, re.compile(r"(?<!\w)" + re.escape(label.lower()) + r"(?!\w)")) for label in labels]
    for line in reversed(text.lower().splitlines()):
        found = [(match.start(), label) for label, pattern in patterns for match in pattern.finditer(line)]
        named = {label for _, label in found}
        if named and (len(named) < len(labels) or len(labels) == 1):
            return max(found)[1]
    return None


def typical_value(schema: dict[str, Any], text: str, salt: int = 0) -> Any:
    """A typical value of ``schema``: objects with every property, arrays of ``maxItems`` items
    (as many as asked for; 3 when unbounded, at least ``minItems``), numbers half way
    between ``minimum`` and ``maximum``, an ``enum`` member picked by ``salt``, strings cut from
    ``text`` (within ``minLength``/``maxLength``); where a string has a ``pattern``, the simplest
    value (:func:`townsquare.commands.dry_run.schema_example`), which a design's prior replaces."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][salt % len(schema["enum"])]
    for key in ("oneOf", "anyOf"):
        if schema.get(key):
            return typical_value(schema[key][0], text, salt)
    kind = schema.get("type", "object")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        props = schema.get("properties", {})
        strings = max(1, sum(1 for sub in props.values() if sub.get("type") == "string"))
        share = text.split()[: max(1, len(text.split()) // strings)]
        return {name: typical_value(sub, " ".join(share), salt + i) for i, (name, sub) in enumerate(props.items())}
    if kind == "array":
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        count = int(high) if high is not None else max(low, 3)  # as many as asked for
        words = text.split() or ["text"]
        return [typical_value(schema.get("items", {"type": "string"}), " ".join(words[3 * i % len(words):] + words[:3 * i % len(words)]), salt + i)
                for i in range(count)]  # each item its own text, as a list of topics differs
    if kind == "string":
        if "pattern" in schema:
            return schema_example(schema)
        low, high = int(schema.get("minLength", 1)), int(schema.get("maxLength", 10_000))
        value = (text or "text")[:high]
        return value if len(value) >= low else value.ljust(low, "x")
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        high = schema.get("maximum", low + 10)
        middle = (low + high) / 2
        return int(round(middle)) if kind == "integer" else float(middle)
    return {"boolean": True}.get(kind)


def answer_priors(plugins: Any) -> list[AnswerPrior]:
    """Every plugin's declared :class:`~townsquare.lib.answer_priors.AnswerPrior` (a plugin whose hook fails is skipped)."""
    return [prior for found in plugins.call_each("townsquare_register_answer_priors") for prior in found or ()]


@dataclass
class ScenarioEstimate:
    """What a scenario's dry run asked (``model.rows``: purpose -> calls, prompt and completion
    tokens), the scenario as resolved, and what ``read`` took from its event store."""

    model: StandInModel
    scenario: Any
    read: Any = None

    def totals(self) -> tuple[int, int, int]:
        """(calls, prompt tokens, completion tokens) over every purpose."""
        rows = list(self.model.rows.values())
        return sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows)

    def prices(self) -> tuple[float, float] | None:
        llm = self.scenario.llm
        return prices_of(llm.config) if llm is not None else None


def estimate_scenario(scenario: str | Path, *, overrides: Sequence[str] = (), seed: int | None = None, plugin_options: Sequence[str] = (),
                      completion_tokens: dict[str, int] | None = None, read: Callable[[Path], Any] | None = None,
                      disposition: float = 1.0, plugins: Any = None) -> ScenarioEstimate:
    """Play ``scenario`` (with ``overrides`` and ``seed``) on a :class:`TypicalModel` at
    ``disposition``, with the designs' priors and without the LLM middleware, in a scratch
    folder; ``read(events_path)`` is called on its event store before the folder goes.
    ``plugins``: a plugin set made already (else one from ``plugin_options``, less the middleware)."""
    from townsquare.plugin_manager import make_plugin_manager, parse_plugin_options
    from townsquare.launch.runner import start_run

    if plugins is None:
        enable, disable = parse_plugin_options(plugin_options)
        plugins = make_plugin_manager(enable=enable, disable=[*disable, *DRY_RUN_DISABLED])
    model = TypicalModel(answer_priors(plugins), disposition, completion_tokens)
    resolved: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="townsquare-estimate-") as tmp:
        run, _ = start_run(scenario, overrides=list(overrides), seed=seed, out=Path(tmp) / "dry-run", plugins=plugins,
                           on_ready=lambda s, _: resolved.update(scenario=s), llm_provider=model)
        found = read(run.events_path) if read is not None else None
    return ScenarioEstimate(model, resolved["scenario"], found)
