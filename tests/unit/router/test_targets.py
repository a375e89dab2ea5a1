"""From the name a client sent to what the gateway routes: models, aliases, adapters,
hidden guard models, router-only bare names, unknown names (404), fallbacks, and the
limits checked before any replica is asked."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from llmgw.catalog import Catalog, Model
from llmgw.errors import ApiError, BadRequest, CatalogError, NotFound
from llmgw.router.request import Kind, parse_request
from llmgw.router.targets import Target, TargetResolver, check_limits

DEFAULT_PROFILE = "chat"

_DEFINITIONS: list[dict[str, Any]] = [
    {
        "name": "chat",
        "source": "Qwen/Qwen3-8B",
        "aliases": ["chat-latest"],
        "profiles": [{"name": "h100", "engine": "vllm", "gpu_class": "h100-80g", "tp": 2}],
        "scaling": {"min": 1, "max": 2},
        "adapters": [{"name": "chat-sql", "source": "org/sql-lora"}],
        "fallbacks": ["small-latest", "gpt"],
        "context_length": 8192,
        "max_output": 2048,
    },
    {
        "name": "small",
        "aliases": ["small-latest"],
        "source": "mirror/qwen3-0.6b-q4.gguf",
        "profiles": [{"name": "cpu", "engine": "llamacpp", "cpu_cores": 4}],
        "routing_profile": "least_load",
        "context_length": 4096,
    },
    {
        "name": "gpt",
        "source": "openai/gpt-4o-mini",
        "external": {
            "url": "https://api.openai.com",
            "model": "gpt-4o-mini",
            "api_key_file": "/etc/llmgw/openai",
        },
    },
    {
        "name": "judge",
        "source": "Qwen/Qwen3Guard-Gen-0.6B",
        "role": "guard",
        "guard": {"format": "qwen3guard"},
        "profiles": [{"name": "l4", "gpu_class": "l4-24g"}],
        "scaling": {"min": 1},
    },
    {"name": "bare"},
]


def _catalog(*extra: dict[str, Any]) -> Catalog:
    return Catalog.build(
        [Model.model_validate(d) for d in (*_DEFINITIONS, *extra)], served_statically={"bare"}
    )


@pytest.fixture(scope="module")
def resolver() -> TargetResolver:
    return TargetResolver(_catalog(), DEFAULT_PROFILE)


CHAT = Target(
    model="chat",
    engine_model="chat",
    routing_profile=DEFAULT_PROFILE,
    context_length=8192,
    max_output=2048,
    fallbacks=("small-latest", "gpt"),
)

RESOLVE_CASES = [
    pytest.param("chat", CHAT, id="model"),
    pytest.param("chat-latest", CHAT, id="alias-is-the-model"),
    pytest.param(
        "chat-sql",
        Target(
            model="chat",
            engine_model="chat-sql",
            routing_profile=DEFAULT_PROFILE,
            context_length=8192,
            max_output=2048,
            fallbacks=("small-latest", "gpt"),
            adapter_source="org/sql-lora",
        ),
        id="adapter-runs-on-its-model-under-its-own-name",
    ),
    pytest.param(
        "small-latest",
        Target(model="small", engine_model="small", routing_profile="least_load", context_length=4096),
        id="model-routing-profile-wins-over-default",
    ),
    pytest.param(
        "gpt",
        Target(model="gpt", engine_model="gpt", routing_profile=DEFAULT_PROFILE, external=True),
        id="external",
    ),
    pytest.param(
        "bare",
        Target(model="bare", engine_model="bare", routing_profile=DEFAULT_PROFILE),
        id="bare-catalog-entry",
    ),
]


@pytest.mark.parametrize("routable", [False, True])
@pytest.mark.parametrize(("name", "expected"), RESOLVE_CASES)
def test_resolve(resolver: TargetResolver, name: str, expected: Target, routable: bool) -> None:
    assert resolver.resolve(name, routable=routable) == expected


def test_a_name_only_replicas_list_is_routed_as_it_is(resolver: TargetResolver) -> None:
    # Router-only mode: a replica serves a name the catalog does not have.
    target = resolver.resolve("meta-llama/Llama-3.1-8B-Instruct", routable=True)
    assert target == Target(
        model="meta-llama/Llama-3.1-8B-Instruct",
        engine_model="meta-llama/Llama-3.1-8B-Instruct",
        routing_profile=DEFAULT_PROFILE,
    )
    assert (target.context_length, target.max_output, target.fallbacks, target.external) == (0, 0, (), False)


NOT_FOUND_CASES = [
    pytest.param("nope", False, id="unknown"),
    pytest.param("judge", False, id="guard-model-hidden"),
    pytest.param("judge", True, id="guard-model-hidden-though-its-replicas-list-it"),
    pytest.param("Chat", False, id="names-are-case-sensitive"),
    pytest.param("", False, id="empty"),
]


@pytest.mark.parametrize(("name", "routable"), NOT_FOUND_CASES)
def test_unknown_and_hidden_names_are_404(resolver: TargetResolver, name: str, routable: bool) -> None:
    with pytest.raises(NotFound) as caught:
        resolver.resolve(name, routable=routable)
    error = caught.value
    assert error.status == 404
    assert error.code == "model_not_found"
    assert error.param == "model"
    assert repr(name) in error.message
    assert "/v1/models" in error.message


def test_a_guard_model_and_an_unknown_name_read_the_same() -> None:
    # The refusal must not reveal that the guard model exists.
    resolver = TargetResolver(_catalog(), DEFAULT_PROFILE)
    messages = []
    for name in ("judge", "judgf"):
        with pytest.raises(NotFound) as caught:
            resolver.resolve(name, routable=False)
        messages.append(caught.value.message.replace(repr(name), "NAME"))
    assert messages[0] == messages[1]


def test_the_default_profile_is_the_resolvers() -> None:
    resolver = TargetResolver(_catalog(), "round_robin")
    assert resolver.resolve("chat", routable=False).routing_profile == "round_robin"
    assert resolver.resolve("small", routable=False).routing_profile == "least_load"
    assert resolver.resolve("elsewhere", routable=True).routing_profile == "round_robin"


FALLBACK_CASES = [
    pytest.param("small", "small", id="model"),
    pytest.param("small-latest", "small", id="alias"),
    pytest.param("gpt", "gpt", id="external"),
]


@pytest.mark.parametrize(("name", "model"), FALLBACK_CASES)
def test_fallback(resolver: TargetResolver, name: str, model: str) -> None:
    target = resolver.fallback(name)
    assert target is not None
    assert target == resolver.resolve(model, routable=False)


def test_the_fallback_chain_of_a_model_resolves_in_order(resolver: TargetResolver) -> None:
    chain = [resolver.fallback(name) for name in resolver.resolve("chat", routable=False).fallbacks]
    assert [t.model if t else None for t in chain] == ["small", "gpt"]


@pytest.mark.parametrize("name", ["nope", "chat-sql"])
def test_a_fallback_that_names_no_model_is_none(resolver: TargetResolver, name: str) -> None:
    assert resolver.fallback(name) is None


def test_a_guard_model_is_never_a_fallback() -> None:
    # The catalog refuses a fallback that names a guard model, and the resolver does not
    # serve one as a fallback either (belt and braces for catalogs built elsewhere).
    with pytest.raises(CatalogError, match="guard model"):
        _catalog(
            {
                "name": "tiny",
                "source": "mirror/tiny.gguf",
                "profiles": [{"name": "cpu", "engine": "llamacpp", "cpu_cores": 2}],
                "fallbacks": ["judge"],
            }
        )
    resolver = TargetResolver(_catalog(), DEFAULT_PROFILE)
    assert resolver.fallback("judge") is None


# --- limits ----------------------------------------------------------------------------------------


def _request(kind: Kind, prompt_chars: int, **fields: Any) -> Any:
    if kind is Kind.CHAT:
        # "user\n" + text + "\n": the prompt text is two characters more than the role and text.
        text = "x" * (prompt_chars - len("user\n\n"))
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": text}], **fields}
    elif kind is Kind.COMPLETIONS:
        body = {"model": "m", "prompt": "x" * prompt_chars, **fields}
    else:
        body = {"model": "m", "input": "x" * prompt_chars, **fields}
    request = parse_request(kind, orjson.dumps(body))
    assert len(request.prompt) == prompt_chars
    return request


LIMITED = Target(
    model="chat", engine_model="chat", routing_profile="chat", context_length=1000, max_output=200
)

ALLOWED_CASES = [
    pytest.param(Kind.CHAT, 600, {}, LIMITED, id="no-max-tokens-short-prompt"),
    pytest.param(Kind.CHAT, 600, {"max_tokens": 200}, LIMITED, id="max-tokens-at-max-output"),
    pytest.param(
        Kind.CHAT, 4800, {"max_tokens": 200}, LIMITED, id="floor-plus-max-tokens-exactly-the-context"
    ),
    pytest.param(Kind.COMPLETIONS, 6000, {}, LIMITED, id="floor-exactly-the-context"),
    pytest.param(Kind.COMPLETIONS, 6005, {}, LIMITED, id="floor-rounds-down"),
    pytest.param(
        Kind.CHAT,
        600,
        {"max_tokens": 10**6},
        Target("m", "m", "chat", context_length=0),
        id="no-limits-declared",
    ),
    pytest.param(
        Kind.CHAT,
        6000,
        {"max_tokens": 5000},
        Target("m", "m", "chat", context_length=0, max_output=8000),
        id="max-output-only",
    ),
    pytest.param(
        Kind.CHAT, 60, {"max_tokens": 990}, Target("m", "m", "chat", context_length=1000), id="context-only"
    ),
    pytest.param(Kind.EMBEDDINGS, 6000, {"max_tokens": 10**6}, LIMITED, id="embedding-has-no-output-bound"),
]


@pytest.mark.parametrize(("kind", "chars", "fields", "target"), ALLOWED_CASES)
def test_what_fits_is_let_through(kind: Kind, chars: int, fields: dict[str, Any], target: Target) -> None:
    check_limits(_request(kind, chars, **fields), target)


REFUSED_CASES = [
    pytest.param(
        Kind.CHAT, 60, {"max_tokens": 201}, "max_tokens", "max_tokens_too_large", id="over-max-output"
    ),
    pytest.param(
        Kind.CHAT,
        4806,
        {"max_tokens": 200},
        "messages",
        "context_length_exceeded",
        id="chat-prompt-plus-output",
    ),
    pytest.param(
        Kind.COMPLETIONS,
        4806,
        {"max_tokens": 200},
        "prompt",
        "context_length_exceeded",
        id="completion-prompt-plus-output",
    ),
    pytest.param(Kind.CHAT, 6006, {}, "messages", "context_length_exceeded", id="chat-prompt-alone"),
    pytest.param(
        Kind.COMPLETIONS, 6006, {}, "prompt", "context_length_exceeded", id="completion-prompt-alone"
    ),
    pytest.param(
        Kind.CHAT,
        60000,
        {"max_tokens": 500},
        "max_tokens",
        "max_tokens_too_large",
        id="max-output-checked-first",
    ),
]


@pytest.mark.parametrize(("kind", "chars", "fields", "param", "code"), REFUSED_CASES)
def test_what_cannot_fit_is_refused_before_any_replica_is_asked(
    kind: Kind, chars: int, fields: dict[str, Any], param: str, code: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        check_limits(_request(kind, chars, **fields), LIMITED)
    error = caught.value
    assert (error.status, error.param, error.code) == (400, param, code)
    assert "'chat'" in error.message
    assert isinstance(error, ApiError)


def test_the_newer_name_of_the_bound_is_held_to_max_output_too() -> None:
    with pytest.raises(BadRequest) as caught:
        check_limits(_request(Kind.COMPLETIONS, 60, max_completion_tokens=201), LIMITED)
    assert caught.value.code == "max_tokens_too_large"
    assert "201" in caught.value.message


def test_the_refusal_says_how_to_fix_it() -> None:
    with pytest.raises(BadRequest) as over:
        check_limits(_request(Kind.CHAT, 60, max_tokens=300), LIMITED)
    assert "at most 200" in over.value.message
    with pytest.raises(BadRequest) as long:
        check_limits(_request(Kind.CHAT, 4806, max_tokens=200), LIMITED)
    assert "801 tokens" in long.value.message
    assert "1000" in long.value.message
    assert "shorten the prompt or lower max_tokens" in long.value.message


def test_an_adapter_is_held_to_its_models_limits(resolver: TargetResolver) -> None:
    target = resolver.resolve("chat-sql", routable=False)
    with pytest.raises(BadRequest, match="max_tokens 4096"):
        check_limits(_request(Kind.CHAT, 60, max_tokens=4096), target)


def test_an_over_long_embedding_input_is_refused_naming_input() -> None:
    with pytest.raises(BadRequest) as caught:
        check_limits(_request(Kind.EMBEDDINGS, 6006), LIMITED)
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.param == "input"


def test_an_adapter_of_a_model_with_slots_is_loaded_on_demand() -> None:
    resolver = TargetResolver(
        _catalog(
            {
                "name": "lora-base",
                "source": "Qwen/Qwen3-8B",
                "profiles": [{"name": "h100", "engine": "vllm", "gpu_class": "h100-80g"}],
                "max_loaded_adapters": 2,
                "adapters": [{"name": "base-sql", "source": "org/base-sql"}],
            }
        ),
        DEFAULT_PROFILE,
    )
    adapter = resolver.resolve("base-sql", routable=False)
    assert adapter.on_demand
    assert (adapter.adapter_source, adapter.max_loaded_adapters) == ("org/base-sql", 2)
    # The model itself, and an adapter of a model without slots, are sent as they are.
    assert not resolver.resolve("lora-base", routable=False).on_demand
    assert not resolver.resolve("chat-sql", routable=False).on_demand
