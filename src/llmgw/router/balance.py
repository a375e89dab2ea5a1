"""When load outweighs cache: the two guards that let the router give up an affinity.

Prefix and session affinity send a request where its cache is, but a replica that is
far busier than the others costs more in queueing than the cache saves. Loads are
non-negative numbers (requests in flight, queue depth) of the same kind across the
replicas compared.
"""

from __future__ import annotations

from collections.abc import Sequence


def imbalanced(loads: Sequence[float], balance_abs: float, balance_rel: float) -> bool:
    """Whether the replicas are too unevenly loaded for prefix affinity to win.

    True only when the spread is large both ways: `max - min > balance_abs` and
    `max > min * balance_rel`, the guard SGLang's cache-aware policy uses. Requiring both
    keeps a few requests of difference on idle replicas (relative only) and a steady
    offset on busy ones (absolute only) from counting. Fewer than two loads are never
    imbalanced.
    """
    if len(loads) < 2:
        return False
    high = max(loads)
    low = min(loads)
    return high - low > balance_abs and high > low * balance_rel


def session_holds(current_load: float, best_load: float, factor: float) -> bool:
    """Whether a session stays on its replica (load `current_load`) when the least
    loaded candidate has `best_load`.

    It holds while `current_load <= max(best_load, 1) * factor`. The floor of 1 is the
    choice for an idle best replica: without it, any load at all against an idle
    replica would break every session, so with best 0 and factor 2 a session holds
    through 2 requests in flight. It always holds when its replica is itself the least
    loaded, whatever the factor.
    """
    return current_load <= best_load or current_load <= max(best_load, 1.0) * factor
