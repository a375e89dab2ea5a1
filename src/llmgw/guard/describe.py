"""What each guard policy does, in one line per stage, for `llmgw config show`."""

from __future__ import annotations

from llmgw.config.guard import Guard, GuardCheck


def _check(check: GuardCheck) -> str:
    what = check.type
    if check.type == "regex":
        what = f"regex ({len(check.patterns)} pattern{'s' if len(check.patterns) != 1 else ''})"
    elif check.type == "model":
        narrowed = f" in {', '.join(check.categories)}" if check.categories else ""
        after = f"{check.timeout.total_seconds():g}s"
        what = f"judge {check.model}{narrowed}, on error {check.on_error} after {after}"
    return f"{what} → {check.action}"


def describe(guard: Guard) -> list[str]:
    """Comment lines: each policy's checks by stage, and which one applies to all."""
    if not guard.policies:
        return ["# guard: no policy; nothing is checked"]
    lines = ["# guard policies (what each does):"]
    for policy in guard.policies:
        applies = " (guard.default: every request)" if policy.name == guard.default else " (where attached)"
        lines.append(f"#   {policy.name}{applies}")
        for stage in ("input", "output"):
            checks = [_check(c) for c in policy.checks if c.stage in (stage, "both")]
            if checks:
                lines.append(f"#     {stage}: {'; '.join(checks)}")
    return lines
