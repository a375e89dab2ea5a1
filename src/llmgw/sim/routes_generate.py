"""`POST /v1/chat/completions` and `POST /v1/completions`: generation, streamed or whole.

A request is parsed, its prompt rendered and tokenized, its answer planned (textgen),
and the job handed to the engine; the handler then writes what the engine releases.
The fault in force is applied here: a status answer, a hang before headers, a stream
that stops or is cut after a few tokens, or the process exiting; and the replica's
quality (llmgw.sim.quality): its share of 500s and its slower first token. A client that goes
away cancels the job (aiohttp cancels the handler), so its blocks are freed at once.
"""

from __future__ import annotations

import asyncio
import math

import orjson
from aiohttp import web

from llmgw.sim import chunks
from llmgw.sim.chat_template import TemplateError, render_chat
from llmgw.sim.echo import all_text, echo_plan, judge_plan, last_user_text
from llmgw.sim.engine import TokenStream
from llmgw.sim.eval_answers import eval_answer
from llmgw.sim.faults import STATUS_FAULTS, Action
from llmgw.sim.options import SchedulingPolicy
from llmgw.sim.protocol import ApiError, Sampling, bad_request, parse_chat, parse_completion
from llmgw.sim.state import FAULT_EXIT_STATUS, SIM_STATE, SimState
from llmgw.sim.textgen import FinishReason, OutputPlan, plan_output, request_seed

_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """OpenAI chat completions."""
    state = request.app[SIM_STATE]
    arrived_at = state.clock()
    parsed = parse_chat(await request.read(), state.served_names())
    try:
        prompt = render_chat(parsed.messages)
    except TemplateError as exc:
        raise bad_request(str(exc), "messages") from exc
    ids = state.engine.tokenizer.encode(prompt)
    text = all_text(parsed.messages) if state.options.judge else last_user_text(parsed.messages)
    return await _generate(request, state, parsed.sampling, ids, chat=True, arrived_at=arrived_at, text=text)


async def completions(request: web.Request) -> web.StreamResponse:
    """OpenAI (legacy) text completions."""
    state = request.app[SIM_STATE]
    arrived_at = state.clock()
    parsed = parse_completion(await request.read(), state.served_names())
    prompt = parsed.prompt
    ids = state.engine.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
    text = prompt if isinstance(prompt, str) else ""
    return await _generate(request, state, parsed.sampling, ids, chat=False, arrived_at=arrived_at, text=text)


def plan_for(state: SimState, sampling: Sampling, prompt_ids: list[int], text: str = "") -> OutputPlan:
    """The answer to a request, sized within the model's context, or a 400; with
    `echo` or `judge` on, the answer made from the request's `text`."""
    limit = state.options.max_model_len
    room = limit - len(prompt_ids)
    if sampling.max_tokens is not None:
        if len(prompt_ids) + sampling.max_tokens > limit:
            raise bad_request(
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{len(prompt_ids) + sampling.max_tokens} tokens ({len(prompt_ids)} in the messages, "
                f"{sampling.max_tokens} in the completion). Please reduce the length of the messages "
                "or completion.",
                "max_tokens",
            )
        budget, reason = sampling.max_tokens, "length"
    else:
        if room < 1:
            raise bad_request(
                f"This model's maximum context length is {limit} tokens; the prompt has {len(prompt_ids)}. "
                "Please shorten the prompt.",
                "messages",
            )
        # No max_tokens: the sim's default length stands in for the model's end-of-sequence.
        budget, reason = min(state.options.default_max_tokens, room), "stop"
    finish: FinishReason = "length" if reason == "length" else "stop"
    if state.options.judge:
        return judge_plan(state.options.judge, text)
    if state.options.echo:
        return echo_plan(text, budget, sampling.max_tokens is not None)
    # The built-in eval suites' prompts get their table's answer (llmgw.sim.eval_answers).
    known = eval_answer(text, state.options.eval_wrong) if text else None
    if known is not None:
        return OutputPlan((known,), "stop")
    seed = request_seed(state.options.seed, sampling.seed, prompt_ids)
    return plan_output(seed=seed, max_tokens=budget, finish_reason=finish, stop=sampling.stop)


async def _generate(
    request: web.Request,
    state: SimState,
    sampling: Sampling,
    prompt_ids: list[int],
    *,
    chat: bool,
    arrived_at: float,
    text: str = "",
) -> web.StreamResponse:
    plan = plan_for(state, sampling, prompt_ids, text)
    if sampling.priority and state.options.scheduling_policy is not SchedulingPolicy.PRIORITY:
        # vLLM's own refusal (and wording) when started without --scheduling-policy priority.
        raise bad_request(
            f"Got priority {sampling.priority} but Priority scheduling is not enabled.", "priority"
        )
    action = state.faults.on_request(state.clock())
    if action is Action.EXIT:
        state.exit_process(FAULT_EXIT_STATUS)
        return _drop(request)
    if action is Action.REFUSE:
        return _drop(request)
    if action is Action.STATUS:
        status, kind = STATUS_FAULTS[state.faults.setting.mode]
        headers = {"Retry-After": "1"} if status in (429, 503) else {}
        raise ApiError(
            status, f"the sim engine is set to answer {status} (fault)", kind=kind, headers=headers
        )
    if action is Action.HANG_HEADERS:
        await asyncio.sleep(state.options.hang_s)
        return _drop(request)
    quality = state.quality
    if action is Action.SERVE and quality.on_request():
        raise ApiError(500, "the sim engine is set to fail this share of requests (error_rate)")
    if quality.quality.ttft_factor > 1:
        cost = state.engine.scheduler.cost
        await asyncio.sleep(quality.extra_wait_s(cost.prefill_s(len(prompt_ids)) + cost.decode_step_s(1)))
    stream = state.engine.start(
        prompt_ids,
        plan,
        every_token=sampling.stream,
        max_tokens_param=sampling.max_tokens,
        tag=state.response_id("chatcmpl" if chat else "cmpl"),
        arrived_at=arrived_at,
        priority=sampling.priority,
    )
    try:
        if sampling.stream:
            response = await _write_stream(request, state, stream, sampling, chat=chat, action=action)
        else:
            response = await _write_whole(request, state, stream, sampling, chat=chat, action=action)
    finally:
        state.engine.cancel(stream)
    if action is Action.SERVE and state.faults.on_served(state.clock()):
        # Exit once this answer is on the wire: the next connection finds the port closed.
        await response.prepare(request)
        await response.write_eof()
        asyncio.get_running_loop().call_soon(state.exit_process, FAULT_EXIT_STATUS)
    return response


def _usage(state: SimState, stream: TokenStream) -> dict[str, object]:
    job = stream.job
    cached = job.cached_tokens if state.options.prompt_tokens_details else None
    return chunks.usage(job.prompt_tokens, job.emitted, cached)


async def _write_stream(
    request: web.Request,
    state: SimState,
    stream: TokenStream,
    sampling: Sampling,
    *,
    chat: bool,
    action: Action,
) -> web.StreamResponse:
    job, plan = stream.job, stream.plan
    events = chunks.StreamChunks(
        chat=chat,
        response_id=job.tag,
        created=state.created,
        model=sampling.model,
        include_usage=sampling.include_usage,
    )
    response = web.StreamResponse(status=200, headers=_SSE_HEADERS)
    await response.prepare(request)
    faulty = action in (Action.HANG_STREAM, Action.CUT_STREAM)
    limit = state.faults.setting.stream_tokens if faulty else plan.tokens
    deltas, last = plan.deltas, plan.tokens - 1
    sent = 0
    while True:
        upto = min(job.emitted, limit)
        if upto > sent:
            out = [events.role()] if chat and sent == 0 else []
            for i in range(sent, upto):
                if deltas[i] or i == last:
                    out.append(events.token(deltas[i], plan.finish_reason if i == last else None))
            sent = upto
            await response.write(b"".join(out))
            now = state.clock()
            if math.isnan(job.first_write_at):
                job.first_write_at = now
            job.last_write_at = now
        if faulty and sent >= limit:
            state.engine.cancel(stream)
            return await _break_stream(request, state, response, action)
        if job.done:
            break
        await stream.wait()
    if sampling.include_usage:
        await response.write(events.usage(_usage(state, stream)))
    await response.write(chunks.DONE)
    return response


async def _write_whole(
    request: web.Request,
    state: SimState,
    stream: TokenStream,
    sampling: Sampling,
    *,
    chat: bool,
    action: Action,
) -> web.StreamResponse:
    job, plan = stream.job, stream.plan
    while not job.done:
        await stream.wait()
    job.first_write_at = job.last_write_at = state.clock()
    build = chunks.chat_response if chat else chunks.completion_response
    body = orjson.dumps(
        build(
            response_id=job.tag,
            created=state.created,
            model=sampling.model,
            text="".join(plan.deltas[: job.emitted]),
            finish_reason=plan.finish_reason,
            usage_info=_usage(state, stream),
        )
    )
    if action not in (Action.HANG_STREAM, Action.CUT_STREAM):
        return web.Response(body=body, content_type="application/json")
    # A faulty whole answer: headers and half the body, then silence or a cut.
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    return await _break_stream(request, state, response, action)


async def _break_stream(
    request: web.Request, state: SimState, response: web.StreamResponse, action: Action
) -> web.StreamResponse:
    if action is Action.HANG_STREAM:
        await asyncio.sleep(state.options.hang_s)
    _drop(request)
    return response


def _drop(request: web.Request) -> web.StreamResponse:
    """Close the connection without (further) answer; aiohttp then discards the response."""
    transport = request.transport
    if transport is not None:
        transport.close()
    return web.Response()
