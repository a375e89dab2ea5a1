"""The licence what a model makes comes under: shown beside every result and written
into a mesh, which travels without the API that made it."""

from __future__ import annotations

import re

from llmgw.catalog.quoting import q
from llmgw.core.strict import Strict

_LICENSE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+-]{0,63}$")
_REGION = re.compile(r"^[A-Z]{2}$")


class License(Strict):
    """The terms of a model's output. Not acted on by this version (`llmgw.config.inert`)."""

    id: str = ""
    """For machines: an SPDX identifier where there is one (MIT, Apache-2.0,
    CC-BY-NC-4.0), else the licence's own lowercase name (stability-community)."""
    name: str = ""
    """For people: the licence's own name."""
    url: str = ""
    notice: str = ""
    """What must accompany what was made: attribution, terms, training data."""
    commercial: bool | None = None
    """Whether output may be used commercially; None is not said, which is not yes."""
    excluded_regions: tuple[str, ...] = ()
    """Where the licence grants nothing: ISO 3166 codes, EU for the union."""
    revenue_cap_usd: int = 0
    """Yearly revenue above which another agreement is needed; 0 is none."""
    attribution: str = ""
    """What a product using the output must show."""

    def problems(self) -> list[str]:
        """What is wrong with the licence, as sentence tails naming the field and the fix."""
        out: list[str] = []
        if not self.name.strip():
            out.append("license.name is required: give the licence's own name, like Apache-2.0")
        if self.id and not _LICENSE_ID.match(self.id):
            out.append(
                f"license.id {q(self.id)} is not an SPDX-style identifier;"
                " use letters, digits, '.', '+' and '-', like CC-BY-NC-4.0"
            )
        for region in self.excluded_regions:
            if not _REGION.match(region):
                out.append(
                    f"license.excluded_regions {q(region)} is not a two-letter ISO 3166 code in capitals"
                    " (EU for the European Union)"
                )
        if self.revenue_cap_usd < 0:
            out.append(
                f"license.revenue_cap_usd {self.revenue_cap_usd} is negative; give the cap in USD, or 0"
            )
        return out
