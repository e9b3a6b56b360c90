"""The eight task domains: one vocabulary for checks, suite composition and web pages."""

from __future__ import annotations

from enum import StrEnum


class Domain(StrEnum):
    """A task domain, by the slug that task.md's `metadata.category` uses."""

    SOFTWARE_ENGINEERING = "software-engineering"
    CYBERSECURITY = "cybersecurity"
    FINANCE_ECONOMICS = "finance-economics"
    OFFICE_WHITE_COLLAR = "office-white-collar"
    MEDIA_CONTENT_PRODUCTION = "media-content-production"
    NATURAL_SCIENCE = "natural-science"
    MATHEMATICS_FORMAL_REASONING = "mathematics-or-formal-reasoning"
    INDUSTRIAL_PHYSICAL_SYSTEMS = "industrial-physical-systems"
    UNKNOWN = "unknown"
    """No domain could be told from the package (see `domain_map`); never a guess."""

    @property
    def display_name(self) -> str:
        """Human name, for tables and web pages."""
        return DISPLAY_NAMES[self]


DISPLAY_NAMES: dict[Domain, str] = {
    Domain.SOFTWARE_ENGINEERING: "Software engineering",
    Domain.CYBERSECURITY: "Cybersecurity",
    Domain.FINANCE_ECONOMICS: "Finance and economics",
    Domain.OFFICE_WHITE_COLLAR: "Office and white-collar work",
    Domain.MEDIA_CONTENT_PRODUCTION: "Media and content production",
    Domain.NATURAL_SCIENCE: "Natural science",
    Domain.MATHEMATICS_FORMAL_REASONING: "Mathematics and formal reasoning",
    Domain.INDUSTRIAL_PHYSICAL_SYSTEMS: "Industrial and physical systems",
    Domain.UNKNOWN: "Unknown domain",
}

KNOWN_DOMAINS: tuple[Domain, ...] = tuple(d for d in Domain if d is not Domain.UNKNOWN)
"""The eight domains a task can be placed in (everything but UNKNOWN)."""
SLUGS: tuple[str, ...] = tuple(d.value for d in KNOWN_DOMAINS)

#: No domain may make up more than this share of a held-out suite.
MAX_DOMAIN_SHARE = 0.20


def parse_domain(value: str) -> Domain:
    """Return the domain for a slug, or raise ValueError listing the valid slugs."""
    try:
        domain = Domain(value)
        if domain is Domain.UNKNOWN:
            raise ValueError(value)
        return domain
    except ValueError:
        raise ValueError(
            f"unknown domain {value!r}; use one of: {', '.join(SLUGS)}"
        ) from None


def composition_violations(
    counts: dict[Domain, int], max_share: float = MAX_DOMAIN_SHARE
) -> list[str]:
    """Domains whose share of a suite exceeds `max_share`, as readable messages.

    A suite with fewer than 1/max_share tasks cannot satisfy the rule with any mix, so
    the bound is ceil-relaxed: a domain may hold at most max(1, floor(max_share * n))
    tasks. Tasks of no known domain are one more group held to the same cap: the rule is
    computed on the mapping `domain_map` states, and an unmapped share cannot hide a
    domain's excess.
    """
    total = sum(counts.values())
    if total == 0:
        return ["the suite has no tasks"]
    limit = max(1, int(max_share * total + 1e-9))
    return [
        f"{d.value}: {n} of {total} tasks ({100 * n / total:.0f}%) exceeds the "
        f"{100 * max_share:.0f}% cap ({limit} tasks)"
        for d, n in sorted(counts.items())
        if n > limit
    ]
