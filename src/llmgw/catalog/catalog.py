"""The catalog: the validated set of models the cluster should serve, and the one
namespace clients name them in.

Names, aliases and adapter names share that namespace, so a collision is refused when
the catalog loads rather than found when one of them quietly shadows another at request
time. Fallbacks and canaries are resolved at load too: a typo in a fallback should stop
a deployment, not surface during the outage the fallback was for.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from llmgw.catalog.adapters import Adapter
from llmgw.catalog.environments import environment_model, environment_problems, group_environments
from llmgw.catalog.model import Model
from llmgw.catalog.quoting import q
from llmgw.catalog.validate import validate
from llmgw.errors import CatalogError


class Catalog:
    """The models the cluster should serve, resolved by name, alias or adapter name."""

    def __init__(self, models: dict[str, Model], aliases: dict[str, str], adapters: dict[str, str]) -> None:
        # Built by `build` only, which guarantees every name here resolves.
        self._models = models
        self._aliases = aliases
        self._adapters = adapters

    @classmethod
    def build(cls, models: Sequence[Model], served_statically: Collection[str] = ()) -> Catalog:
        """Normalises and validates every model; raises CatalogError with every problem found.

        `served_statically` are the model names static `endpoints:` serve (router-only
        mode): such a model may be a bare name with no profiles and no source."""
        problems: list[str] = []
        by_name: dict[str, Model] = {}
        for i, raw in enumerate(models):
            if raw.is_environment:
                continue  # the catalog's own entry, made again below
            m = raw.normalized()
            found = validate(m, served_statically=m.name in served_statically)
            if not m.name:
                problems.extend(f"models[{i}]: {p}" for p in found)
                continue
            problems.extend(found)
            if m.name in by_name:
                problems.append(f"model {q(m.name)} is declared twice; keep one, or give one another name")
                continue
            by_name[m.name] = m
        aliases, adapters = _namespace(by_name, problems)
        catalog = cls(by_name, aliases, adapters)
        problems.extend(catalog._reference_problems())
        # Hidden entries join the same mapping the catalog reads, after the references
        # were checked: clients cannot name them in fallbacks or canaries.
        for environment, members in group_environments(list(by_name.values())).items():
            if len(members) < 2:
                continue
            found = environment_problems(environment, members)
            problems.extend(found)
            hidden = environment_model(environment, members)
            if hidden.name in by_name or hidden.name in aliases or hidden.name in adapters:
                problems.append(
                    f"model {q(hidden.name)}: the name is taken by the hidden entry of comfyui environment"
                    f" {q(environment)}; rename the model or the environment"
                )
            elif not found:
                by_name[hidden.name] = hidden
        if problems:
            raise CatalogError(problems)
        return catalog

    def _reference_problems(self) -> list[str]:
        """Fallbacks and canaries that name nothing, or name the wrong thing."""
        out: list[str] = []
        canary_of: dict[str, str] = {}
        for name, m in self._models.items():
            who = f"model {q(name)}"
            out.extend(
                f"{who}: fallback {q(f)} is not a model or alias in the catalog; fix the name or remove it"
                for f in m.fallbacks
                if self.resolve(f) is None
            )
            out.extend(
                f"{who}: fallback {q(f)} is a guard model, which judges traffic and serves none; "
                "name a serving model"
                for f in m.fallbacks
                if (found := self.resolve(f)) is not None and found.is_guard
            )
            if m.canary is None:
                continue
            target = self.resolve(m.canary.model)
            wanted = q(m.canary.model)
            if target is None:
                out.append(
                    f"{who}: canary.model {wanted} is not in the catalog; add the candidate model first"
                )
            elif target.name == name:
                out.append(
                    f"{who}: canary.model names the model itself; name the candidate with the new weights"
                )
            elif target.is_guard:
                out.append(f"{who}: canary.model {wanted} is a guard model, which serves no clients")
            elif target.canary is not None:
                out.append(
                    f"{who}: canary.model {wanted} has a canary of its own; a candidate cannot have one"
                )
            elif target.name in canary_of:
                out.append(f"{who}: {wanted} is already the canary of model {q(canary_of[target.name])}")
            elif not 0 <= m.canary.percent <= 100:
                out.append(f"{who}: canary.percent {m.canary.percent} is not between 0 and 100")
            else:
                canary_of[target.name] = name
        return out

    def models(self) -> list[Model]:
        """Every model, normalised, in declaration order; hidden environment entries last."""
        return list(self._models.values())

    def names(self) -> list[str]:
        """The canonical names, sorted."""
        return sorted(self._models)

    def resolve(self, name: str) -> Model | None:
        """The model a client's name or alias stands for."""
        found = self._models.get(name)
        if found is not None:
            return found
        canonical = self._aliases.get(name)
        return self._models[canonical] if canonical is not None else None

    def resolve_adapter(self, name: str) -> tuple[Model, Adapter, int] | None:
        """An adapter by name: the model it runs on, the adapter, and its index among the
        model's adapters, which is the id the engine knows it by."""
        base = self._adapters.get(name)
        if base is None:
            return None
        m = self._models[base]
        for i, a in enumerate(m.adapters):
            if a.name == name:
                return m, a, i
        return None

    def aliases_of(self, name: str) -> list[str]:
        """The other names of the model `name` (a name or an alias) stands for."""
        m = self.resolve(name)
        return list(m.aliases) if m is not None else []

    def canary_of(self, name: str) -> str | None:
        """The model whose canary `name` is, or None."""
        for base, m in self._models.items():
            if m.canary is not None:
                target = self.resolve(m.canary.model)
                if target is not None and target.name == name:
                    return base
        return None

    def __len__(self) -> int:
        return len(self._models)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.resolve(name) is not None

    def __str__(self) -> str:
        """The catalog as `ctl models` prints it."""
        lines: list[str] = []
        for m in self.models():
            lines.append(f"{m.name} (min {m.scaling.min}, max {m.scaling.max})")
            lines.extend(
                f"  {p.name:<20} {p.engine:<10} {p.gpu_class:<12}"
                f" tp={p.tp} nodes={p.nodes} priority={p.priority}"
                for p in m.profiles
            )
        return "".join(f"{line}\n" for line in lines)


def _namespace(by_name: dict[str, Model], problems: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Aliases and adapter names mapped to their model, with every collision reported."""
    aliases: dict[str, str] = {}
    for name, m in by_name.items():
        for a in m.aliases:
            if a in by_name:
                problems.append(
                    f"model {q(name)}: alias {q(a)} is the name of another model; choose another alias"
                )
            elif a in aliases:
                problems.append(
                    f"alias {q(a)} is claimed by both model {q(aliases[a])} and model {q(name)}; keep one"
                )
            else:
                aliases[a] = name
    adapters: dict[str, str] = {}
    for name, m in by_name.items():
        for ad in m.adapters:
            if not ad.name or ad.name == name or adapters.get(ad.name) == name:
                continue  # refused by the model's own rules already
            if ad.name in by_name or ad.name in aliases or ad.name in adapters:
                problems.append(
                    f"model {q(name)}: adapter {q(ad.name)} is already a model, an alias or another adapter;"
                    " adapters are asked for by name like models, so rename it"
                )
            else:
                adapters[ad.name] = name
    return aliases, adapters
