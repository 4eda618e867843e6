"""Zhou et al.'s evaluation (:class:`.zhou_metrics.ZhouResult`) as plain-text tables for the terminal."""

from __future__ import annotations

from typing import Any


def _f(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def format_result(result: Any) -> str:
    b = result.backends
    lines = [f"regular agents: populations {', '.join(result.regular)}; stages: "
             + "; ".join(f"{s.name} rounds {s.start}-{'end' if s.end is None else s.end - 1}" for s in result.stages),
             f"BS: {b['similarity']}", f"C.score: {b['nli'] or 'not computed'}",
             f"Info / Cons / Hum: {b['judge'] or 'not computed'}", f"distinct-n: {b['distinct']}", ""]
    lines += [f"WARNING: {n}" for n in result.notes if n.startswith("CIRCULAR:")]
    head = f"{'stage':<10} {'action':<8} {'BS acted':>9} {'BS not':>8} {'ΔBS':>8} {'C acted':>8} {'C not':>7} {'ΔC':>7} {'pairs':>11}"
    lines += [head, "-" * len(head)]
    for r in result.actions:
        pairs = f"{r.pairs_acted}/{r.pairs_not}" if r.action != "post" else str(r.pairs_acted)
        lines.append(f"{r.stage:<10} {r.action:<8} {_f(r.bs_acted):>9} {_f(r.bs_not):>8} {_f(r.delta_bs, signed=True):>8} "
                     f"{_f(r.c_acted):>8} {_f(r.c_not):>7} {_f(r.delta_c, signed=True):>7} {pairs:>11}")
    lines.append("")
    head = f"{'stage':<10} {'text':<8} {'count':>6} {'Dis-1 %':>8} {'Dis-2 %':>8} {'Info':>6} {'Cons':>6} {'Hum':>6} {'graded':>7}"
    lines += [head, "-" * len(head)]
    for t in result.texts:
        lines.append(f"{t.stage:<10} {t.kind:<8} {t.count:>6} {_f(t.distinct_1, 2):>8} {_f(t.distinct_2, 2):>8} "
                     f"{_f(t.informativeness, 2):>6} {_f(t.consistency, 2):>6} {_f(t.humanness, 2):>6} {t.judged:>7}")
    k = result.knowledge
    lines.append("")
    rate = "no knowledge retrieved" if k["rate"] is None else f"{k['rate']:.3f} ({k['adopted']} of {k['retrieved']} items)"
    lines.append(f"knowledge adoption ({', '.join(k['components']) or 'no persona.knowledge component'}): {rate}")
    for stage, s in k["stages"].items():
        if s["posts"]:
            lines.append(f"  {stage}: {s['with_knowledge']} of {s['posts']} posts written with adopted knowledge")
    f = result.followers
    lines.append(f"followers of the {f['agents']} regular agents (fig. 6): {f['with_none']} with none, max {f['max']}, "
                 f"mean {f['mean']:.2f}, Gini {f['gini']:.3f}")
    lines += [f"note: {n}" for n in result.notes if not n.startswith("CIRCULAR:")]
    return "\n".join(lines)
