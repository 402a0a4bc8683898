"""``cep explain FILE...``: print each pattern's compiled query and its plan.

Users need to see why a pattern is fast or slow: which comparisons are joins in the
tree and how each edge is indexed (``cep.plan.model.enumeration_index`` and
``sibling_index``), which ones are residual filters, the query class with its
bounds, and the partition key; then the physical plan the runtime executes
(``cep.plan.physical``: merged nodes, shared index storage), and with
``--generated`` the source of every function generated for the patterns
(``cep.codegen``), the code a traceback points into.
Formats: ``text`` (default), ``json`` (stable schema, docs/explain.md) and ``dot``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from cep.errors import PatternError
from cep.exit_codes import EXIT_OK, EXIT_OTHER, EXIT_PATTERN
from cep.lang.gcq import Bound, CompiledPattern
from cep.plan.classify import QueryClass, classify_plan
from cep.plan.gaps import aggregate_structure, gap_window_text, plan_decision
from cep.plan.model import IndexSpec, Plan, enumeration_index, sibling_index
from cep.plan.physical import IndexUse, PhysicalPlan, physical_plan

SCHEMA_VERSION = 1
FORMATS = ("text", "json", "dot")


def run_explain(paths: Sequence[str], fmt: str = "text", out: TextIO | None = None, err: TextIO | None = None,
                generated: bool = False) -> int:
    """Explain every pattern of the files; ``EXIT_OK``, ``EXIT_PATTERN`` on a pattern error, and
    ``EXIT_OTHER`` on a usage error or an unreadable file (as every command: 2 means "fix the pattern").

    ``generated``: also print the generated functions (text and json formats)."""
    import sys

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if fmt not in FORMATS:
        err.write(f"cep explain: unknown format {fmt!r} (choose from {', '.join(FORMATS)})\n")
        return EXIT_OTHER
    if generated and fmt == "dot":
        err.write("cep explain: --generated prints text or json, not dot\n")
        return EXIT_OTHER
    from cep import codegen
    from cep.lang.compiler import compile_files
    from cep.plan.planner import plan_pattern

    since = codegen.mark()
    try:
        patterns = compile_files(list(paths))
    except PatternError as e:
        err.write(str(e) + "\n")
        return EXIT_PATTERN
    except OSError as e:
        err.write(f"cep explain: {e}\n")
        return EXIT_OTHER
    plans = [plan_pattern(cp) for cp in patterns]
    sources: list[tuple[str, str]] = []
    if generated:
        from cep.runtime.engine import Engine

        Engine(patterns)  # builds every runtime, key function and match builder
        sources = codegen.defined_since(since)
    if fmt == "json":
        doc: dict[str, Any] = {"version": SCHEMA_VERSION, "patterns": [plan_to_dict(p) for p in plans]}
        if generated:
            doc["generated"] = [{"name": name, "source": src} for name, src in sources]
        out.write(json.dumps(doc, indent=2) + "\n")
    elif fmt == "dot":
        out.write(plans_to_dot(plans))
    else:
        out.write("\n".join(plan_to_text(p) for p in plans))
        if generated:
            out.write("\n" + generated_to_text(sources))
    return EXIT_OK


def generated_to_text(sources: Sequence[tuple[str, str]]) -> str:
    """Each generated function under its name (the file name a traceback shows)."""
    lines = [f"generated functions ({len(sources)}):"]
    for name, src in sources:
        lines.append("")
        lines.append(f"# {name}")
        lines.extend(src.rstrip("\n").split("\n"))
    return "\n".join(lines) + "\n"


# -- shared pieces


def bound_text(b: Bound) -> str:
    """``sort_var op scale*other + offset`` as readable text."""
    rhs = b.other if b.scale == 1 else f"{b.scale}*{b.other}"
    if b.offset:
        rhs += f" + {b.offset}" if b.offset > 0 else f" - {-b.offset}"
    return f"{b.sort_var} {b.op} {rhs}"


def index_dict(ix: IndexSpec | None) -> dict[str, Any] | None:
    if ix is None:
        return None
    return {
        "kind": ix.kind,
        "key_vars": list(ix.key_vars),
        "sort_var": ix.sort_var,
        "bounds": [bound_text(b) for b in ix.bounds],
        "filter_predicates": list(ix.filter_preds),
    }


def index_use_dict(use: IndexUse | None) -> dict[str, Any] | None:
    if use is None:
        return None
    d = index_dict(use.spec)
    assert d is not None
    d["storage"] = use.storage
    d["shares"] = None if use.shares is None else {"node": use.shares[0], "index": use.shares[1]}
    d["equal_rest"] = list(use.equal_rest)
    return d


def index_use_text(use: IndexUse) -> str:
    text = index_text(use.spec)
    if use.equal_rest:
        text += ", then equal " + ",".join(use.equal_rest)
    if use.shares is not None:
        text += f"  (shares storage with n{use.shares[0]} {use.shares[1]}: stored once, updated there)"
    elif use.storage != "own":
        text += f"  (reads {use.storage}'s storage)"
    return text


def index_text(ix: IndexSpec) -> str:
    parts = [ix.kind]
    if ix.key_vars:
        parts.append("key " + ",".join(ix.key_vars))
    if ix.sort_var is not None:
        parts.append("sorted on " + ix.sort_var)
    if ix.bounds:
        parts.append("range " + " and ".join(bound_text(b) for b in ix.bounds))
    if ix.filter_preds:
        parts.append("filter " + " ".join(f"#{p}" for p in ix.filter_preds))
    return ", ".join(parts)


def _indexes(plan: Plan, nid: int) -> tuple[IndexSpec | None, IndexSpec | None]:
    n = plan.nodes[nid]
    if n.parent is None:
        return None, None
    p_ix = enumeration_index(plan, nid) if n.in_connex else None
    return p_ix, sibling_index(plan, nid)


def _class(plan: Plan) -> QueryClass:
    return classify_plan(plan)


def _edge_of(plan: Plan) -> dict[int, int]:
    return {pid: n.id for n in plan.nodes for pid in n.preds}


def _file(cp: CompiledPattern) -> str | None:
    src = cp.source
    return src.file if src is not None else None


def _atom_label(cp: CompiledPattern, i: int) -> str:
    a = cp.atoms[i]
    return f"{a.type} {a.alias}"


# -- JSON


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The documented, stable JSON form of one pattern's plan (docs/explain.md)."""
    cp = plan.pattern
    qc = _class(plan)
    edge = _edge_of(plan)
    residual = set(plan.residual)
    nodes = []
    for n in plan.nodes:
        p_ix, s_ix = _indexes(plan, n.id)
        nodes.append(
            {
                "id": n.id,
                "vars": list(n.vars),
                "atom": cp.atoms[n.atom].alias if n.atom is not None else None,
                "parent": n.parent,
                "children": list(n.children),
                "guard": n.children[0] if n.children else None,
                "in_connex": n.in_connex,
                "edge_predicates": list(n.preds),
                "enumeration_index": index_dict(p_ix),
                "sibling_index": index_dict(s_ix),
            }
        )
    return {
        "name": cp.name,
        "file": _file(cp),
        "op": cp.op,
        "within": cp.within,
        "time_unit": cp.time_unit,
        "atoms": [
            {
                "alias": a.alias,
                "type": a.type,
                "position": a.position,
                "vars": list(a.vars),
                "attrs": list(a.attrs),
                "filter": a.filter_text or None,
            }
            for a in cp.atoms
        ],
        "predicates": [
            {
                "id": p.id,
                "text": p.text,
                "origin": p.origin,
                "vars": list(p.vars),
                "placement": "residual" if p.id in residual else "edge",
                "edge": None if p.id in residual else edge.get(p.id),
            }
            for p in cp.predicates
        ],
        "tree": {"root": plan.root, "nodes": nodes},
        "residual": list(plan.residual),
        "query_class": {
            "name": qc.name,
            "update": qc.update,
            "delay": qc.delay,
            "detail": qc.detail,
            "max_predicates_per_node": qc.max_preds_per_node,
        },
        "partition_key": list(cp.partition_vars),
        "notes": list(plan.notes),
        "physical": physical_to_dict(physical_plan(plan)),
        "strategy": cp.strategy,
        "gaps": gaps_to_dicts(physical_plan(plan)),
        "decision": decision_to_dict(physical_plan(plan)),
    }


def physical_to_dict(pp: PhysicalPlan) -> dict[str, Any]:
    """The physical plan (``cep.plan.physical``) as JSON: the tree and indexes that run."""
    cp = pp.pattern
    return {
        "root": pp.root,
        "merged": [list(vs) for vs in pp.merged],
        "nodes": [
            {
                "id": n.id,
                "vars": list(n.vars),
                "atom": cp.atoms[n.atom].alias if n.atom is not None else None,
                "parent": n.parent,
                "children": list(n.children),
                "edge_predicates": list(n.preds),
                "keeps_gmr": n.keeps_gmr,
                "gated_by": n.gated_by,
                "stores": list(n.stores),
                "enumeration_index": index_use_dict(n.P),
                "sibling_index": index_use_dict(n.S),
            }
            for n in pp.nodes
        ],
    }


def gaps_to_dicts(pp: PhysicalPlan) -> list[dict[str, Any]]:
    """Each gap element's anti-join: its index and check, as the physical plan has them."""
    cp = pp.pattern
    specs, plans = pp.gap_indexes, pp.gaps
    aliases = [a.alias for a in cp.atoms]
    within = f"{cp.within}" if cp.within is not None else "w"  # (only a middle gap lacks WITHIN)
    return [
        {
            "element": pl.gap.text,
            "origin": pl.gap.origin,
            "kind": pl.gap.kind,
            "range": gap_window_text(pl.gap, cp, within),
            "index": {"id": pl.index, "types": list(specs[pl.index].types),
                      "key": list(specs[pl.index].key_attrs), "sorted_by": "ts",
                      "filter": specs[pl.index].filter_text or None},
            "key_from": [f"{aliases[i]}.{a}" for i, a in pl.gap.key_sources],
            "check": pl.check,
            "residual": pl.gap.residual_text or None,
            "cost": pl.cost,
            **(_repetition(cp, pl) if pl.gap.origin == "kleene" else {}),
        }
        for pl in plans
    ]


def _repetition(cp: CompiledPattern, pl: Any) -> dict[str, Any]:
    """A Kleene element (docs/language.md section 7, Repetition): its count bounds and which structure serves each aggregate."""
    g = pl.gap
    return {
        "count": {"min": g.min_count, "max": g.max_count},
        "aggregates": [{"aggregate": cp.aggregates[j].text if cp.aggregates[j].fn != "events"
                        else f"{g.alias} (the event list, no EMIT)",
                        "served_by": aggregate_structure(cp.aggregates[j].fn, cp.aggregates[j].attr, pl.check)}
                       for j in g.aggregates],
        "match_condition": cp.agg_condition_text or None,
    }


def decision_to_dict(pp: PhysicalPlan) -> dict[str, Any] | None:
    """When a match is decided and which of its events decides it (``cep.plan.gaps.Decision``);
    None for a pattern without gap elements (its matches are emitted at once)."""
    cp = pp.pattern
    if not cp.gaps:
        return None
    d = plan_decision(cp, list(pp.gaps))
    aliases = [a.alias for a in cp.atoms]
    return {
        "time": d.time_text(aliases, f"{cp.within}"),
        "when": "the watermark is past it" if d.trailing else "the watermark reaches it",
        "deciding_atoms": [aliases[i] for i in d.deciders],
        "candidates": [[aliases[i] for i in g] for g in d.candidates],
    }


def gaps_to_text(pp: PhysicalPlan) -> list[str]:
    cp = pp.pattern
    if not cp.gaps:
        return []
    lines = [f"  gaps (anti-joins and repetitions; a match is emitted once decided, strategy {cp.strategy}):"]
    for g in gaps_to_dicts(pp):
        ix = g["index"]
        key = ", ".join(f"{k} = {src}" for k, src in zip(ix["key"], g["key_from"], strict=True)) or "none"
        lines.append(f"    {g['element']}  [{g['kind']}]  ts in {g['range']}")
        lines.append(f"      index g{ix['id']}: {' | '.join(ix['types'])} events"
                     + (f" passing {ix['filter']}" if ix["filter"] else "")
                     + f", per key ({key}), sorted by ts")
        if g["check"] == "count":
            lines.append(f"      check: range count (is there one in the range?)  cost {g['cost']}")
        elif g["check"] == "aggregate":
            lines[-1] = lines[-1].replace("sorted by ts", "sorted by ts, in a range-aggregate index "
                                          "(blocks with count/exact sums/min/max, segment tree over blocks)")
        else:
            lines.append(f"      check: range scan of the key's candidates for {g['residual']}  cost {g['cost']}")
        if "aggregates" in g:
            hi = g["count"]["max"]
            bounds = f"{g['count']['min']} <= count" + (f" <= {hi}" if hi is not None else "")
            if g["check"] == "aggregate":
                lines.append(f"      check: range aggregates, {bounds}  cost {g['cost']}")
            else:
                lines.append(f"      (the residual condition selects events per match: the list and its "
                             f"aggregates come from the scan; {bounds})")
            for a in g["aggregates"]:
                lines.append(f"        {a['aggregate']}: {a['served_by']}")
            if g["match_condition"]:
                lines.append(f"      condition on the match: {g['match_condition']}")
    d = decision_to_dict(pp)
    assert d is not None
    deciders = d["deciding_atoms"]
    by = deciders[0] if len(deciders) == 1 else f"one of {', '.join(deciders)} (the event that gives the time)"
    lines.append(f"    decided at {d['time']}, once {d['when']}; deciding event: {by}")
    lines.append(f"      (undecided matches are kept per deciding event: one entry per {' or '.join(deciders)} "
                 "event, whatever the number of matches)")
    return lines


# -- text


def plan_to_text(plan: Plan) -> str:
    cp = plan.pattern
    qc = _class(plan)
    edge = _edge_of(plan)
    residual = set(plan.residual)
    lines = [f"pattern {cp.name} ({cp.op}" + (f", {_file(cp)}" if _file(cp) else "") + ")"]
    if cp.within is not None:
        lines.append(f"  within: {cp.within} ({cp.time_unit})")
    lines.append("  atoms:")
    for a in cp.atoms:
        s = f"    {a.alias}: {a.type}({', '.join(a.vars)})"
        if a.filter_text:
            s += f"  filter: {a.filter_text}"
        lines.append(s)
    lines.append("  predicates:")
    if not cp.predicates:
        lines.append("    (none)")
    for p in cp.predicates:
        where = "residual" if p.id in residual else f"edge into n{edge[p.id]}"
        lines.append(f"    #{p.id} {p.text}  [{p.origin}]  -> {where}")
    lines.append("  tree (n* = in N; children[0] is the guard):")
    _tree_lines(plan, plan.root, "", "", lines)
    lines.append("  residual filters: " + (", ".join(f"#{p} {cp.predicates[p].text}" for p in plan.residual) or "none"))
    lines.append(f"  class: {qc.name} ({qc.detail})")
    lines.append(f"    update: {qc.update}; delay: {qc.delay}")
    if cp.partition_vars:
        by = cp.source.partition_by if cp.source is not None else ()
        suffix = f"  (PARTITION BY {', '.join(by)})" if by else ""
        lines.append("  partition key: " + ", ".join(cp.partition_vars) + suffix)
    else:
        lines.append("  partition key: none: runs as one group")
    lines.extend(gaps_to_text(physical_plan(plan)))
    for note in plan.notes:
        lines.append(f"  note: {note}")
    pp = physical_plan(plan)
    merged = "; ".join("{" + ", ".join(vs) + "}" for vs in pp.merged) or "none"
    lines.append("  physical plan (what runs; pass-through nodes merged: " + merged + "):")
    _physical_lines(pp, pp.root, "", "", lines)
    return "\n".join(lines) + "\n"


def _physical_lines(pp: PhysicalPlan, nid: int, head: str, tail: str, lines: list[str]) -> None:
    cp = pp.pattern
    n = pp.nodes[nid]
    label = f"n{nid} {{{', '.join(n.vars)}}}"
    if n.atom is not None:
        label += f" leaf {_atom_label(cp, n.atom)}"
    if n.preds:
        label += "  edge: " + " AND ".join(f"#{p}" for p in n.preds)
    if n.keeps_gmr:
        label += "  (GMR kept)"
    if n.gated_by is not None:
        label += f"  (groups kept only for keys n{n.gated_by} holds)"
    lines.append("    " + head + label)
    for which, use in (("P", n.P), ("S", n.S)):
        if use is not None:
            stored = "stored " if which in n.stores else ""
            lines.append("    " + tail + f"    {which}: {stored}{index_use_text(use)}")
    kids = n.children
    for i, c in enumerate(kids):
        last = i == len(kids) - 1
        _physical_lines(pp, c, tail + ("`-- " if last else "|-- "), tail + ("    " if last else "|   "), lines)


def _tree_lines(plan: Plan, nid: int, head: str, tail: str, lines: list[str]) -> None:
    cp = plan.pattern
    n = plan.nodes[nid]
    star = "*" if n.in_connex else ""
    label = f"n{nid}{star} {{{', '.join(n.vars)}}}"
    if n.atom is not None:
        label += f" leaf {_atom_label(cp, n.atom)}"
    if n.preds:
        label += "  edge: " + " AND ".join(f"#{p} {cp.predicates[p].text}" for p in n.preds)
    lines.append("    " + head + label)
    p_ix, s_ix = _indexes(plan, nid)
    if p_ix is not None:
        lines.append("    " + tail + "    P: " + index_text(p_ix))
    if s_ix is not None:
        lines.append("    " + tail + "    S: " + index_text(s_ix))
    kids = n.children
    for i, c in enumerate(kids):
        last = i == len(kids) - 1
        _tree_lines(plan, c, tail + ("`-- " if last else "|-- "), tail + ("    " if last else "|   "), lines)


# -- DOT


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def plans_to_dot(plans: Sequence[Plan]) -> str:
    """One ``digraph`` with a cluster per pattern; dashed nodes are outside N."""
    out = ["digraph cep_plans {", "  node [fontname=\"monospace\"];"]
    for k, plan in enumerate(plans):
        cp = plan.pattern
        out.append(f"  subgraph cluster_{k} {{")
        out.append(f'    label="{_esc(cp.name)} ({_esc(_class(plan).name)})";')
        for n in plan.nodes:
            label = "{" + ", ".join(n.vars) + "}"
            shape = "ellipse"
            if n.atom is not None:
                label = _atom_label(cp, n.atom) + "\\n" + _esc(label)
                shape = "box"
            else:
                label = _esc(label)
            style = "" if n.in_connex else ", style=dashed"
            out.append(f'    p{k}n{n.id} [label="{label}", shape={shape}{style}];')
        for n in plan.nodes:
            if n.parent is None:
                continue
            parts = [cp.predicates[p].text for p in n.preds]
            p_ix, s_ix = _indexes(plan, n.id)
            if p_ix is not None:
                parts.append("P: " + p_ix.kind)
            if s_ix is not None:
                parts.append("S: " + s_ix.kind)
            guard = plan.nodes[n.parent].children[0] == n.id
            style = ", penwidth=2" if guard else ""
            label = "\\n".join(_esc(x) for x in parts)
            out.append(f'    p{k}n{n.parent} -> p{k}n{n.id} [label="{label}"{style}];')
        if plan.residual:
            res = "\\n".join(_esc(cp.predicates[p].text) for p in plan.residual)
            out.append(f'    p{k}residual [label="residual:\\n{res}", shape=note];')
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"
