"""How a guard model's answer is read: the formats the guardrails understand.

Each judge model family answers in its own shape, and reading one as another judges
nothing, so a guard model names its format and the catalog refuses one it cannot read:

- `qwen3guard`: Qwen3Guard-Gen, `Safety: Safe`, `Unsafe` or `Controversial`, then the
  categories;
- `llamaguard3`: Meta's Llama Guard 3, `safe`, or `unsafe` and the S1, S2, … codes;
- `shieldgemma`: Google's ShieldGemma, Yes or No for each policy it is asked about;
- `json`: any model prompted to answer `{"safe": false, "categories": ["..."]}`.
"""

from __future__ import annotations

FORMATS: tuple[str, ...] = ("qwen3guard", "llamaguard3", "shieldgemma", "json")


def known_format(name: str) -> bool:
    """Whether the guardrails can read answers in this format (exact, lowercase name)."""
    return name in FORMATS
