"""Placing a package in one of the eight domains when its category is not a domain slug.

Published packages write free-form categories ("scientific-computing", "energy",
"Security & CTF", "financial modeling"). The rule, stated once here and applied to
task.md and task.toml alike:

1. A category that is a domain slug (any case, spaces or underscores for hyphens) is
   that domain, confidence 1.0.
2. Otherwise the category's words, the tags' words and the prompt's words are looked up
   in `KEYWORDS` (one table: word -> domain). Each distinct word of each source votes
   for its domain once, with the weight of where it was found: category 3, tag 1,
   prompt 0.25 (a prompt mentions many things in passing; a category is the author's
   statement of what the task is about).
3. The domain with the most weight wins when it holds at least `MIN_WEIGHT` (one tag or
   the category, never the prompt alone by a word or two) and more than any other domain.
   Its confidence is its share of all the weight cast, scaled by where the signal came
   from (category 0.9, tags only 0.8, prompt only 0.5; only a slug is 1.0), rounded to
   two places.
4. Anything else is `Domain.UNKNOWN`, with a warning naming the category: an unmapped
   task is never filed under software-engineering by default.

Only a few words count, and each for one domain; a word that names several fields
("data", "analysis", "engineering", "research") is in no list, so it never decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from posttrain_arena.task_format.domains import SLUGS, Domain

CATEGORY_WEIGHT = 3.0
TAG_WEIGHT = 1.0
PROMPT_WEIGHT = 0.25
MIN_WEIGHT = 1.0
_SOURCE_SCALE = {"category": 0.9, "tags": 0.8, "prompt": 0.5}
SLUG_RULE = "the category is a domain slug"
_PROMPT_CHARS = 4000  # the prompt's opening says what it is about; keeps checks fast

_WORDS: dict[Domain, str] = {
    Domain.SOFTWARE_ENGINEERING: """software programming code coding debugging debug bugfix
        compilation compile compiler build refactoring refactor devops sysadmin
        system-administration administration linux kernel git api backend frontend web
        database sql querying parallelization concurrency legacy translation migration
        testing file-operations file-management filesystem shell bash flink erlang rust
        golang javascript typescript java python c++ cython docker kubernetes networking
        server performance machine-learning model-training ml-implementation ml pytorch
        torch tensorflow nlp llm inference deployment packaging algorithms algorithm regex
        parsing parser string-parsing""",
    Domain.CYBERSECURITY: """security cybersecurity cyber crypto cryptography cryptanalysis
        ctf exploit exploitation vulnerability vulnerabilities malware forensics intrusion
        pentest penetration reverse-engineering suricata firewall phishing cve password
        hashcat encryption decryption privilege sandbox-escape""",
    Domain.FINANCE_ECONOMICS: """finance financial economics economic econometrics
        accounting trading portfolio tax taxes banking bank investment investing stock
        stocks market markets gdp inflation valuation loan credit budget budgeting
        audit actuarial insurance""",
    Domain.OFFICE_WHITE_COLLAR: """office spreadsheet spreadsheets excel xlsx docx pptx
        powerpoint word-processing document documents document-processing
        document-generation document-editing email calendar scheduling travel
        travel-planning personal-assistant assistant enterprise-search crm invoice invoices
        hr legal contract contracts paperwork memo report-writing latex-extraction
        tool-use""",
    Domain.MEDIA_CONTENT_PRODUCTION: """media video videos audio speech music sound podcast
        subtitle subtitles dubbing image images photo photos graphics 3d-graphics
        rendering animation multimodal media-processing video-processing audio-processing
        image-processing video-analysis audio-visual speech-synthesis tts visualization
        design typography content""",
    Domain.NATURAL_SCIENCE: """science scientific scientific-computing biology
        bioinformatics genomics protein chemistry chemical physics astronomy astrophysics
        seismology geophysics geology climate weather ecology environmental
        environmental-modeling materials materials-science quantum quantum-simulation
        molecular neuroscience medicine medical healthcare epidemiology hydrology""",
    Domain.MATHEMATICS_FORMAL_REASONING: """mathematics math maths formal formal-method
        formal-methods formal-reasoning proof proofs theorem lean coq isabelle logic
        combinatorics algebra geometry calculus statistics probability optimization
        puzzle puzzles sat smt number-theory""",
    Domain.INDUSTRIAL_PHYSICAL_SYSTEMS: """industrial manufacturing factory energy power grid
        control control-systems plc scada robotics robot hardware embedded fpga circuit
        sensor sensors mechanical hvac automotive aerospace logistics supply-chain traffic
        pedestrian vehicle railway maintenance mpc""",
}

#: Compound words whose parts would mislead ("data-science" is not natural science).
NEUTRAL = frozenset({"data-science", "computer-science", "data-engineering"})
#: word -> domain: the one table every mapping reads (built from `_WORDS`).
KEYWORDS: dict[str, Domain] = {w: d for d, text in _WORDS.items() for w in text.split()}
_TOKEN = re.compile(r"[a-z0-9+]+(?:-[a-z0-9+]+)*")


@dataclass(frozen=True)
class DomainMapping:
    """Where a package was placed, how sure the rule is, and why (for the warning)."""

    domain: Domain
    confidence: float
    rule: str


def _slug(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.strip().lower())


def _votes(text: str) -> list[tuple[str, Domain]]:
    """(word, domain) for each distinct keyword in `text`: whole hyphenated words first
    (so "scientific-computing" counts once), then their parts."""
    out: list[tuple[str, Domain]] = []
    for token in dict.fromkeys(_TOKEN.findall(text.lower())):  # in order, once each
        if token in NEUTRAL:
            continue
        if token in KEYWORDS:
            out.append((token, KEYWORDS[token]))
            continue
        out.extend((part, KEYWORDS[part]) for part in token.split("-") if part in KEYWORDS)
    return out


def map_domain(category: object, tags: list[str] | None = None,
               prompt: str = "") -> DomainMapping:
    """The domain the rule in this module's docstring gives a package."""
    text = "" if category is None else str(category)
    if _slug(text) in SLUGS:
        return DomainMapping(Domain(_slug(text)), 1.0, SLUG_RULE)
    weights: dict[Domain, float] = {}
    hits: dict[tuple[Domain, str], list[str]] = {}  # (domain, source) -> its words
    inputs = [("category", text, CATEGORY_WEIGHT)]
    inputs += [("tags", str(tag), TAG_WEIGHT) for tag in tags or []]
    inputs.append(("prompt", prompt[:_PROMPT_CHARS], PROMPT_WEIGHT))
    for source, words, weight in inputs:
        for word, domain in _votes(words):
            weights[domain] = weights.get(domain, 0.0) + weight
            if word not in hits.setdefault((domain, source), []):
                hits[(domain, source)].append(word)
    ranked = sorted(weights.items(), key=lambda kv: -kv[1])
    if not ranked or ranked[0][1] < MIN_WEIGHT or (len(ranked) > 1
                                                   and ranked[1][1] == ranked[0][1]):
        shown = repr(text) if text else "no category"
        why = "no word of it is in the table" if not ranked else \
            "its words point to several domains equally" if len(ranked) > 1 \
            and ranked[1][1] == ranked[0][1] else "too few words point to one domain"
        return DomainMapping(Domain.UNKNOWN, 0.0, f"{shown}: {why}")
    domain, best = ranked[0]
    strongest = next(s for s in ("category", "tags", "prompt") if (domain, s) in hits)
    confidence = round(best / sum(weights.values()) * _SOURCE_SCALE[strongest], 2)
    words = ", ".join(repr(w) for w in hits[(domain, strongest)][:4])
    return DomainMapping(domain, confidence, f"the {strongest}: word(s) {words}")


def category_notes(meta: dict[str, object], prompt: str) -> tuple[dict[str, object],
                                                                  str | None]:
    """`meta` (a task's metadata table) with `category` set to a domain slug by the rule,
    the written category kept as `legacy_category` and the confidence as
    `category_confidence` (when the author gave none); and the warning to show, or None
    when the category already was a slug."""
    category = meta.get("category")
    raw_tags = meta.get("tags")
    tags = [raw_tags] if isinstance(raw_tags, str) else \
        [str(t) for t in raw_tags] if isinstance(raw_tags, list) else []
    mapping = map_domain(category, tags, prompt)
    if mapping.rule == SLUG_RULE:
        return meta, None
    out = dict(meta)
    out["category"] = mapping.domain.value
    if category is not None:
        out.setdefault("legacy_category", category)
    out.setdefault("category_confidence", mapping.confidence)
    shown = repr(category) if category is not None else "no category"
    if mapping.domain is Domain.UNKNOWN:
        return out, (f"{mapping.rule}; the task's domain is unknown (held to the 20% "
                     f"suite cap as its own group). Set category to a domain slug "
                     f"({', '.join(SLUGS)})")
    return out, (f"{shown} is not a domain slug; mapped to {mapping.domain.value} "
                 f"(confidence {mapping.confidence:g}, by {mapping.rule}). Set category "
                 "to a domain slug to state it")
